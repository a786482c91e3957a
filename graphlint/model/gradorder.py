"""The order of backward (B), zero_grad (Z) and step (S) per optimizer, on every path.

The CFG of an entry scope is expanded into an event graph: helpers of the
module are spliced in where they are called, so their events keep their order.
Periodic guards (``if (i + 1) % k == 0:``) are decided by tracking the loop
counter's residue, so accumulation is path-sensitive: both outcomes of such a
guard really happen, in known iterations. Other conditions are unknown.

Per optimizer the state is: backwards whose gradients are surely present and not
yet applied (a must-set, for "cleared before the step"), and may-sets of fresh
and applied gradients (for "applied by two steps").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product

import libcst as cst

from graphlint.model import events as ev
from graphlint.model.cfg import BACK, CFG, DEF, FOR, IF, WHILE, WITH, build_cfg
from graphlint.model.names import dotted, positional
from graphlint.model.program import INSTANCE, MODULE, OPTIMIZER, Program, Scope

MAX_DEPTH = 3
_PERIODS = (4, 3, 5)


@dataclass(frozen=True)
class Event:
    kind: str  # "B", "S", "Z", "U" (unknown call that may clear or step), "SC" (self-contained step)
    call: cst.CSTNode
    target: str | None = None  # optimizer path (S), owner path (Z/U)
    scope: Scope | None = None
    local: str | None = None
    clears: bool = False  # a step that clears gradients itself
    framework: bool = False  # inside `with accelerator.accumulate(...)`
    models: frozenset = frozenset()  # a step's optimizer's modules (resolved paths)


@dataclass
class ENode:
    id: int
    events: list = field(default_factory=list)
    succ: list = field(default_factory=list)  # (id, label)
    test: cst.BaseExpression | None = None  # an `if` test
    header: bool = False  # a loop header
    increments: str | None = None  # counter name incremented here (`step += 1`)
    loop: int | None = None  # the header id of the innermost loop


@dataclass
class Violation:
    kind: str  # "a" or "b"
    at: cst.CSTNode
    optimizer: str
    backward: cst.CSTNode | None
    step: cst.CSTNode | None
    first_step: cst.CSTNode | None = None


class EventGraph:
    def __init__(self, program: Program) -> None:
        self.program = program
        self.nodes: list[ENode] = []
        self.stack: list[cst.CSTNode] = []

    def new(self) -> ENode:
        node = ENode(len(self.nodes))
        self.nodes.append(node)
        return node

    def link(self, a: int, b: int, label=None) -> None:
        if (b, label) not in self.nodes[a].succ:
            self.nodes[a].succ.append((b, label))

    def expand(self, scope: Scope, aliases: dict[str, str], depth: int, loop: int | None, framework: bool) -> tuple[int, int]:
        """Splice the scope's CFG in; returns (entry, exit) event-node ids."""
        cfg = build_cfg(scope.body, no_grad=scope.no_grad)
        mapping: dict[int, tuple[int, int]] = {}
        for node in cfg.nodes:
            first = self.new()
            own_loop = node.loop
            first.loop = self._loop_id(mapping, cfg, own_loop, loop)
            if node.kind in (FOR, WHILE):
                first.header = True
                first.loop = first.id
            last = self._fill(first, node, cfg, scope, aliases, depth, framework or self._in_accumulate(cfg, node))
            mapping[node.id] = (first.id, last)
        for node in cfg.nodes:
            for succ, label in node.succ:
                self.link(mapping[node.id][1], mapping[succ][0], label)
        return mapping[cfg.entry][0], mapping[cfg.exit][1]

    def _loop_id(self, mapping, cfg: CFG, own_loop, outer):
        if own_loop is None:
            return outer
        return mapping[own_loop][0] if own_loop in mapping else outer

    def _in_accumulate(self, cfg: CFG, node) -> bool:
        for header in node.withs:
            stmt = cfg.nodes[header].stmt
            for item in stmt.items:
                call = item.item
                if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value in ("accumulate", "no_sync", "autocast_accumulate"):
                    return True
        return False

    def _fill(self, first: ENode, node, cfg: CFG, scope: Scope, aliases, depth: int, framework: bool) -> int:
        stmt = node.stmt
        exprs: list[cst.CSTNode] = []
        if node.kind == IF:
            first.test = stmt.test
            exprs = [stmt.test]
        elif node.kind == WHILE:
            exprs = [stmt.test]
        elif node.kind == FOR:
            exprs = [stmt.iter]
        elif node.kind == WITH:
            exprs = [item.item for item in stmt.items]
        elif node.kind == DEF or stmt is None:
            exprs = []
        else:
            exprs = [stmt]
            if isinstance(stmt, cst.AugAssign) and isinstance(stmt.target, cst.Name) and isinstance(stmt.operator, cst.AddAssign):
                first.increments = stmt.target.value
        current = first
        for expr in exprs:
            for item in self._items(expr, node, cfg, scope, aliases, framework):
                if isinstance(item, Event):
                    current.events.append(item)
                    continue
                func, cls, owner_path, call = item
                if depth >= MAX_DEPTH or func in self.stack:
                    continue
                callee_scope = self.program.scope_of(func)
                callee_aliases = {}
                params = list(callee_scope.params)
                if cls is not None and params and params[0] == "self":
                    params.pop(0)
                    if owner_path:
                        callee_aliases["self"] = owner_path
                call_args = [a.value for a in call.args if a.keyword is None and not a.star]
                for param, arg in zip(params, call_args):
                    resolved = self.resolve(arg, aliases)
                    if resolved:
                        callee_aliases[param] = resolved
                self.stack.append(func)
                try:
                    entry, exit_ = self.expand(callee_scope, callee_aliases, depth + 1, current.loop, framework)
                finally:
                    self.stack.pop()
                self.link(current.id, entry)
                after = self.new()
                after.loop = current.loop
                self.link(exit_, after.id)
                current = after
        return current.id

    def resolve(self, expr: cst.BaseExpression, aliases) -> str | None:
        return self.resolve_path(dotted(expr), aliases)

    @staticmethod
    def resolve_path(path: str | None, aliases) -> str | None:
        if path is None:
            return None
        root, _, rest = path.partition(".")
        if root in aliases:
            return aliases[root] + ("." + rest if rest else "")
        return path

    def _items(self, expr, node, cfg, scope: Scope, aliases, framework):
        """Events and helper calls of one expression, in evaluation order."""
        program = self.program
        kinds = lambda e: program.kinds(scope, dotted(e))  # noqa: E731

        def qualify(e):
            name = dotted(e)
            if name is None or name.split(".")[0] in scope.locals:
                return None
            return program.imports.qualify(e)

        for sub in _calls_and_grad_writes(expr):
            if not isinstance(sub, cst.Call):
                owner = self._grad_owner(sub, cfg, node, scope, aliases)
                yield Event("Z", sub, owner, scope, None, framework=framework)
                continue
            event = ev.recognise(sub, kinds, lambda e: False, qualify)
            if isinstance(event, ev.BackwardCall):
                if event.writes_grad:
                    yield Event("B", sub, scope=scope, framework=framework)
                continue
            if isinstance(event, ev.StepCall):
                target = self.resolve(event.optimizer, aliases)
                local = dotted(event.optimizer)
                if event.closure is not None:
                    yield Event("SC", sub, target, scope, local, framework=framework)
                else:
                    clears = self._step_clears(scope, local)
                    models = frozenset(
                        self.resolve_path(m, aliases) for m in program.optimizer_models(scope, local or "")
                    )
                    yield Event("S", sub, target, scope, local, clears=clears, framework=framework, models=models)
                continue
            if isinstance(event, ev.ZeroGradCall):
                yield Event("Z", sub, self.resolve(event.owner, aliases), scope, dotted(event.owner), framework=framework)
                continue
            func = sub.func
            helper = self._helper(func, scope, aliases)
            if helper is not None:
                yield helper + (sub,)
                continue
            if isinstance(func, cst.Attribute) and func.attr.value == "grad" and qualify(func):
                continue
            if qualify(func) and (qualify(func) or "").startswith("torch."):
                continue
            for arg in sub.args:
                arg_kinds = kinds(arg.value)
                if arg_kinds & {OPTIMIZER, MODULE}:
                    yield Event("U", sub, self.resolve(arg.value, aliases), scope, dotted(arg.value), framework=framework)

    def _helper(self, func, scope: Scope, aliases):
        program = self.program
        if isinstance(func, cst.Name):
            if func.value in program.functions and func.value not in scope.locals:
                return program.functions[func.value], None, None
            cls = program.class_of_instance(program.kinds(scope, func.value))
            if cls is not None:
                found = program.method(cls, "forward")
                if found:
                    return found[1], found[0], self.resolve(func, aliases)
            return None
        if isinstance(func, cst.Attribute):
            owner = func.value
            cls = None
            if isinstance(owner, cst.Name) and owner.value == "self":
                cls = scope.cls
            else:
                cls = program.class_of_instance(program.kinds(scope, dotted(owner)))
            if cls is not None:
                found = program.method(cls, func.attr.value)
                if found:
                    return found[1], found[0], self.resolve(owner, aliases)
        return None

    def _step_clears(self, scope: Scope, local: str | None) -> bool:
        cls = self.program.class_of_instance(self.program.kinds(scope, local))
        if cls is None:
            return False
        found = self.program.method(cls, "step")
        if found is None:
            return False
        for sub in _calls_and_grad_writes(found[1].body):
            if not isinstance(sub, cst.Call) or (
                isinstance(sub.func, cst.Attribute) and sub.func.attr.value in ("zero_grad", "zero_")
            ):
                return True
        return False

    def _grad_owner(self, write, cfg: CFG, node, scope: Scope, aliases) -> str | None:
        """The model (or optimizer) whose parameters a `p.grad = None` loop clears."""
        name = write
        for header in reversed(node.loops):
            loop_stmt = cfg.nodes[header].stmt
            if isinstance(loop_stmt, cst.For) and isinstance(loop_stmt.target, cst.Name) and loop_stmt.target.value == name:
                iterable = loop_stmt.iter
                if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute) and iterable.func.attr.value in ("parameters", "named_parameters"):
                    return self.resolve(iterable.func.value, aliases)
                if isinstance(iterable, cst.Subscript):
                    iterable = iterable.value
                    if isinstance(iterable, cst.Name):
                        # `for p in group['params']` inside `for group in opt.param_groups`
                        for outer in node.loops:
                            stmt = cfg.nodes[outer].stmt
                            if isinstance(stmt, cst.For) and isinstance(stmt.iter, cst.Attribute) and stmt.iter.attr.value == "param_groups":
                                return self.resolve(stmt.iter.value, aliases)
                return self.resolve(iterable, aliases) if dotted(iterable) else None
        return None


def _calls_and_grad_writes(root: cst.CSTNode):
    """Calls in evaluation order (arguments first), plus `p.grad = None`-style clears as names."""
    out: list = []

    def visit(node: cst.CSTNode) -> None:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return
        if isinstance(node, cst.Assign):
            visit(node.value)
            for target in node.targets:
                name = _grad_of(target.target)
                if name:
                    out.append(name)
            return
        for child in node.children:
            visit(child)
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("zero_", "detach_") and node is not None:
                name = _grad_of(func.value)
                if name and func.attr.value == "zero_":
                    out.append(name)
                    return
            out.append(node)

    visit(root)
    return out


def _grad_of(expr: cst.BaseExpression) -> str | None:
    """`p` for `p.grad` / `p.grad.data`."""
    if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
        expr = expr.value
    if isinstance(expr, cst.Attribute) and expr.attr.value == "grad" and isinstance(expr.value, cst.Name):
        return expr.value.value
    return None


# ----- periodic guards -----
@dataclass(frozen=True)
class Periodic:
    key: tuple[str, str]  # (counter, modulus) as source text
    offset: int
    equal: bool  # `== 0` (True) or `!= 0`


def periodic(test: cst.BaseExpression, code) -> Periodic | None:
    negate = False
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, negate = test.expression, True
        inner = _modulo(test, code)
        if inner is None:
            return None
        return Periodic(inner[0], inner[1], True)
    if isinstance(test, cst.BinaryOperation):
        inner = _modulo(test, code)
        return Periodic(inner[0], inner[1], False) if inner else None
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        comparison = test.comparisons[0]
        inner = _modulo(test.left, code)
        if inner is None:
            return None
        right = comparison.comparator
        operator = comparison.operator
        equal = isinstance(operator, cst.Equal)
        if not (equal or isinstance(operator, cst.NotEqual)):
            return None
        key, offset = inner
        if isinstance(right, cst.Integer) and right.value == "0":
            return Periodic(key, offset, equal)
        if isinstance(right, cst.BinaryOperation) and isinstance(right.operator, cst.Subtract) and code(right.left) == key[1] and isinstance(right.right, cst.Integer):
            return Periodic(key, offset + int(right.right.value), equal)
    return None


def _modulo(expr, code):
    while isinstance(expr, cst.BinaryOperation) is False and hasattr(expr, "lpar") and False:
        break
    if not (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Modulo)):
        return None
    counter = expr.left
    offset = 0
    if isinstance(counter, cst.BinaryOperation) and isinstance(counter.operator, (cst.Add, cst.Subtract)) and isinstance(counter.right, cst.Integer):
        offset = int(counter.right.value) * (1 if isinstance(counter.operator, cst.Add) else -1)
        counter = counter.left
    name = dotted(counter)
    if name is None:
        return None
    return (name, code(expr.right)), offset


class OrderAnalysis:
    """Solve the B/Z/S order per optimizer on one event graph and collect violations."""

    def __init__(self, graph: EventGraph, entry: int, code) -> None:
        self.graph = graph
        self.entry = entry
        self.code = code
        self.keys: list[tuple[str, str]] = []
        self.guards: dict[int, Periodic] = {}
        for node in graph.nodes:
            if node.test is not None:
                guard = periodic(node.test, code)
                if guard is not None:
                    if guard.key not in self.keys and len(self.keys) < len(_PERIODS):
                        self.keys.append(guard.key)
                    if guard.key in self.keys:
                        self.guards[node.id] = guard
        self.counter_loop: dict[tuple, int | None] = {}
        for node_id, guard in self.guards.items():
            self.counter_loop.setdefault(guard.key, graph.nodes[node_id].loop)
        self.incrementers = {
            node.id: [k for k in self.keys if k[0] == node.increments]
            for node in graph.nodes if node.increments
        }
        self.violations: list[Violation] = []

    def optimizers(self) -> set[str]:
        found = set()
        for node in self.graph.nodes:
            for event in node.events:
                if event.kind in ("S", "SC") and event.target:
                    if not event.framework:
                        found.add(event.target)
        return found

    def run(self) -> list[Violation]:
        for optimizer in sorted(self.optimizers()):
            self._solve(optimizer)
        return self.violations

    # ----- per optimizer -----
    def _owned_backwards(self, optimizer: str) -> set[int]:
        """Backward event ids whose first following step is this optimizer's."""
        owned = set()
        for node in self.graph.nodes:
            for index, event in enumerate(node.events):
                if event.kind == "B" and optimizer in self._first_steps(node, index):
                    owned.add(id(event.call))
        return owned

    def _first_steps(self, node: ENode, index: int) -> set[str]:
        found: set[str] = set()
        for event in node.events[index + 1:]:
            if event.kind in ("S", "SC"):
                return {event.target or "?"}
        seen = {node.id}
        todo = [succ for succ, _ in node.succ]
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            step = next((e for e in self.graph.nodes[current].events if e.kind in ("S", "SC")), None)
            if step is not None:
                found.add(step.target or "?")
                continue
            todo.extend(succ for succ, _ in self.graph.nodes[current].succ)
        return found

    def _clears(self, event: Event, optimizer: str, certain: bool) -> bool:
        if event.target is None:
            return not certain
        if event.target == optimizer:
            return True
        models = self._models(optimizer, event)
        if not models:
            return not certain and bool(event.scope and MODULE in self.graph.program.kinds(event.scope, event.local))
        for model in models:
            if event.target == model or model.startswith(event.target + "."):
                return True
            if event.target.startswith(model + ".") and not certain:
                return True
        return False

    def _models(self, optimizer: str, event: Event) -> set[str]:
        return {
            model for node in self.graph.nodes for step in node.events
            if step.kind == "S" and step.target == optimizer for model in step.models
        }

    def _solve(self, optimizer: str) -> None:
        owned = self._owned_backwards(optimizer)
        if any(e.framework for n in self.graph.nodes for e in n.events if e.target == optimizer):
            return
        residues = list(product(*[range(_PERIODS[i]) for i in range(len(self.keys))])) or [()]
        start = tuple(0 for _ in self.keys)
        # state: (must_fresh or None for TOP, may_fresh, may_applied)
        states: dict[tuple[int, tuple], tuple] = {(self.entry, start): (frozenset(), frozenset(), frozenset())}
        work = [(self.entry, start)]
        budget = 50_000
        final = False
        while True:
            while work and budget:
                budget -= 1
                key = work.pop()
                node_id, residue = key
                out = self._transfer(self.graph.nodes[node_id], states[key], optimizer, owned, record=False)
                if out is None:
                    continue
                for succ, label, succ_residue in self._successors(node_id, residue):
                    skey = (succ, succ_residue)
                    value = out
                    if label == BACK:
                        pass
                    merged = self._join(states.get(skey), value, self.graph.nodes[succ].header and label != BACK)
                    if merged != states.get(skey):
                        states[skey] = merged
                        work.append(skey)
            if final or not budget:
                break
            final = True
        if not budget:
            return
        for (node_id, residue), state in states.items():
            self._transfer(self.graph.nodes[node_id], state, optimizer, owned, record=True)

    def _successors(self, node_id: int, residue: tuple):
        node = self.graph.nodes[node_id]
        residue = self._increment(node_id, residue)
        guard = self.guards.get(node_id)
        for succ, label in node.succ:
            if guard is not None and label in (True, False):
                index = self.keys.index(guard.key)
                value = (residue[index] + guard.offset) % _PERIODS[index] == 0
                if not guard.equal:
                    value = not value
                if value != label:
                    continue
            next_residue = residue
            if label == BACK:
                next_residue = self._advance_on_back_edge(succ, residue)
            yield succ, label, next_residue

    def _increment(self, node_id: int, residue: tuple) -> tuple:
        keys = self.incrementers.get(node_id)
        if not keys:
            return residue
        values = list(residue)
        for key in keys:
            index = self.keys.index(key)
            values[index] = (values[index] + 1) % _PERIODS[index]
        return tuple(values)

    def _advance_on_back_edge(self, header: int, residue: tuple) -> tuple:
        values = list(residue)
        for index, key in enumerate(self.keys):
            explicit = any(key in keys for keys in self.incrementers.values())
            if not explicit and self.counter_loop.get(key) == header:
                values[index] = (values[index] + 1) % _PERIODS[index]
        return tuple(values)

    @staticmethod
    def _join(old, new, entry_into_header: bool):
        must, may_fresh, may_applied = new
        if entry_into_header:
            must = None  # the first iteration does not decide "on every path"
        if old is None:
            return (must, may_fresh, may_applied)
        old_must, old_fresh, old_applied = old
        if old_must is None:
            joined = must
        elif must is None:
            joined = old_must
        else:
            joined = old_must & must
        return (joined, old_fresh | may_fresh, old_applied | may_applied)

    def _transfer(self, node: ENode, state, optimizer: str, owned: set[int], record: bool):
        must, fresh, applied = state
        for event in node.events:
            kind = event.kind
            if kind == "B" and id(event.call) in owned:
                must = (must or frozenset()) | {event.call} if must is not None else None
                fresh = fresh | {event.call}
            elif kind == "SC" and event.target == optimizer:
                must, fresh, applied = frozenset(), frozenset(), frozenset()
            elif kind == "S" and event.target == optimizer:
                if record:
                    for backward, first_step in applied:
                        self.violations.append(Violation("b", backward, optimizer, backward, event.call, first_step))
                if event.clears:
                    must, fresh, applied = frozenset(), frozenset(), frozenset()
                else:
                    applied = frozenset((b, first) for b, first in applied) | frozenset((b, event.call) for b in fresh)
                    must, fresh = frozenset(), frozenset()
            elif kind == "Z":
                if self._clears(event, optimizer, certain=True):
                    if record and must:
                        for backward in must:
                            self.violations.append(Violation("a", event.call, optimizer, backward, None))
                    must, fresh, applied = frozenset(), frozenset(), frozenset()
                elif self._clears(event, optimizer, certain=False):
                    must, fresh, applied = frozenset(), frozenset(), frozenset()
            elif kind == "U" and (event.target == optimizer or self._clears(event, optimizer, certain=False)):
                must, fresh, applied = frozenset(), frozenset(), frozenset()
        return (must, fresh, applied)


def analyse_order(program: Program, code) -> list[Violation]:
    violations: list[Violation] = []
    for scope in program.scopes.values():
        graph = EventGraph(program)
        entry, _ = graph.expand(scope, {}, 0, None, False)
        if not any(e.kind in ("S", "SC") for n in graph.nodes for e in n.events):
            continue
        violations.extend(OrderAnalysis(graph, entry, code).run())
    return violations
