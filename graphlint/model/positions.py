"""Source positions of nodes, as libcst's ``CodeRange``: lines from 1, columns from 0 in characters.

Every node of the tree carries the span CPython's parser gave it (see
graphlint/model/syntax.py), its columns in UTF-8 bytes; only a line with
other than ASCII characters needs them counted again.
"""

from __future__ import annotations

from typing import NamedTuple

from graphlint.model import syntax as cst
from graphlint.model.walk import descendants


class CodePosition(NamedTuple):
    line: int
    column: int


class CodeRange(NamedTuple):
    start: CodePosition
    end: CodePosition


class Positions:
    """Node -> ``CodeRange``; a node the analysis made (no span) is not in it."""

    def __init__(self, module: cst.Module) -> None:
        self._module = module
        self._lines = module.lines

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        span = node._span
        if span is None:
            raise KeyError(node)
        line, column, end_line, end_column = span
        return CodeRange(
            CodePosition(line, self._characters(line, column)), CodePosition(end_line, self._characters(end_line, end_column))
        )

    def __contains__(self, node: cst.CSTNode) -> bool:
        return node._span is not None

    def items(self):
        """Every node's range (one full walk: for queries over the whole module)."""
        return [(node, self[node]) for node in descendants(self._module) if node._span is not None]

    def _characters(self, line: int, column: int) -> int:
        if line > len(self._lines):
            return column
        text = self._lines[line - 1]
        if text.isascii():
            return column
        return len(text[:column].decode("utf-8", "replace"))
