"""``graphlint check --fix / --unsafe-fixes / --diff``: what is written, printed and returned."""

from __future__ import annotations

import json
from pathlib import Path

from test_fix_apply import LEAK

MISSING_ZERO_GRAD = """\
import torch
from torch import nn

model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(4, 3)).pow(2).mean()
    loss.backward()
    optimizer.step()
"""

TWO_LOSSES = """\
import torch
from torch import nn

model = nn.Linear(3, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    optimizer.zero_grad()
    out = model(torch.randn(4, 3))
    a = out[:, 0].mean()
    b = out[:, 1].mean()
    a.backward()
    b.backward()
    optimizer.step()
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_diff_prints_the_change_and_touches_nothing(run_cli, tmp_path) -> None:
    path = _write(tmp_path, "leak.py", LEAK.format(comment=""))
    result = run_cli("check", "--diff", "leak.py")
    assert result.exit_code == 1
    assert "--- leak.py\n+++ leak.py\n" in result.stdout
    assert "-    total += loss\n+    total += loss.detach()\n" in result.stdout
    assert "Would fix 1 error." in result.stderr
    assert path.read_text() == LEAK.format(comment="")


def test_diff_exits_0_when_there_is_nothing_to_fix(run_cli, tmp_path) -> None:
    _write(tmp_path, "two.py", TWO_LOSSES)  # a GL001 finding with no fix
    result = run_cli("check", "--diff", "two.py")
    assert result.exit_code == 0 and result.stdout == ""
    result = run_cli("check", "--diff", "--unsafe-fixes", "two.py")
    assert result.exit_code == 0 and result.stdout == ""


def test_fix_writes_reports_and_exits_0_when_nothing_remains(run_cli, tmp_path) -> None:
    path = _write(tmp_path, "leak.py", LEAK.format(comment=""))
    result = run_cli("check", "--fix", "leak.py")
    assert result.exit_code == 0, result.stdout
    assert "Found 1 error (1 fixed, 0 remaining)." in result.stdout
    assert "total += loss.detach()" in path.read_text()
    again = run_cli("check", "--fix", "leak.py")
    assert again.exit_code == 0 and "All checks passed!" in again.stdout
    assert "total += loss.detach()" in path.read_text()


def test_fix_leaves_unsafe_fixes_unless_asked(run_cli, tmp_path) -> None:
    path = _write(tmp_path, "zg.py", MISSING_ZERO_GRAD)
    result = run_cli("check", "--fix", "zg.py")
    assert result.exit_code == 1
    assert "zg.py:8:5: GL003" in result.stdout
    assert "1 hidden fix can be enabled with the `--unsafe-fixes` option." in result.stdout
    assert path.read_text() == MISSING_ZERO_GRAD
    diff = run_cli("check", "--diff", "--unsafe-fixes", "zg.py")
    assert diff.exit_code == 1 and "+    optimizer.zero_grad()\n" in diff.stdout
    result = run_cli("check", "--fix", "--unsafe-fixes", "zg.py")
    assert result.exit_code == 0 and "(1 fixed, 0 remaining)" in result.stdout
    assert path.read_text() == MISSING_ZERO_GRAD + "    optimizer.zero_grad()\n"


def test_fix_reports_what_remains(run_cli, tmp_path) -> None:
    _write(tmp_path, "leak.py", LEAK.format(comment=""))
    _write(tmp_path, "two.py", TWO_LOSSES)
    result = run_cli("check", "--fix", ".")
    assert result.exit_code == 1
    assert "two.py:12:5: GL001" in result.stdout
    assert "Found 2 errors (1 fixed, 1 remaining)." in result.stdout


def test_json_and_sarif_carry_the_fix(run_cli, tmp_path) -> None:
    _write(tmp_path, "zg.py", MISSING_ZERO_GRAD)
    [item] = json.loads(run_cli("check", "--output-format", "json", "zg.py").stdout)
    assert item["fix"] == {
        "applicability": "unsafe",
        "message": "Insert `optimizer.zero_grad()` after the step",
        "edits": [
            {
                "content": "    optimizer.zero_grad()\n",
                "location": {"row": 10, "column": 1},
                "end_location": {"row": 10, "column": 1},
            }
        ],
    }
    sarif = json.loads(run_cli("check", "--output-format", "sarif", "zg.py").stdout)
    [result] = sarif["runs"][0]["results"]
    [replacement] = result["fixes"][0]["artifactChanges"][0]["replacements"]
    assert replacement["insertedContent"]["text"] == "    optimizer.zero_grad()\n"
    assert replacement["deletedRegion"]["startLine"] == 10


def test_fix_on_stdin_prints_the_fixed_source(run_cli, tmp_path) -> None:
    result = run_cli("check", "--fix", "--stdin-filename", "leak.py", "-", input=LEAK.format(comment=""))
    assert result.exit_code == 0
    assert result.stdout == LEAK.format(comment="").replace("total += loss\n", "total += loss.detach()\n")
    assert "(1 fixed, 0 remaining)" in result.stderr
    diff = run_cli("check", "--diff", "-", input=LEAK.format(comment=""))
    assert diff.exit_code == 1 and "+    total += loss.detach()\n" in diff.stdout


def test_per_file_ignores_are_not_fixed(run_cli, tmp_path) -> None:
    path = _write(tmp_path, "leak.py", LEAK.format(comment=""))
    _write(tmp_path, "pyproject.toml", '[tool.graphlint]\nper-file-ignores = { "leak.py" = ["GL005"] }\n')
    result = run_cli("check", "--fix", "leak.py")
    assert result.exit_code == 0
    assert path.read_text() == LEAK.format(comment="")
