"""The parse that skips libcst's node checks (text CPython compiled) builds the very same tree."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst._nodes.base import CSTNode

from graphlint.finding import Finding
from graphlint.source import parse

FIXTURES = sorted(Path(__file__).parent.parent.joinpath("fixtures").rglob("*.py"))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda path: str(path.relative_to(path.parents[1])))
def test_the_unvalidated_parse_builds_the_same_tree(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    checked = parse(text, str(path))
    unchecked = parse(text, str(path), validate=False)
    if isinstance(checked, Finding):
        assert unchecked == checked
    else:
        assert unchecked.deep_equals(checked)


def test_node_checks_are_back_after_the_parse_even_when_it_fails() -> None:
    checks = CSTNode.__dict__["__post_init__"]
    assert isinstance(parse("def broken(:\n", "t.py", validate=False), Finding)
    assert isinstance(parse("x = 1\n", "t.py", validate=False), cst.Module)
    assert CSTNode.__dict__["__post_init__"] is checks
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not an identifier")
