"""One source file as the fixes see it: its libcst tree, node positions and parents.

Fixes are computed from a finding's position and this tree; they never ask
the analysis model (graphlint/model/) for more than the finding says.
"""

from __future__ import annotations

import bisect
from typing import Iterator, TypeVar

import libcst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from graphlint.fix.edits import Edit, line_starts

N = TypeVar("N", bound=libcst.CSTNode)

# Expressions that take `.detach()`/`.item()` without parentheses around them.
_ATOMS = (libcst.Name, libcst.Attribute, libcst.Call, libcst.Subscript)
BLOCKS = (libcst.IndentedBlock, libcst.Module)
LOOPS = (libcst.For, libcst.While)
FUNCTIONS = (libcst.FunctionDef, libcst.Lambda)


class Document:
    @classmethod
    def parse(cls, text: str) -> Document | None:
        """The document of text CPython parses; None where libcst cannot parse it."""
        from graphlint.source import on_big_stack

        try:
            module = on_big_stack(libcst.parse_module, text)
        except (libcst.ParserSyntaxError, libcst.CSTValidationError, RecursionError, MemoryError):
            return None
        return cls(text, module)

    def __init__(self, text: str, module: libcst.Module) -> None:
        self.text = text
        self.module = module
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self._positions = wrapper.resolve(PositionProvider)
        self._parents = wrapper.resolve(ParentNodeProvider)
        self._by_start: dict[tuple[int, int], list[libcst.CSTNode]] = {}
        for node, where in self._positions.items():
            self._by_start.setdefault((where.start.line, where.start.column + 1), []).append(node)
        self._lines = text.splitlines()
        self._line_starts = line_starts(text)

    # -- positions -----------------------------------------------------------------
    def start(self, node: libcst.CSTNode) -> tuple[int, int]:
        where = self._positions[node].start
        return where.line, where.column + 1

    def end(self, node: libcst.CSTNode) -> tuple[int, int]:
        where = self._positions[node].end
        return where.line, where.column + 1

    def nodes_at(self, line: int, col: int, kind: type[N]) -> list[N]:
        return [node for node in self._by_start.get((line, col), ()) if isinstance(node, kind)]

    def line_text(self, row: int) -> str:
        return self._lines[row - 1] if 1 <= row <= len(self._lines) else ""

    def indentation(self, statement: libcst.CSTNode) -> str:
        text = self.line_text(self.start(statement)[0])
        return text[: len(text) - len(text.lstrip(" \t"))]

    def whole_lines(self, statement: libcst.CSTNode) -> tuple[tuple[int, int], tuple[int, int]]:
        """From the start of the statement's first line to the start of the line after it."""
        first = self.start(statement)[0]
        last = self.end(statement)[0]
        return (first, 1), (last + 1, 1)

    def code(self, node: libcst.CSTNode) -> str:
        return self.module.code_for_node(node)

    # -- tree ----------------------------------------------------------------------
    def parent(self, node: libcst.CSTNode) -> libcst.CSTNode | None:
        return self._parents.get(node)

    def ancestors(self, node: libcst.CSTNode) -> Iterator[libcst.CSTNode]:
        node = self.parent(node)
        while node is not None:
            yield node
            node = self.parent(node)

    def enclosing(self, node: libcst.CSTNode, kind) -> libcst.CSTNode | None:
        return next((a for a in self.ancestors(node) if isinstance(a, kind)), None)

    def statement_line(self, node: libcst.CSTNode) -> libcst.SimpleStatementLine | None:
        """The simple statement line holding ``node``, when it sits on a line of its own in a block."""
        line = (
            node if isinstance(node, libcst.SimpleStatementLine) else self.enclosing(node, libcst.SimpleStatementLine)
        )
        if line is None or not isinstance(self.parent(line), BLOCKS):
            return None
        return line

    def scope_of(self, node: libcst.CSTNode) -> libcst.CSTNode:
        """The function (or the module) whose body holds ``node``."""
        return self.enclosing(node, libcst.FunctionDef) or self.module

    def in_loop(self, node: libcst.CSTNode) -> bool:
        """Whether ``node`` runs in a loop of its own function."""
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (libcst.FunctionDef, libcst.ClassDef)):
                return False
            if isinstance(ancestor, LOOPS):
                return True
        return False

    def previous_statement_code(self, statement: libcst.CSTNode) -> str | None:
        """The code of the statement just before ``statement`` in its block, without comments."""
        block = self.parent(statement)
        body = getattr(block, "body", None)
        if not isinstance(body, (list, tuple)) or statement not in body:
            return None
        index = list(body).index(statement)
        if index == 0:
            return None
        previous = body[index - 1]
        if isinstance(previous, libcst.SimpleStatementLine) and len(previous.body) == 1:
            return self.code(previous.body[0]).strip()
        return None

    def walk(self, root: libcst.CSTNode | None = None) -> Iterator[libcst.CSTNode]:
        stack = [root or self.module]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def statement_lines_at(self, row: int) -> list[libcst.SimpleStatementLine]:
        return [
            node for node in self.walk() if isinstance(node, libcst.SimpleStatementLine) and self.start(node)[0] == row
        ]

    # -- edits ---------------------------------------------------------------------
    def offset(self, position: tuple[int, int]) -> int:
        return self._line_starts[position[0] - 1] + position[1] - 1

    def position(self, offset: int) -> tuple[int, int]:
        row = bisect.bisect_right(self._line_starts, offset)
        return row, offset - self._line_starts[row - 1] + 1

    def outer_range(self, expr: libcst.BaseExpression) -> tuple[tuple[int, int], tuple[int, int]]:
        """The expression's range with its own parentheses (libcst's positions leave them out)."""
        start, end = self.offset(self.start(expr)), self.offset(self.end(expr))
        start -= sum(len(self.code(paren)) for paren in getattr(expr, "lpar", ()))
        end += sum(len(self.code(paren)) for paren in getattr(expr, "rpar", ()))
        return self.position(start), self.position(end)

    def append_to(self, expr: libcst.BaseExpression, suffix: str) -> list[Edit]:
        """Edits turning ``expr`` into ``expr<suffix>`` (``(expr)<suffix>`` when it needs brackets)."""
        start, end = self.outer_range(expr)
        if isinstance(expr, _ATOMS) or getattr(expr, "lpar", ()):
            return [Edit(end, end, suffix)]
        return [Edit(start, start, "("), Edit(end, end, ")" + suffix)]

    def appended(self, expr: libcst.BaseExpression, suffix: str) -> str:
        """The text ``append_to`` makes of ``expr`` (for a fix's title)."""
        code = self.code(expr).strip()
        if isinstance(expr, _ATOMS) or getattr(expr, "lpar", ()):
            return code + suffix
        return f"({code}){suffix}"

    def wrap_in(self, expr: libcst.BaseExpression, function: str) -> list[Edit]:
        start, end = self.outer_range(expr)
        return [Edit(start, start, function + "("), Edit(end, end, ")")]

    def insert_before(self, statement: libcst.CSTNode, code: str) -> Edit:
        """A line of ``code`` inserted above ``statement``, at its indentation."""
        row = self.start(statement)[0]
        return Edit((row, 1), (row, 1), self.indentation(statement) + code + "\n")

    def insert_after(self, statement: libcst.CSTNode, code: str) -> Edit:
        """A line of ``code`` inserted below ``statement``, at its indentation."""
        row = self.end(statement)[0] + 1
        return Edit((row, 1), (row, 1), self.indentation(statement) + code + "\n")


def is_call_to(node: libcst.CSTNode, attribute: str) -> bool:
    """``<something>.<attribute>(...)``"""
    return (
        isinstance(node, libcst.Call) and isinstance(node.func, libcst.Attribute) and node.func.attr.value == attribute
    )


def function_defs(document: Document, name: str) -> list[libcst.FunctionDef]:
    return [node for node in document.walk() if isinstance(node, libcst.FunctionDef) and node.name.value == name]
