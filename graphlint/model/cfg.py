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

from graphlint.model import syntax as cst

from graphlint.model.names import ZERO_GRAD_METHODS, bound_names, dotted, keyword, positional
from graphlint.model.walk import descendants
from graphlint.model.statements import (
    assigned_names,
    assigned_paths,
    binds,
    calls_something,
    constant_test,
    first_iteration_test,
    names_read,
    statement_ids,
    test_names,
    tests_first_iteration,
    zero_based_counter,
)
from graphlint.prefilter import NEEDLES

BACK = "back"

# Node kinds.
ENTRY, EXIT, STMT, IF, FOR, WHILE, WITH, MATCH, DEF, JOIN = (
    "entry", "exit", "stmt", "if", "for", "while", "with", "match", "def", "join",
)
# Before the header of a `for` whose iterable calls something: Python evaluates
# the iterable once, when the loop starts (`for g in torch.autograd.grad(...)`
# backwards once, not once per element). Its ``stmt`` is the For statement.
ITER = "iter"
# The label of an edge into a JOIN node: ("arm", index of the branch it leaves).
ARM = "arm"

Stmt = Union[cst.BaseSmallStatement, cst.BaseCompoundStatement]

# Spellings of a backward (the prefilter's): a branch running one changes what later backwards free.
_BACKWARD_WORDS = NEEDLES["GL001"].names


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
    # For a JOIN: the ids of the statements inside the ``if``'s body and inside its
    # ``else`` (an ``elif`` included), the two arms that meet there.
    arms: tuple[frozenset[int], frozenset[int]] = (frozenset(), frozenset())
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
    # The ``if done:`` ending the body of the innermost ``while not done:``: its
    # branch leaves the loop (see _Builder.loop).
    leaves_loop: cst.If | None = None
    # With ``returns_continue``: the header of the outermost loop, where a `return` goes.
    next_call: int | None = None

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


def grad_mode_of_with(with_stmt: cst.With, current: bool, grad_contexts: GradContexts | None = None) -> bool:
    """Whether the body of ``with_stmt`` runs with gradients disabled; ``grad_contexts``:
    the file's own context managers that set the grad mode (see grad_context_managers)."""
    mode = current
    for item in with_stmt.items:
        expr = item.item
        if _is_grad_mode_call(expr, ("no_grad", "inference_mode")):
            mode = True
        elif _is_grad_mode_call(expr, ("enable_grad",)):
            mode = False
        elif type(expr) is cst.Call and _is_grad_mode_call(expr, ("set_grad_enabled",)):
            literal = _disables_grad(expr)
            mode = mode if literal is None else literal
        elif grad_contexts and type(expr) is cst.Call and dotted(expr.func) in grad_contexts:
            literal = _disabled_by_helper(expr, grad_contexts[dotted(expr.func)])
            mode = mode if literal is None else literal
    return mode


# Spelling of a call (`no_grad_ctx`, `self._set_training_mode`) -> the parameter that
# decides the grad mode, as (name, position among the call's arguments), or None when
# the helper always disables gradients.
GradContexts = dict[str, Union[tuple[str, int], None]]


def grad_context_managers(functions: Iterable[tuple[str, cst.FunctionDef]]) -> GradContexts:
    """The ``@contextmanager`` functions among ``functions`` (spelling, definition) whose
    ``yield`` runs under ``torch.no_grad()`` or ``torch.set_grad_enabled(<parameter>)``:
    poutyne's ``with self._set_training_mode(False):`` evaluates without gradients."""
    found: GradContexts = {}
    for spelling, func in functions:
        if not any((dotted(d.decorator) or "").endswith("contextmanager") for d in func.decorators):
            continue
        params = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
        if spelling.startswith("self."):
            params = params[1:]
        for node in descendants(func.body):
            if type(node) is not cst.With or not any(type(n) is cst.Yield for n in descendants(node.body)):
                continue
            for item in node.items:
                expr = item.item
                if _is_grad_mode_call(expr, ("no_grad", "inference_mode")):
                    found[spelling] = None
                elif type(expr) is cst.Call and _is_grad_mode_call(expr, ("set_grad_enabled",)) and len(expr.args) == 1:
                    flag = expr.args[0].value  # (positional, or `mode=`)
                    if _disables_grad(expr):
                        found[spelling] = None
                    elif type(flag) is cst.Name and flag.value in params:
                        found[spelling] = (flag.value, params.index(flag.value))
    return found


def _steps_or_clears(stmt: cst.BaseSmallStatement) -> bool:
    """`optimizer.step()`, `optimizer.zero_grad()` as a statement. Its edge to an
    `except` would leave from the state after it ran: a step that applied the
    gradients and then raised (`except StopIteration:` around a data loop), which
    would make every later step seem to apply them again. What raises before it
    leaves from the statement before."""
    if type(stmt) is not cst.Expr or type(stmt.value) is not cst.Call:
        return False
    func = stmt.value.func
    return type(func) is cst.Attribute and (func.attr.value == "step" or func.attr.value in ZERO_GRAD_METHODS)


def _disabled_by_helper(call: cst.Call, deciding: tuple[str, int] | None) -> bool | None:
    """The grad mode a grad-setting helper's call sets: True (no grad), False, or None (unknown)."""
    if deciding is None:
        return True
    name, position = deciding
    passed = positional(call)
    value = keyword(call, name)
    if value is None and position < len(passed):
        value = passed[position]
    return _disabling(value)


def disabled_by_flags(with_stmt: cst.With, flags: dict[str, bool], binding) -> bool:
    """Whether ``with_stmt`` disables gradients, given the literal values a helper's
    flags were called with: `torch.set_grad_enabled(training)` with `training=False`;
    `with grad_context():` after `grad_context = torch.no_grad if not with_grad else
    nullcontext` with `with_grad=False`. ``binding(name)``: the value a local name is
    first bound to."""
    for item in with_stmt.items:
        expr = item.item
        if type(expr) is cst.Call and _is_grad_mode_call(expr, ("set_grad_enabled",)) and len(expr.args) == 1:
            if flag_value(expr.args[0].value, flags) is False:
                return True
            continue
        if type(expr) is cst.Call and not expr.args and type(expr.func) is cst.Name:
            expr = binding(expr.func.value)  # `grad_context()`
        if type(expr) is cst.Call and not expr.args:
            expr = expr.func  # `(torch.no_grad if ... else nullcontext)()`
        if type(expr) is cst.IfExp:
            test = flag_value(expr.test, flags)
            chosen = None if test is None else (expr.body if test else expr.orelse)
            if chosen is not None and _is_grad_mode_call(chosen, ("no_grad", "inference_mode")):
                return True
    return False


def flag_value(expr: cst.BaseExpression, flags: dict[str, bool]) -> bool | None:
    """The value of ``flag`` or ``not flag`` for a flag of known value, else None."""
    if type(expr) is cst.Name:
        return flags.get(expr.value)
    if type(expr) is cst.UnaryOperation and type(expr.operator) is cst.Not:
        inner = flag_value(expr.expression, flags)
        return None if inner is None else not inner
    return None


def _disables_grad(call: cst.Call) -> bool | None:
    """`set_grad_enabled(False)` (or `mode=False`): True; `(True)`: False; anything else: None (unknown)."""
    return _disabling(call.args[0].value if call.args else None)


def _disabling(mode: cst.BaseExpression | None) -> bool | None:
    """A grad mode given as a literal: `False` disables gradients (True), `True` does
    not (False); anything else: None (unknown)."""
    if type(mode) is not cst.Name or mode.value not in ("True", "False"):
        return None
    return mode.value == "False"


def grad_mode_set_by(stmt: cst.CSTNode) -> bool | None:
    """No-grad (True) or grad (False) for the statement `torch.set_grad_enabled(False/True)`."""
    if type(stmt) is not cst.SimpleStatementLine or len(stmt.body) != 1 or type(stmt.body[0]) is not cst.Expr:
        return None
    call = stmt.body[0].value
    if type(call) is not cst.Call or not _is_grad_mode_call(call, ("set_grad_enabled",)) or len(call.args) != 1:
        return None
    return _disables_grad(call)


class _Builder:
    def __init__(
        self, cfg: CFG, peel: bool, joins: bool, bound: Iterable[str], returns_continue: bool = False,
        grad_contexts: GradContexts | None = None,
    ) -> None:
        self.cfg = cfg
        self.peel = peel
        self.joins = joins
        self.returns_continue = returns_continue
        self.grad_contexts = grad_contexts
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
            mode = grad_mode_set_by(stmt)
            if mode is not None and mode != ctx.no_grad:
                # `torch.set_grad_enabled(False)` as a statement: the rest of the block
                # runs in that mode (what follows the block is left as it was: unsure).
                ctx = ctx.inside(no_grad=mode)
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
            no_grad = grad_mode_of_with(stmt, ctx.no_grad, self.grad_contexts)
            inner = ctx.inside(no_grad=no_grad, withs=ctx.withs + (header,))
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
        self._bind(binds(stmt))
        if type(stmt) is cst.Return and ctx.next_call is not None:
            self.cfg.link(node, ctx.next_call, BACK)
            return []
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
        if not _steps_or_clears(stmt):
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
                bound = assigned_names(branches, imports=True)
                read = names_read(branches)
                # A backward changes what a later branch's backward walks (freed graphs):
                # `if amp: scaler.scale(loss).backward()` ... `if not amp: loss.backward()`.
                self.flag_tests.append((decision[0], test, bound | (read & _BACKWARD_WORDS), read))
                self.cfg.nodes[test].decision = decision
        known = constant_test(stmt.test)
        if known is None:
            known = first_iteration_test(stmt.test, dict(ctx.first))
        out = [] if known is False else self.block(stmt.body.body, [(test, True)], ctx)
        if stmt is ctx.leaves_loop and ctx.break_edges is not None:
            ctx.break_edges.extend(out)  # `done` holds: the loop test fails next
            out = []
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
        arms = (statement_ids(stmt.body.body), statement_ids([orelse] if orelse is not None else []))
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
            names = test_names(test)
            if names is None or names & ctx.loop_assigned:
                return frozenset()
        common = set.intersection(*(assigned_names(arm, imports=True) for arm in arms))
        return frozenset(common - self.bound)

    def loop(self, stmt: cst.For | cst.While, preds: Dangling, ctx: _Context) -> Dangling:
        kind = FOR if type(stmt) is cst.For else WHILE
        counter = zero_based_counter(stmt) if self.peel else None
        peeled = counter is not None and tests_first_iteration(stmt.body, counter)
        if kind == FOR and calls_something(stmt.iter):
            preds = [(self.node(ITER, stmt, ctx, preds), None)]
        header = self.node(kind, stmt, ctx, [] if peeled else preds)
        if kind == FOR:
            self._bind(bound_names(stmt.target))
        self.cfg.loops[header] = Loop(header, parent=ctx.loops[-1] if ctx.loops else None)
        breaks: list = []
        inner = ctx.inside(
            loops=ctx.loops + (header,), break_edges=breaks, continue_target=header,
            leaves_loop=_ending_test(stmt),
            next_call=header if self.returns_continue and ctx.next_call is None else ctx.next_call,
        )
        if self.joins:
            inner = inner.inside(loop_assigned=ctx.loop_assigned | assigned_names([stmt], imports=True))
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


def _ending_test(loop: cst.For | cst.While) -> cst.If | None:
    """The last statement of ``while not done:`` when it is ``if done:`` (a REINFORCE
    episode learning when it ends) and its branch does not bind ``done`` again: after
    that branch the loop test fails, so the branch leaves the loop."""
    test = loop.test if type(loop) is cst.While else None
    if type(test) is not cst.UnaryOperation or type(test.operator) is not cst.Not:
        return None
    flag = dotted(test.expression)
    last = loop.body.body[-1] if loop.body.body else None
    if flag is None or type(last) is not cst.If or dotted(last.test) != flag:
        return None
    rebinds = flag in assigned_names(last.body.body) or flag in assigned_paths(last.body.body)
    return None if rebinds else last


def build_cfg(
    body: Iterable[cst.CSTNode], no_grad: bool = False, peel: bool = False, joins: bool = False,
    bound: Iterable[str] = (), returns_continue: bool = False, grad_contexts: GradContexts | None = None,
) -> CFG:
    """The CFG of ``body``; with ``peel``, loops that test for their first iteration
    (``if t == 0:``) get that iteration as a separate copy of the body; with
    ``joins``, the branches of each ``if`` meet at a JOIN node. ``bound``: the
    names bound when the body starts (a function's parameters). With
    ``returns_continue``, the body is one loop around a function's body (a
    per-batch hook) and a `return` goes on to that loop's next iteration.
    ``grad_contexts``: see grad_context_managers."""
    cfg = CFG()
    builder = _Builder(cfg, peel, joins, bound, returns_continue, grad_contexts)
    exits = builder.block(body, [(cfg.entry, None)], _Context(no_grad=no_grad))
    for src, label in exits:
        cfg.link(src, cfg.exit, label)
    # A flag matters when a later test of it reads what an earlier one's branch bound.
    correlated = {
        flag
        for flag, node, bound_there, _ in builder.flag_tests
        for other, later, _, read_later in builder.flag_tests
        if other == flag and later > node and bound_there & read_later
    }
    cfg.correlated = {flag: max(node for other, node, _, _ in builder.flag_tests if other == flag) for flag in correlated}
    return cfg
