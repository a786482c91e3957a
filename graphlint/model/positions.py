"""Source positions of nodes, computed only for the statements asked about.

libcst's ``PositionProvider`` records the position of every node of a module
in one code-generation pass that updates a line and a column on every token:
about 0.6 s on a 240 KB trainer, paid by every file with a finding, which
needs the positions of a handful of nodes. Here a plain code-generation pass
(no position bookkeeping, about eight times cheaper) notes where each
statement starts and under which indentation; asking for a node then
generates only the innermost statement that holds it, with libcst's own
position-recording state started at that statement's line. The positions
are libcst's: tests/test_positions.py compares every node of every fixture
with ``PositionProvider``.
"""

from __future__ import annotations

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata.position_provider import NEWLINE_RE, PositionProvidingCodegenState


class Positions:
    """Node -> ``CodeRange``, as ``PositionProvider`` gives it, computed on first use."""

    def __init__(self, module: cst.Module) -> None:
        self._module = module
        self._starts: dict[cst.CSTNode, tuple[int, int, tuple[str, ...]]] | None = None
        self._parents: dict[cst.CSTNode, cst.CSTNode | None] = {}
        self._ranges: dict[cst.CSTNode, cst.CodeRange] = {}

    def __getitem__(self, node: cst.CSTNode) -> cst.CodeRange:
        found = self._ranges.get(node)
        if found is None:
            self._resolve(node)
            found = self._ranges[node]
        return found

    def __contains__(self, node: cst.CSTNode) -> bool:
        if node not in self._ranges:
            self._resolve(node)
        return node in self._ranges

    def items(self):
        """Every node's range (one full pass: for queries over the whole module)."""
        from libcst.metadata import MetadataWrapper, PositionProvider

        return MetadataWrapper(self._module, unsafe_skip_copy=True).resolve(PositionProvider).items()

    def _resolve(self, node: cst.CSTNode) -> None:
        if self._starts is None:
            self._starts = self._statement_starts()
        statement = node
        while statement is not None and statement not in self._starts:
            statement = self._parents.get(statement)
        if statement is None:
            if node in self._parents:  # the module itself, its header or footer lines
                self._ranges.update(self.items())
            return
        line, column, indent = self._starts[statement]
        state = PositionProvidingCodegenState(
            default_indent=self._module.default_indent,
            default_newline=self._module.default_newline,
            provider=_Ranges(self._ranges),
        )
        state.line, state.column = line, column
        state.indent_tokens = list(indent)
        statement._codegen(state)

    def _statement_starts(self) -> dict[cst.CSTNode, tuple[int, int, tuple[str, ...]]]:
        """(line, column, indentation) where each statement's code starts."""
        state = _StartsRecorder(self._module, self._parents)
        self._module._codegen(state)
        starts: dict[cst.CSTNode, tuple[int, int, tuple[str, ...]]] = {}
        line, column, done = 1, 0, 0
        for statement, (index, indent) in state.starts.items():  # in source order
            segments = NEWLINE_RE.split("".join(state.tokens[done:index]))
            if len(segments) > 1:
                line, column = line + len(segments) - 1, len(segments[-1])
            else:
                column += len(segments[0])
            done = index
            starts[statement] = (line, column, indent)
        return starts


class _Ranges:
    """What ``PositionProvidingCodegenState`` writes its ranges into (a provider's ``_computed``)."""

    def __init__(self, ranges: dict) -> None:
        self._computed = ranges


class _StartsRecorder(CodegenState):
    """Plain code generation noting, per statement, how many tokens precede it and
    the indentation it is generated under; and every node's parent."""

    def __init__(self, module: cst.Module, parents: dict) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.parents = parents
        self.starts: dict[cst.CSTNode, tuple[int, tuple[str, ...]]] = {}
        self._open: list[cst.CSTNode | None] = [None]

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.parents[node] = self._open[-1]
        self._open.append(node)
        if isinstance(node, cst.BaseStatement):
            self.starts[node] = (len(self.tokens), tuple(self.indent_tokens))

    def after_codegen(self, node: cst.CSTNode) -> None:
        self._open.pop()
