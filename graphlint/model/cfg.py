"""Control-flow graphs of module and function bodies.

A node is one small statement (``x = f(y)``) or the header of a compound
statement (the test of an ``if``, the target/iterable of a ``for``, the items of
a ``with``). Edges carry a label: ``True``/``False`` out of a test, ``BACK`` for
a loop's back edge, ``None`` otherwise. Every node knows the loops around it
(innermost last) and whether it runs with gradients disabled.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Union

import libcst as cst

from graphlint.model.names import bound_names, dotted
from graphlint.model.walk import children

BACK = "back"

# Node kinds.
ENTRY, EXIT, STMT, IF, FOR, WHILE, WITH, MATCH, DEF, JOIN = (
    "entry", "exit", "stmt", "if", "for", "while", "with", "match", "def", "join",
)
# The label of an edge into a JOIN node: ("arm", index of the branch it leaves).
ARM = "arm"

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
    # For the header of a loop's peeled first iteration: the loop it belongs to.
    peel_of: int | None = None
    # For a JOIN: per branch of the ``if``, the ids of the statements inside it.
    arms: tuple[frozenset[int], ...] = ()
    # For an IF testing a flag (``if cfg.aux:``, ``if not args.amp:``) that nothing
    # re-binds while it may be tested again: (the flag, True when the test is the
    # flag itself). Tests of one flag agree on every path (see CFG.correlated).
    decision: tuple[str, bool] | None = None
    # For the JOIN of the last test of an ``if``/``elif`` chain without ``else``: names
    # every branch binds that are unbound when the chain starts, its tests being
    # loop-invariant. If one of them is read after the chain, the path that takes no
    # branch would have raised NameError on the first iteration: it never runs.
    unbound_if_skipped: frozenset[str] = frozenset()
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
        # Flags (Node.decision) whose tests must agree, and the last IF testing each
        # (past it, the paths of both values can merge again).
        self.correlated: dict[str, int] = {}
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
    # Loop counters whose value is known in this copy of a body: True on the
    # first iteration (``t == 0``), False on every later one.
    first: tuple[tuple[str, bool], ...] = ()
    # Names bound anywhere in the bodies of the enclosing loops.
    loop_assigned: frozenset[str] = frozenset()

    def inside(self, **changes) -> "_Context":
        return replace(self, **changes)


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
    def __init__(self, cfg: CFG, peel: bool, joins: bool, bound: Iterable[str]) -> None:
        self.cfg = cfg
        self.peel = peel
        self.joins = joins
        # Names bound by the statements built so far (in the order of the source),
        # and how many times each.
        self.bound: set[str] = set(bound)
        self.bindings: dict[str, int] = {}
        # (flag, IF node, names its branches bind, names its branches read)
        self.flag_tests: list[tuple[str, int, set[str], set[str]]] = []

    def _bind(self, names: set[str]) -> None:
        self.bound |= names
        for name in names:
            self.bindings[name] = self.bindings.get(name, 0) + 1

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
            inner = ctx.inside(no_grad=grad_mode_of_with(stmt, ctx.no_grad), withs=ctx.withs + (header,))
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
        self._bind(_binds(stmt))
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

    def if_(self, stmt: cst.If, preds: Dangling, ctx: _Context, unbound: frozenset | None = None) -> Dangling:
        if unbound is None:
            unbound = self._unbound_if_no_branch(stmt, ctx) if self.joins else frozenset()
        test = self.node(IF, stmt, ctx, preds)
        if self.joins:
            decision = self._flag_decision(stmt.test, ctx)
            if decision is not None:
                orelse = stmt.orelse
                branches = [*stmt.body.body, *(
                    [orelse] if type(orelse) is cst.If else orelse.body.body if orelse is not None else []
                )]
                self.flag_tests.append((decision[0], test, _assigned_in(branches), _names_read(branches)))
                self.cfg.nodes[test].decision = decision
        known = _constant_test(stmt.test)
        if known is None:
            known = _first_iteration_test(stmt.test, dict(ctx.first))
        out = [] if known is False else self.block(stmt.body.body, [(test, True)], ctx)
        orelse = stmt.orelse
        if known is True:
            return out
        if orelse is None:
            other = [(test, False)]
        elif type(orelse) is cst.If:
            other = self.if_(orelse, [(test, False)], ctx, unbound)
        else:
            other = self.block(orelse.body.body, [(test, False)], ctx)
        if not self.joins or known is not None:
            return out + other
        # Both branches meet at a JOIN node that knows which statements each one ran.
        arms = (_statement_ids(stmt.body.body), _statement_ids([orelse] if orelse is not None else []))
        join = self.cfg._new(JOIN, None, ctx.loops, ctx.no_grad, ctx.withs)
        join.arms = arms
        if orelse is None:
            join.unbound_if_skipped = unbound
        for index, exits in enumerate((out, other)):
            for src, label in exits:
                self.cfg.link(src, join.id, (ARM, index))
        return [(join.id, None)]

    def _flag_decision(self, test: cst.BaseExpression, ctx: _Context) -> tuple[str, bool] | None:
        polarity = True
        while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            test, polarity = test.expression, not polarity
        flag = dotted(test) if type(test) in (cst.Name, cst.Attribute) else None
        if flag is None:
            return None
        root = flag.split(".")[0]
        if root in ctx.loop_assigned:
            return None
        # Named after the bindings of its root so far: a re-binding in between makes another flag.
        return f"{flag}#{self.bindings.get(root, 0)}", polarity

    def _unbound_if_no_branch(self, stmt: cst.If, ctx: _Context) -> frozenset:
        """Names every branch of an ``if``/``elif`` chain without ``else`` binds, unbound
        before it, when its tests cannot change from one iteration to the next."""
        tests, arms, current = [], [], stmt
        while type(current) is cst.If:
            tests.append(current.test)
            arms.append(current.body.body)
            current = current.orelse
        if current is not None or not ctx.loops:
            return frozenset()
        for test in tests:
            names = _test_names(test)
            if names is None or names & ctx.loop_assigned:
                return frozenset()
        common = set.intersection(*(_assigned_in(arm) for arm in arms))
        return frozenset(common - self.bound)

    def loop(self, stmt: cst.For | cst.While, preds: Dangling, ctx: _Context) -> Dangling:
        kind = FOR if type(stmt) is cst.For else WHILE
        counter = _zero_based_counter(stmt) if self.peel else None
        peeled = counter is not None and _tests_first_iteration(stmt.body, counter)
        header = self.node(kind, stmt, ctx, [] if peeled else preds)
        if kind == FOR:
            self._bind(bound_names(stmt.target))
        self.cfg.loops[header] = Loop(header, parent=ctx.loops[-1] if ctx.loops else None)
        breaks: list = []
        inner = ctx.inside(loops=ctx.loops + (header,), break_edges=breaks, continue_target=header)
        if self.joins:
            inner = inner.inside(loop_assigned=ctx.loop_assigned | _assigned_in([stmt]))
        if peeled:
            # `if t == 0: loss = l` / `else: loss = loss + l`: the first iteration gets a
            # copy of the body of its own, entered from a header of its own, so the later
            # iterations never see a state in which the first-iteration branch was skipped.
            first = self.node(kind, stmt, ctx, preds)
            self.cfg.nodes[first].peel_of = header
            copy = inner.inside(first=ctx.first + ((counter, True),))
            for src, label in self.block(stmt.body.body, [(first, True)], copy):
                self.cfg.link(src, header, BACK)
            inner = inner.inside(first=ctx.first + ((counter, False),))
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
        body_ctx = ctx.inside(handlers=tuple(handler_ids) or ctx.handlers)
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


def build_cfg(
    body: Iterable[cst.CSTNode], no_grad: bool = False, peel: bool = False, joins: bool = False,
    bound: Iterable[str] = (),
) -> CFG:
    """The CFG of ``body``; with ``peel``, loops that test for their first iteration
    (``if t == 0:``) get that iteration as a separate copy of the body; with
    ``joins``, the branches of each ``if`` meet at a JOIN node. ``bound``: the
    names bound when the body starts (a function's parameters)."""
    cfg = CFG()
    builder = _Builder(cfg, peel, joins, bound)
    exits = builder.block(body, [(cfg.entry, None)], _Context(no_grad=no_grad))
    for src, label in exits:
        cfg.link(src, cfg.exit, label)
    # A flag matters when a later test of it reads what an earlier one's branch bound.
    correlated = {
        flag
        for flag, node, binds, _ in builder.flag_tests
        for other, later, _, reads in builder.flag_tests
        if other == flag and later > node and binds & reads
    }
    cfg.correlated = {flag: max(node for other, node, _, _ in builder.flag_tests if other == flag) for flag in correlated}
    return cfg


# ----- first-iteration tests -----

def _zero_based_counter(stmt: cst.For | cst.While) -> str | None:
    """The name counting a ``for`` loop's iterations from 0 (``for t in range(n)``,
    ``for i, batch in enumerate(loader)``), if any."""
    if type(stmt) is not cst.For or type(stmt.iter) is not cst.Call:
        return None
    call, target = stmt.iter, stmt.target
    func = call.func.value if type(call.func) is cst.Name else None
    positional = [arg for arg in call.args if arg.keyword is None and arg.star == ""]
    if func == "range" and type(target) is cst.Name and positional:
        starts_at_zero = len(positional) == 1 or _is_zero(positional[0].value)
        return target.value if starts_at_zero and len(positional) == len(call.args) else None
    if func == "enumerate" and type(target) is cst.Tuple and target.elements:
        start = [arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "start"]
        start += [arg.value for arg in positional[1:]]
        index = target.elements[0].value
        if type(index) is cst.Name and all(_is_zero(value) for value in start):
            return index.value
    return None


def _constant_test(test: cst.BaseExpression) -> bool | None:
    """``if True:``, ``if 0:``: a branch that always or never runs."""
    if type(test) is cst.Name and test.value in ("True", "False"):
        return test.value == "True"
    if type(test) is cst.Integer:
        return test.value != "0"
    return None


def _is_zero(expr: cst.BaseExpression) -> bool:
    return type(expr) is cst.Integer and expr.value == "0"


def _first_iteration_test(test: cst.BaseExpression, known: dict[str, bool]) -> bool | None:
    """The test's value when it only compares a counter of ``known`` with 0 (None otherwise)."""
    if not known:
        return None
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        inner = test.expression
        if type(inner) is cst.Name and inner.value in known:
            return known[inner.value]
        value = _first_iteration_test(inner, known)
        return None if value is None else not value
    if type(test) is cst.Name and test.value in known:
        return not known[test.value]  # a counter is truthy after the first iteration
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    left, (target,) = test.left, test.comparisons
    right, operator = target.comparator, type(target.operator)
    if type(left) is cst.Name and left.value in known and type(right) is cst.Integer:
        first, number = known[left.value], int(right.value)
    elif type(right) is cst.Name and right.value in known and type(left) is cst.Integer:
        first, number = known[right.value], int(left.value)
        operator = _MIRRORED.get(operator, operator)
    else:
        return None
    # On the first iteration the counter is 0; on later ones it is 1 or more.
    if first:
        return _COMPARE[operator](0, number) if operator in _COMPARE else None
    outcomes = {_COMPARE[operator](value, number) for value in (1, max(number, 1), number + 1)} if operator in _COMPARE else set()
    return outcomes.pop() if len(outcomes) == 1 else None


_COMPARE = {
    cst.Equal: lambda a, b: a == b,
    cst.NotEqual: lambda a, b: a != b,
    cst.LessThan: lambda a, b: a < b,
    cst.LessThanEqual: lambda a, b: a <= b,
    cst.GreaterThan: lambda a, b: a > b,
    cst.GreaterThanEqual: lambda a, b: a >= b,
}
_MIRRORED = {
    cst.LessThan: cst.GreaterThan,
    cst.GreaterThan: cst.LessThan,
    cst.LessThanEqual: cst.GreaterThanEqual,
    cst.GreaterThanEqual: cst.LessThanEqual,
}


def _tests_first_iteration(body: cst.BaseSuite, counter: str) -> bool:
    """Whether an ``if`` in the loop body (outside nested definitions) tests ``counter`` against 0."""
    known = {counter: True}
    stack = list(body.body)
    while stack:
        node = stack.pop()
        if type(node) is cst.If and _first_iteration_test(node.test, known) is not None:
            return True
        if isinstance(node, cst.BaseCompoundStatement) and type(node) not in (cst.FunctionDef, cst.ClassDef):
            stack.extend(_inner_statements(node))
    return False


def _inner_statements(stmt: cst.BaseCompoundStatement) -> list:
    inner = []
    suites = [stmt.body] if hasattr(stmt, "body") else []
    for name in ("orelse", "finalbody"):
        child = getattr(stmt, name, None)
        if type(child) is cst.If:
            inner.append(child)  # elif
        elif child is not None:
            suites.append(child.body)
    suites += [part.body for part in getattr(stmt, "handlers", ()) or getattr(stmt, "cases", ())]
    return inner + [statement for suite in suites for statement in suite.body]


def _statement_ids(body) -> frozenset[int]:
    """Ids of every statement (small ones and compound headers) in ``body``, nested
    definitions excluded: the statements a site can be named after."""
    found: set[int] = set()
    stack = list(body)
    while stack:
        node = stack.pop()
        if type(node) is cst.SimpleStatementLine:
            found.update(id(small) for small in node.body)
            continue
        if type(node) in (cst.Else, cst.Finally):
            stack.extend(node.body.body)
            continue
        found.add(id(node))
        if type(node) in (cst.FunctionDef, cst.ClassDef) or not isinstance(node, cst.BaseCompoundStatement):
            continue
        stack.extend(_inner_statements(node))
    return frozenset(found)


def _binds(stmt: cst.BaseSmallStatement) -> set[str]:
    if type(stmt) is cst.Assign:
        return set().union(*(bound_names(target.target) for target in stmt.targets))
    if type(stmt) in (cst.AnnAssign, cst.AugAssign):
        return bound_names(stmt.target)
    if type(stmt) in (cst.Import, cst.ImportFrom) and not isinstance(stmt.names, cst.ImportStar):
        return {
            alias.asname.name.value if alias.asname is not None else (dotted(alias.name) or "").split(".")[0]
            for alias in stmt.names
            if alias.asname is None or type(alias.asname.name) is cst.Name
        }
    return set()


def _assigned_in(body) -> set[str]:
    """Every name a statement of ``body`` binds (nested definitions' own bodies excluded)."""
    found: set[str] = set()
    stack = list(body)
    while stack:
        node = stack.pop()
        if type(node) is cst.SimpleStatementLine:
            for small in node.body:
                found |= _binds(small)
            continue
        if isinstance(node, cst.BaseSmallStatement):
            found |= _binds(node)
            continue
        if type(node) in (cst.FunctionDef, cst.ClassDef):
            found.add(node.name.value)
            continue
        if type(node) is cst.For:
            found |= bound_names(node.target)
        elif type(node) is cst.With:
            for item in node.items:
                if item.asname is not None:
                    found |= bound_names(item.asname.name)
        if isinstance(node, cst.BaseCompoundStatement):
            stack.extend(_inner_statements(node))
    return found


def _test_names(test: cst.BaseExpression) -> set[str] | None:
    """The names a test reads, or None when it calls something (a call may vary)."""
    found: set[str] = set()
    stack = [test]
    while stack:
        node = stack.pop()
        if type(node) is cst.Call:
            return None
        if type(node) is cst.Name:
            found.add(node.value)
        elif type(node) is cst.Attribute:
            stack.append(node.value)
            continue
        stack.extend(child for child in node.children if isinstance(child, cst.CSTNode))
    return found


def _names_read(statements) -> set[str]:
    """Every name that appears in ``statements`` (a wide read set)."""
    found: set[str] = set()
    stack = list(statements)
    while stack:
        node = stack.pop()
        if type(node) is cst.Name:
            found.add(node.value)
        elif type(node) not in (cst.FunctionDef, cst.ClassDef):
            stack.extend(children(node))
    return found
