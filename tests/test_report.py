"""Text and JSON reports: Ruff's shapes, code frames, statistics, and room for confirmation verdicts."""

from __future__ import annotations

import io
import json
import os
import re
from dataclasses import dataclass

import pytest

from conftest import REPO_ROOT
from graphlint.finding import Finding
from graphlint.report import FORMATS, ReportOptions, rule_url, write
from graphlint.rules import ALL_CODES, RULES_BY_CODE


def render(findings, format_name="text", **options) -> str:
    out = io.StringIO()
    write(format_name, findings, out, ReportOptions(**options))
    return out.getvalue()


def f(code="GL001", line=3, col=5, end_line=None, end_col=20, path="train.py", **extra) -> Finding:
    return Finding(code, f"{code} message", path, line, col, end_line or line, end_col, extra=extra)


def test_text_lines_follow_ruff_and_end_with_a_summary():
    text = render([f("GL001", 3, 5), f("GL005", 10, 9)])
    assert text == (
        "train.py:3:5: GL001 GL001 message\n"
        "train.py:10:9: GL005 GL005 message\n"
        "Found 2 errors.\n"
    )


def test_summary_wording():
    assert render([f()]).endswith("Found 1 error.\n")
    assert render([]) == "All checks passed!\n"


def test_quiet_prints_findings_only():
    assert render([f()], quiet=True) == "train.py:3:5: GL001 GL001 message\n"
    assert render([], quiet=True) == ""


def test_statistics_text_is_ruffs_table():
    findings = [f("GL005", 1), f("GL001", 2), f("GL005", 3), f("GL000", 4)] + [f("GL005", n) for n in range(5, 13)]
    lines = render(findings, statistics=True).splitlines()
    assert lines == [
        "10\tGL005\tloss-history-retained",
        " 1\tGL000\tunanalysable-input",
        " 1\tGL001\tbackward-through-freed-graph",
        "Found 12 errors.",
    ]


def test_statistics_json_is_ruffs_shape():
    document = json.loads(render([f("GL001", 1), f("GL001", 2), f("GL003", 3)], "json", statistics=True))
    assert document == [
        {"code": "GL001", "name": "backward-through-freed-graph", "count": 2, "fixable": False, "fixable_count": 0},
        {"code": "GL003", "name": "gradient-step-order", "count": 1, "fixable": False, "fixable_count": 0},
    ]


def test_code_frame_marks_the_reported_range(tmp_path):
    source = tmp_path / "train.py"
    source.write_text("import torch\n\nfor x in data:\n    loss.backward()\n")
    finding = f("GL001", 4, 5, end_col=20, path=str(source))
    framed = render([finding], show_source=True)
    assert framed == (
        f"{source}:4:5: GL001 GL001 message\n"
        "  |\n"
        "4 |     loss.backward()\n"
        "  |     ^^^^^^^^^^^^^^^\n"
        "  |\n"
        "\n"
        "Found 1 error.\n"
    )
    assert "|" not in render([finding], show_source=False)


def test_code_frame_expands_tabs_and_clips_multi_line_ranges():
    sources = {"t.py": "for x in y:\n\tloss.backward(\n\t\tretain_graph=False)\n"}
    framed = render([f("GL001", 2, 2, end_line=3, end_col=22, path="t.py")], show_source=True, sources=sources)
    assert "2 |     loss.backward(\n  |     ^^^^^^^^^^^^^^\n" in framed


def test_code_frame_is_skipped_when_the_source_is_unavailable():
    framed = render([f(path="/no/such/file.py")], show_source=True)
    assert framed == "/no/such/file.py:3:5: GL001 GL001 message\nFound 1 error.\n"


def test_notebook_findings_name_their_cell():
    assert render([f(path="nb.ipynb", cell=4)], quiet=True) == "nb.ipynb:cell 4:3:5: GL001 GL001 message\n"


def test_json_has_ruffs_fields():
    [item] = json.loads(render([f("GL002", 7, 9, end_col=30, path="pkg/train.py", noqa_row=8)], "json"))
    assert item == {
        "cell": None,
        "code": "GL002",
        "end_location": {"row": 7, "column": 30},
        "filename": os.path.abspath("pkg/train.py"),
        "fix": None,
        "location": {"row": 7, "column": 9},
        "message": "GL002 message",
        "name": "hidden-state-not-detached",
        "noqa_row": 8,
        "url": rule_url("GL002"),
    }


def test_json_of_nothing_is_an_empty_list():
    assert json.loads(render([], "json")) == []


def test_gl000_has_no_url_and_rules_link_to_their_readme_section():
    assert rule_url("GL000") is None
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    anchors = {_github_anchor(heading) for heading in re.findall(r"^#+ (.+)$", readme, flags=re.MULTILINE)}
    for code in RULES_BY_CODE:
        url = rule_url(code)
        assert url and url.startswith("https://")
        assert url.split("#", 1)[1] in anchors, f"README.md has no section for {code}"


def _github_anchor(heading: str) -> str:
    """GitHub's heading slug: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@dataclass(frozen=True)
class FakeConfirmation:
    status: str
    evidence: str

    def line(self) -> str:
        return f"{self.status}: {self.evidence}"

    def to_json(self) -> dict:
        return {"status": self.status, "evidence": self.evidence}


def test_confirmation_verdicts_are_rendered_when_present():
    confirmed = f().with_(confirmation=FakeConfirmation("confirmed", "RuntimeError at line 3, iteration 2"))
    assert "\n  confirmed: RuntimeError at line 3, iteration 2\n" in render([confirmed])
    [item] = json.loads(render([confirmed], "json"))
    assert item["confirmation"] == {"status": "confirmed", "evidence": "RuntimeError at line 3, iteration 2"}
    [plain] = json.loads(render([f()], "json"))
    assert "confirmation" not in plain


def test_every_code_has_a_name_for_reports():
    from graphlint.report import rule_name

    assert all(rule_name(code) for code in ALL_CODES)


@pytest.mark.parametrize("format_name", sorted(FORMATS))
def test_every_format_renders_findings_and_nothing(format_name):
    assert render([], format_name) is not None
    assert "GL001" in render([f()], format_name)
