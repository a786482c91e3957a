"""Control-flow graphs of module and function bodies.

A node is one small statement (``x = f(y)``) or the header of a compound
statement (the test of an ``if``, the target/iterable of a ``for``, the items of
a ``with``). Edges carry a label: ``True``/``False`` out of a test, ``BACK`` for
a loop's back edge, ``None`` otherwise. Every node knows the loops around it
(innermost last) and whether it runs with gradients disabled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Union

import libcst as cst

BACK = "back"

# Node kinds.
ENTRY, EXIT, STMT, IF, FOR, WHILE, WITH, MATCH, DEF = (
    "entry", "exit", "stmt", "if", "for", "while", "with", "match", "def",
)

Stmt = Union[cst.BaseSmallStatement, cst.BaseCompoundStatement]


@dataclass(eq=False)
class Node:
    id: int
    kind: str
    stmt: cst.CSTNode | None
    loops: tuple[int, ...] = ()
    no_grad: bool = False
    # The ``with`` headers around this node (innermost last), for framework contexts.
    withs: tuple[int, ...] = ()
    succ: list[tuple[int, object]] = field(default_factory=list)
    pred: list[tuple[int, object]] = field(default_factory=list)

    @property
    def loop(self) -> int | None:
        return self.loops[-1] if self.loops else None


@dataclass
class Loop:
    header: int
    body: set[int] = field(default_factory=set)
    parent: int | None = None


class CFG:
    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.loops: dict[int, Loop] = {}
        self.entry = self._new(ENTRY, None, (), False, ()).id
        self.exit = self._new(EXIT, None, (), False, ()).id

    def _new(self, kind, stmt, loops, no_grad, withs) -> Node:
        node = Node(len(self.nodes), kind, stmt, loops, no_grad, withs)
        self.nodes.append(node)
        for loop in loops:
            self.loops[loop].body.add(node.id)
        return node

    def link(self, src: int, dst: int, label: object = None) -> None:
        if (dst, label) not in self.nodes[src].succ:
            self.nodes[src].succ.append((dst, label))
            self.nodes[dst].pred.append((src, label))

    def loop_nodes(self, header: int) -> set[int]:
        return self.loops[header].body | {header}

    def in_loop(self, node_id: int, header: int) -> bool:
        return header in self.nodes[node_id].loops

    def reverse_postorder(self) -> list[int]:
        seen: set[int] = set()
        order: list[int] = []
        stack: list[tuple[int, Iterable]] = [(self.entry, iter(self.nodes[self.entry].succ))]
        seen.add(self.entry)
        while stack:
            node, it = stack[-1]
            for dst, _ in it:
                if dst not in seen:
                    seen.add(dst)
                    stack.append((dst, iter(self.nodes[dst].succ)))
                    break
            else:
                stack.pop()
                order.append(node)
        order.reverse()
        return order


# A dangling edge: (node id, label) still to be linked to whatever comes next.
Dangling = list[tuple[int, object]]


@dataclass
class _Context:
    loops: tuple[int, ...] = ()
    no_grad: bool = False
    withs: tuple[int, ...] = ()
    break_edges: list | None = None
    continue_target: int | None = None
    handlers: tuple[int, ...] = ()


def _is_grad_mode_call(expr: cst.BaseExpression, names: tuple[str, ...]) -> bool:
    if type(expr) is cst.Call:
        expr = expr.func
    if type(expr) is cst.Attribute:
        return expr.attr.value in names
    if type(expr) is cst.Name:
        return expr.value in names
    return False


def grad_mode_of_with(with_stmt: cst.With, current: bool) -> bool:
    """Whether the body of ``with_stmt`` runs with gradients disabled."""
    mode = current
    for item in with_stmt.items:
        expr = item.item
        if _is_grad_mode_call(expr, ("no_grad", "inference_mode")):
            mode = True
        elif _is_grad_mode_call(expr, ("enable_grad",)):
            mode = False
        elif (
            type(expr) is cst.Call
            and _is_grad_mode_call(expr, ("set_grad_enabled",))
            and expr.args
            and type(expr.args[0].value) is cst.Name
        ):
            mode = {"False": True, "True": False}.get(expr.args[0].value.value, mode)
    return mode


class _Builder:
    def __init__(self, cfg: CFG) -> None:
        self.cfg = cfg

    def node(self, kind: str, stmt, ctx: _Context, preds: Dangling) -> int:
        node = self.cfg._new(kind, stmt, ctx.loops, ctx.no_grad, ctx.withs)
        for src, label in preds:
            self.cfg.link(src, node.id, label)
        return node.id

    def block(self, body: Iterable[cst.CSTNode], preds: Dangling, ctx: _Context) -> Dangling:
        for stmt in body:
            preds = self.statement(stmt, preds, ctx)
        return preds

    def may_raise(self, node_id: int, ctx: _Context) -> None:
        for handler in ctx.handlers:
            self.cfg.link(node_id, handler, None)

    def statement(self, stmt: cst.CSTNode, preds: Dangling, ctx: _Context) -> Dangling:
        if type(stmt) is cst.SimpleStatementLine:
            for small in stmt.body:
                preds = self.small(small, preds, ctx)
            return preds
        if type(stmt) is cst.If:
            return self.if_(stmt, preds, ctx)
        if type(stmt) in (cst.For, cst.While):
            return self.loop(stmt, preds, ctx)
        if type(stmt) is cst.With:
            header = self.node(WITH, stmt, ctx, preds)
            self.may_raise(header, ctx)
            inner = _Context(
                ctx.loops, grad_mode_of_with(stmt, ctx.no_grad), ctx.withs + (header,),
                ctx.break_edges, ctx.continue_target, ctx.handlers,
            )
            return self.block(stmt.body.body, [(header, None)], inner)
        if type(stmt) is cst.Try or isinstance(stmt, getattr(cst, "TryStar", ())):
            return self.try_(stmt, preds, ctx)
        if type(stmt) is cst.Match:
            return self.match(stmt, preds, ctx)
        if type(stmt) in (cst.FunctionDef, cst.ClassDef):
            return [(self.node(DEF, stmt, ctx, preds), None)]
        # Anything else compound we do not model: treat as an opaque statement.
        return [(self.node(STMT, stmt, ctx, preds), None)]

    def small(self, stmt: cst.BaseSmallStatement, preds: Dangling, ctx: _Context) -> Dangling:
        node = self.node(STMT, stmt, ctx, preds)
        if type(stmt) is cst.Return:
            self.cfg.link(node, self.cfg.exit)
            return []
        if type(stmt) is cst.Raise:
            for handler in ctx.handlers:
                self.cfg.link(node, handler)
            if not ctx.handlers:
                self.cfg.link(node, self.cfg.exit)
            return []
        if type(stmt) is cst.Break and ctx.break_edges is not None:
            ctx.break_edges.append((node, None))
            return []
        if type(stmt) is cst.Continue and ctx.continue_target is not None:
            self.cfg.link(node, ctx.continue_target, BACK)
            return []
        self.may_raise(node, ctx)
        return [(node, None)]

    def if_(self, stmt: cst.If, preds: Dangling, ctx: _Context) -> Dangling:
        test = self.node(IF, stmt, ctx, preds)
        out = self.block(stmt.body.body, [(test, True)], ctx)
        orelse = stmt.orelse
        if orelse is None:
            return out + [(test, False)]
        if type(orelse) is cst.If:
            return out + self.if_(orelse, [(test, False)], ctx)
        return out + self.block(orelse.body.body, [(test, False)], ctx)

    def loop(self, stmt: cst.For | cst.While, preds: Dangling, ctx: _Context) -> Dangling:
        kind = FOR if type(stmt) is cst.For else WHILE
        header = self.node(kind, stmt, ctx, preds)
        self.cfg.loops[header] = Loop(header, parent=ctx.loops[-1] if ctx.loops else None)
        breaks: list = []
        inner = _Context(ctx.loops + (header,), ctx.no_grad, ctx.withs, breaks, header, ctx.handlers)
        for src, label in self.block(stmt.body.body, [(header, True)], inner):
            self.cfg.link(src, header, BACK)
        infinite = (
            kind == WHILE
            and type(stmt.test) in (cst.Name, cst.Integer)
            and getattr(stmt.test, "value", None) in ("True", "1")
        )
        exits: Dangling = [] if infinite else [(header, False)]
        if stmt.orelse is not None:
            exits = self.block(stmt.orelse.body.body, exits, ctx)
        return exits + breaks

    def try_(self, stmt, preds: Dangling, ctx: _Context) -> Dangling:
        handler_ids = []
        for handler in stmt.handlers:
            handler_ids.append(self.node(STMT, handler, ctx, []))
        body_ctx = _Context(
            ctx.loops, ctx.no_grad, ctx.withs, ctx.break_edges, ctx.continue_target,
            tuple(handler_ids) or ctx.handlers,
        )
        for src, label in preds:
            for handler in handler_ids:
                self.cfg.link(src, handler, label)
        out = self.block(stmt.body.body, preds, body_ctx)
        if stmt.orelse is not None:
            out = self.block(stmt.orelse.body.body, out, ctx)
        for handler_id, handler in zip(handler_ids, stmt.handlers):
            out += self.block(handler.body.body, [(handler_id, None)], ctx)
        if stmt.finalbody is not None:
            out = self.block(stmt.finalbody.body.body, out, ctx)
        return out

    def match(self, stmt: cst.Match, preds: Dangling, ctx: _Context) -> Dangling:
        subject = self.node(MATCH, stmt, ctx, preds)
        out: Dangling = [(subject, False)]
        for case in stmt.cases:
            out += self.block(case.body.body, [(subject, True)], ctx)
        return out


def build_cfg(body: Iterable[cst.CSTNode], no_grad: bool = False) -> CFG:
    cfg = CFG()
    builder = _Builder(cfg)
    exits = builder.block(body, [(cfg.entry, None)], _Context(no_grad=no_grad))
    for src, label in exits:
        cfg.link(src, cfg.exit, label)
    return cfg
