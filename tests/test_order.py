"""Findings do not depend on the order a file defines its functions and classes in.

The analysis learns facts in one scope and reads them in another (kinds of
objects, what a helper returns, marks on a statement's site). Reading one
before it is learnt made a verdict depend on which definition the file
writes first (a factory defined below its caller hid a GL001). Every
fixture is checked again with its top-level definitions in reverse order:
the same findings, each at the same statement with the same message (line
numbers aside).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from graphlint.checker import check_source

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = sorted(p for p in (ROOT / "fixtures").rglob("*.py") if not p.name.endswith(".fixed.py"))
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _reversed_definitions(source: str) -> str | None:
    """``source`` with its run of top-level definitions in reverse order (the
    statements between them keep their places); None with fewer than two."""
    body = ast.parse(source).body
    indices = [i for i, node in enumerate(body) if isinstance(node, _DEFINITIONS)]
    if len(indices) < 2:
        return None
    lines = source.splitlines(keepends=True)

    def start(node: ast.stmt) -> int:
        return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])

    run = body[indices[0] : indices[-1] + 1]
    texts = ["".join(lines[start(node) - 1 : node.end_lineno]).rstrip("\n") + "\n" for node in run]
    definitions = iter(reversed([text for node, text in zip(run, texts) if isinstance(node, _DEFINITIONS)]))
    ordered = [next(definitions) if isinstance(node, _DEFINITIONS) else text for node, text in zip(run, texts)]
    head = "".join(lines[: start(run[0]) - 1])
    tail = "".join(lines[run[-1].end_lineno :])
    return head + "\n\n".join(ordered) + tail


def _keys(source: str, path: str) -> list[tuple[str, str, str]]:
    lines = source.splitlines()
    return sorted(
        (finding.code, lines[finding.line - 1].strip(), re.sub(r"\d+", "N", finding.message))
        for finding in check_source(source, path)
    )


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(ROOT / "fixtures")))
def test_findings_do_not_depend_on_the_order_of_definitions(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    reordered = _reversed_definitions(source)
    if reordered is None:
        pytest.skip("fewer than two top-level definitions")
    assert _keys(reordered, str(path)) == _keys(source, str(path))


def test_the_definitions_are_reversed_and_the_rest_kept() -> None:
    source = "import os\n\n\ndef a():\n    pass\n\n\nX = 1\n\n\n@d\nclass B:\n    pass\n\n\nmain()\n"
    assert _reversed_definitions(source) == (
        "import os\n\n\n@d\nclass B:\n    pass\n\n\nX = 1\n\n\ndef a():\n    pass\n\n\nmain()\n"
    )
