"""Suppression comments: syntax, scope (the reported line / noqa row), and the one place they apply."""

from __future__ import annotations

import types

import pytest

import graphlint.checker
from graphlint.checker import check_source
from graphlint.finding import Finding
from graphlint.model import Diagnostic, Span
from graphlint.suppress import apply, noqa_row, parse_directive, scan


def finding(code: str, line: int, col: int = 1) -> Finding:
    return Finding(code, "message", "t.py", line, col, line, col + 1)


@pytest.mark.parametrize(
    "comment, covered, not_covered",
    [
        ("# noqa", ["GL001", "GL005", "GL000"], []),
        ("#noqa", ["GL001"], []),
        ("# NOQA", ["GL001"], []),
        ("# noqa: GL001", ["GL001"], ["GL003"]),
        ("# noqa:GL001,GL003", ["GL001", "GL003"], ["GL002"]),
        ("# noqa: GL001, GL003", ["GL001", "GL003"], ["GL002"]),
        ("# noqa : gl001 gl003", ["GL001", "GL003"], ["GL002"]),
        ("# noqa: E501", [], ["GL001"]),
        ("# noqa: GL00", ["GL001", "GL005"], []),  # a prefix, as flake8 allows
        ("# type: ignore  # noqa: GL002", ["GL002"], ["GL001"]),
        ("# noqa: GL001 -- the loss is rebuilt by the callback", ["GL001"], ["GL002"]),
        ("# graphlint: ignore[GL001]", ["GL001"], ["GL002"]),
        ("# graphlint: ignore[GL001, GL003]", ["GL001", "GL003"], ["GL004"]),
        ("#Graphlint:Ignore[gl004]", ["GL004"], ["GL001"]),
        ("# graphlint: ignore", ["GL001", "GL002"], []),
    ],
)
def test_directive_syntax(comment, covered, not_covered):
    directive = parse_directive(comment, 3)
    assert directive is not None
    assert all(directive.covers(code) for code in covered)
    assert not any(directive.covers(code) for code in not_covered)


@pytest.mark.parametrize("comment", ["# nothing to see", "# this is not a noqa", "# graphlint rocks", "# noqanope"])
def test_comments_that_are_not_directives(comment):
    assert parse_directive(comment, 1) is None


SOURCE = """\
loss.backward()  # noqa: GL001
loss.backward()  # graphlint: ignore[GL003]
loss.backward()
text = "# noqa"; loss.backward()
loss.backward()  # NoQA
"""


def test_apply_keeps_only_unsuppressed_findings():
    findings = [finding("GL001", 1), finding("GL002", 1), finding("GL003", 2), finding("GL001", 2),
                finding("GL001", 3), finding("GL001", 4), finding("GL004", 5)]
    kept = apply(findings, SOURCE)
    assert [(f.code, f.line) for f in kept] == [("GL002", 1), ("GL001", 2), ("GL001", 3), ("GL001", 4)]


def test_a_noqa_inside_a_string_is_not_a_directive():
    assert apply([finding("GL001", 4)], SOURCE) == [finding("GL001", 4)]
    multi = 'doc = """\n# noqa\n"""\nloss.backward()\n'
    assert scan(multi).directives == {}


def test_directives_before_a_syntax_error_still_count():
    source = "loss.backward()  # noqa\nx = (\n"
    assert apply([finding("GL001", 1), finding("GL000", 2)], source) == [finding("GL000", 2)]


def test_noqa_row_is_the_last_line_of_a_multi_line_string_or_continuation():
    source = (
        "x = f'''\n"        # 1
        "{loss}\n"          # 2
        "'''\n"             # 3
        "y = 1 + \\\n"      # 4
        "    loss \\\n"     # 5
        "    + 2\n"         # 6
        "loss.backward()\n"  # 7
        "z = (1,\n"          # 8
        "     2)\n"          # 9
    )
    comments = scan(source)
    assert [comments.noqa_row(line) for line in range(1, 10)] == [3, 3, 3, 6, 6, 6, 7, 8, 9]
    kept = apply([finding("GL005", 2), finding("GL005", 5), finding("GL001", 7)], source)
    assert [noqa_row(f) for f in kept] == [3, 6, 7]


def test_a_comment_on_the_noqa_row_suppresses_a_finding_inside_a_continued_statement():
    source = "y = 1 + \\\n    loss.item()  # noqa: GL005\n"
    assert apply([finding("GL005", 1)], source) == []


def test_a_comment_ending_in_a_backslash_is_not_a_continuation():
    source = "x = 1  # path\\\ny = 2\n"
    assert scan(source).noqa_rows == {}


def _fake_rule(code: str, needle: str) -> types.ModuleType:
    """A rule reporting every line that contains ``needle``: isolates suppression from the analysis."""

    def check(model):
        for number, text in enumerate(model.source.splitlines(), start=1):
            column = text.find(needle)
            if column >= 0:
                yield Diagnostic(Span(number, column + 1, number, column + 1 + len(needle)), f"saw {needle}")

    module = types.ModuleType(f"fake_{code}")
    module.CODE, module.NAME, module.SUMMARY, module.check = code, "fake", "fake", check
    return module


def test_check_source_applies_suppressions_after_the_rules(monkeypatch):
    monkeypatch.setattr(graphlint.checker, "ALL_RULES", (_fake_rule("GL001", "backward"), _fake_rule("GL005", "total")))
    source = (
        "loss.backward()\n"
        "loss.backward()  # noqa\n"
        "loss.backward()  # noqa: GL005\n"
        "total += loss; loss.backward()  # noqa: GL005\n"
        "total += loss; loss.backward()  # graphlint: ignore[GL001, GL005]\n"
    )
    assert [(f.line, f.code) for f in check_source(source, "t.py")] == [(1, "GL001"), (3, "GL001"), (4, "GL001")]


def test_a_real_finding_is_suppressed_by_noqa():
    buggy = (
        "import torch\n"
        "model = torch.nn.Linear(2, 1)\n"
        "loss = model(torch.ones(1, 2)).sum()\n"
        "loss.backward()\n"
        "loss.backward(){}\n"
    )
    reported = check_source(buggy.format(""), "t.py")
    assert [(f.line, f.code) for f in reported] == [(5, "GL001")]
    assert check_source(buggy.format("  # noqa: GL001"), "t.py") == []
    assert check_source(buggy.format("  # graphlint: ignore[GL001]"), "t.py") == []
    assert check_source(buggy.format("  # noqa: GL002"), "t.py") == reported
