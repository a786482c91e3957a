"""The fix applier: edits, composition, suppressions, parse safety and faithful file writes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from graphlint.checker import check_source
from graphlint.fix import attach_fixes, fix_text
from graphlint.fix.edits import SAFE, Edit, Fix, apply_edits, overlaps
from graphlint.fix.files import FileChangedError, fix_file, write_atomically

LEAK = """\
import torch
from torch import nn

model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
total = torch.zeros(())
for step in range(3):
    optimizer.zero_grad()
    loss = model(torch.randn(4, 3)).pow(2).mean()
    loss.backward()
    optimizer.step()
    total += loss{comment}
print(total.item())
"""

# Four rules' findings in one loop: their fixes must compose in one run.
EVERYTHING = """\
import torch
from torch import nn

rnn = nn.GRU(3, 4)
head = nn.Linear(4, 1)
optimizer = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.1)
hidden = torch.zeros(1, 2, 4)
history = []
for step in range(3):
    out, hidden = rnn(torch.randn(5, 2, 3), hidden)
    loss = head(out).pow(2).mean()
    loss.backward()
    optimizer.step()
    history.append(loss)
    for group in optimizer.param_groups:
        group["lr"] = 0.1 * loss
print(len(history))
"""


def test_apply_edits_replaces_inserts_and_keeps_crlf() -> None:
    text = "a = 1\r\nb = 2\r\n"
    edits = [Edit((2, 1), (2, 1), "x = 0\n"), Edit((1, 5), (1, 6), "3")]
    assert apply_edits(text, edits) == "a = 3\r\nx = 0\r\nb = 2\r\n"


def test_overlapping_edits_are_refused() -> None:
    with pytest.raises(ValueError):
        apply_edits("abcdef\n", [Edit((1, 1), (1, 4), "x"), Edit((1, 3), (1, 5), "y")])
    a = Fix("a", SAFE, (Edit((1, 1), (1, 4), "x"),))
    b = Fix("b", SAFE, (Edit((1, 3), (1, 5), "y"),))
    c = Fix("c", SAFE, (Edit((2, 1), (2, 1), "z"),))
    assert overlaps(a, b) and not overlaps(a, c)


def test_fix_json_has_ruffs_shape() -> None:
    source = LEAK.format(comment="")
    [finding] = attach_fixes(check_source(source, "leak.py"), source, "leak.py")
    assert finding.fix.to_json() == {
        "applicability": "safe",
        "message": "Accumulate `loss.detach()` instead of the graph-carrying value",
        "edits": [
            {"content": ".detach()", "location": {"row": 12, "column": 18}, "end_location": {"row": 12, "column": 18}}
        ],
    }


def test_fix_message_brackets_an_expression_as_the_edit_does() -> None:
    source = LEAK.format(comment="").replace("    total += loss\n", "    total += loss - loss.mean()\n")
    [finding] = attach_fixes(check_source(source, "leak.py"), source, "leak.py")
    assert finding.fix.message == "Accumulate `(loss - loss.mean()).detach()` instead of the graph-carrying value"
    assert fix_text(source, "leak.py").text.count("total += (loss - loss.mean()).detach()") == 1


def test_several_fixes_compose_in_one_run() -> None:
    outcome = fix_text(EVERYTHING, "everything.py", unsafe=True)
    assert sorted(f.code for f in outcome.fixed) == ["GL002", "GL003", "GL004", "GL005"]
    assert outcome.remaining == []
    assert "    hidden = hidden.detach()\n    out, hidden = rnn(" in outcome.text
    assert "    optimizer.step()\n    optimizer.zero_grad()\n" in outcome.text
    assert "history.append(loss.detach())" in outcome.text
    assert 'group["lr"] = float(0.1 * loss)' in outcome.text
    assert fix_text(outcome.text, "everything.py", unsafe=True).text == outcome.text


def test_unsafe_fixes_wait_for_unsafe_fixes() -> None:
    outcome = fix_text(EVERYTHING, "everything.py", unsafe=False)
    assert [f.code for f in outcome.remaining] == ["GL003"]
    assert "zero_grad" not in outcome.text


def test_suppressed_finding_is_not_fixed() -> None:
    source = LEAK.format(comment="  # noqa: GL005")
    assert fix_text(source, "leak.py").text == source


def test_a_line_with_a_suppression_comment_is_never_edited() -> None:
    # The GL005 finding is not suppressed, but its line carries a directive for another code.
    source = LEAK.format(comment="  # graphlint: ignore[GL001]")
    findings = attach_fixes(check_source(source, "leak.py"), source, "leak.py")
    assert [f.code for f in findings] == ["GL005"] and findings[0].fix is None
    assert fix_text(source, "leak.py").text == source


def test_a_fix_that_would_not_parse_is_dropped(monkeypatch) -> None:
    from graphlint import fix as fix_package

    def broken(finding, document):
        return Fix("break it", SAFE, (Edit((finding.line, finding.col), (finding.line, finding.col), "def ("),))

    monkeypatch.setitem(fix_package.FIXERS, "GL005", broken)
    source = LEAK.format(comment="")
    outcome = fix_text(source, "leak.py")
    assert outcome.text == source and not outcome.fixed
    assert [f.code for f in outcome.remaining] == ["GL005"]


def test_a_fixer_bug_costs_its_fix_only(monkeypatch) -> None:
    from graphlint import fix as fix_package

    def crashing(finding, document):
        raise RuntimeError("bug")

    monkeypatch.delenv("GRAPHLINT_DEBUG", raising=False)
    monkeypatch.setitem(fix_package.FIXERS, "GL005", crashing)
    source = LEAK.format(comment="")
    assert fix_text(source, "leak.py").text == source


def _fix_on_disk(path: Path):
    findings = check_source(path.read_bytes(), str(path))
    return fix_file(str(path), findings, None, unsafe=False, write=True)


def test_file_keeps_encoding_bom_newlines_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "leak.py"
    text = "# -*- coding: latin-1 -*-\n# caf\xe9\n" + LEAK.format(comment="")
    path.write_bytes(text.replace("\n", "\r\n").encode("latin-1"))
    os.chmod(path, 0o751)
    result = _fix_on_disk(path)
    assert result.written and [f.code for f in result.fixed] == ["GL005"]
    data = path.read_bytes()
    assert b"caf\xe9" in data and b"total += loss.detach()\r\n" in data
    assert b"\n" not in data.replace(b"\r\n", b"")
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert [p.name for p in tmp_path.iterdir()] == ["leak.py"]

    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbf" + LEAK.format(comment="").encode())
    assert _fix_on_disk(bom).written
    assert bom.read_bytes().startswith(b"\xef\xbb\xbf") and b"loss.detach()" in bom.read_bytes()


def test_a_file_changed_since_it_was_read_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "leak.py"
    path.write_text("old = 1\n")
    with pytest.raises(FileChangedError):
        write_atomically(path, b"new = 1\n", expected=b"something else\n")
    assert path.read_text() == "old = 1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["leak.py"]


def test_fix_file_reports_a_concurrent_change(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "leak.py"
    path.write_text(LEAK.format(comment=""))
    findings = check_source(path.read_bytes(), str(path))
    from graphlint.fix import files

    real = files.fix_text

    def edit_meanwhile(*args, **kwargs):
        outcome = real(*args, **kwargs)
        path.write_text(LEAK.format(comment="  # edited by the user"))
        return outcome

    monkeypatch.setattr(files, "fix_text", edit_meanwhile)
    result = fix_file(str(path), findings, None, unsafe=False, write=True)
    assert not result.written and "changed on disk" in result.error
    assert "# edited by the user" in path.read_text() and not result.fixed
    assert [f.code for f in result.remaining] == ["GL005"]
