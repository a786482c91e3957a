"""The order of backward (B), zero_grad (Z) and step (S) per optimizer, on every path.

The CFG of an entry scope is expanded into an event graph: helpers of the
module are spliced in where they are called, so their events keep their order
and a finding can point inside the helper. Loops that only clear gradients
(``for p in model.parameters(): p.grad = None``) become one event.

Periodic guards (``if (i + 1) % k == 0:``) are decided by tracking the loop
counter's residue, so accumulation is path-sensitive: both outcomes of such a
guard really happen, in known iterations. Other conditions are unknown, and
so is every test whose outcome decides no event (a logging period; see
guards.deciding_tests): only tests that matter spend the few counters tracked. In
``periodic or other`` the other part is an exception (the last batch); a path
that steps only because of it is possible but not certain ("tainted").

Per optimizer the dataflow state is: backwards whose gradients are surely
present and not yet applied (a must-set, for "cleared before the step"), the
subset of those that a periodic guard already held back from a step, and
may-sets of fresh and applied gradients (for "applied by two steps").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graphlint.model import syntax as cst

from graphlint.model import events as ev
from graphlint.model.branches import immediate_post_dominators
from graphlint.model.walk import children, descendants
from graphlint.model.cfg import BACK, CFG, DEF, FOR, IF, ITER, WHILE, WITH, build_cfg
from graphlint.model.guards import (
    as_modular,
    atoms,
    counter_binding,
    counter_reaches,
    decide,
    deciding_tests,
    flag_roots,
    flag_test,
    literal_arguments,
    null_test,
    periodic_arguments,
    null_tests,
    periodic,
    plain_assignments,
    reset_counters,
    tested_locals,
)
from graphlint.model.names import (
    CUTTING_BUILTINS, PARAMETER_METHODS, PASSING_BUILTINS, ZERO_GRAD_METHODS, bound_names, dotted,
    is_optimizer_class, is_torch_factory, last_part, positional, related_paths,
)
from graphlint.model.statements import assigned_paths
from graphlint.model.program import (
    ACCELERATOR,
    CLEARING_ENGINE,
    FORWARD,
    MODULE,
    OPTIMIZER,
    SCALER,
    SCHEDULER,
    Program,
    Scope,
)

MAX_DEPTH = 3
# Moduli used for the counters of periodic guards (at most three counters).
_PERIODS = (4, 3, 5)
_BUDGET = 50_000
# Flags (names tested twice whose value only a binding changes, see OrderAnalysis) followed per path, at most.
_MAX_FLAGS = 3
# Methods on these objects are framework calls that never clear gradients.
_NOT_CLEARING_OWNERS = frozenset({SCALER, SCHEDULER, OPTIMIZER, MODULE, ACCELERATOR})
# Answers of `relation`: does an event clear an optimizer's gradients?
YES, MAYBE, NO = "yes", "maybe", "no"


@dataclass(frozen=True)
class Event:
    # "B", "S", "Z", "U" (unknown call that may clear), "SC" (self-contained step),
    # "W" (a gradient rebuilt from itself: masked, scaled), "R" (a gradient replaced by
    # one the code computed, which the next step applies instead of the backwards' sum)
    kind: str
    call: cst.CSTNode
    target: str | None = None  # optimizer path (S), owner path (Z/U)
    scope: Scope | None = None
    local: str | None = None
    clears: bool = False  # a step that clears gradients itself
    framework: bool = False  # inside `with accelerator.accumulate(...)`
    models: frozenset = frozenset()  # a step's optimizer's modules (resolved paths)
    # A zero_grad's owner bound by `model = self.model` (or a DataParallel of it): that path.
    bound_from: str | None = None
    # A step with a closure (SC) whose closure backwards and clears nothing: that backward.
    uncleared: cst.CSTNode | None = None


@dataclass
class ENode:
    id: int
    events: list = field(default_factory=list)
    succ: list = field(default_factory=list)  # (id, label)
    test: cst.BaseExpression | None = None  # an `if` / `while` test
    header: bool = False  # a loop header
    increments: str | None = None  # counter name incremented here (`step += 1`)
    assigns: tuple = ()  # (name, assigned None?) for `name = value` here
    loop: int | None = None  # the header id of the innermost loop
    parent_loop: int | None = None  # for a header: the loop around it
    binds: tuple = ()  # for a `for` header: the counter it binds and its start value
    back_branch: object = None  # for a test: the branch its back edge is (True/False)
    loop_test: bool = False  # the node whose True/False edges enter/leave a loop's body
    fixed: object = None  # a test decided by a helper's literal argument (True/False)
    # For a test: (splice, names whose value only an assignment changes: parameters
    # the spliced scope never re-binds, locals only tested; see guards.tested_locals): the
    # same name tested twice in one splice is one value (see OrderAnalysis.flags).
    constant: tuple | None = None
    splice: int = 0  # for a node with `assigns`: the splice the assignment belongs to


@dataclass
class Violation:
    kind: str  # "a" or "b"
    at: cst.CSTNode
    optimizer: str
    backward: cst.CSTNode | None
    step: cst.CSTNode | None
    first_step: cst.CSTNode | None = None


@dataclass(frozen=True)
class _GradWrite:
    """A write of the gradient of the loop variable `name`: its event kind is "Z" for a
    clear (`p.grad = None`, `p.grad.zero_()`), "W" for a gradient rebuilt from itself
    (`p.grad = p.grad * mask`), "R" for one replaced by a value the code computed
    (DP-SGD's noised average, `p.grad.copy_(g)`, a test's `p.grad.fill_(0.01)`)."""

    node: cst.CSTNode
    name: str
    fors: tuple  # the `for` statements around it inside the analysed expression
    kind: str = "Z"


class EventGraph:
    def __init__(self, program: Program, cache: dict | None = None) -> None:
        self.program = program
        self.nodes: list[ENode] = []
        self.stack: list[cst.CSTNode] = []
        self._splices = 0
        # The entry node of each splice -> the splice: each call binds its parameters anew.
        self.splice_entries: dict[int, int] = {}
        self._scopes_by_key = {scope.key: scope for scope in program.scopes.values()}
        # Per file: CFGs and call lists of scopes that are spliced in many times.
        self.cache = cache if cache is not None else {}
        self.root: Scope | None = None  # the analysed scope, whose names the aliases resolve to

    def kinds(self, scope: Scope, path: str | None, aliases) -> set[str]:
        """What ``path`` of a spliced scope holds: its own kinds, and those of the caller's
        object it stands for (a helper's `decoder_optimizer` parameter, stepped only, is the
        `torch.optim.SGD` its caller built)."""
        found = self.program.kinds(scope, path)
        caller = self._caller_path(scope, path, aliases)
        return found | self.program.kinds(self.root, caller) if caller else found

    def _caller_path(self, scope: Scope, path: str | None, aliases) -> str | None:
        """The analysed scope's path that a spliced scope's ``path`` stands for (None: a local)."""
        if self.root is None or scope is self.root or not path or path.split(".")[0] not in aliases:
            return None
        return self.resolve_path(path, aliases)

    def _cfg(self, scope: Scope) -> CFG:
        key = ("cfg", id(scope.node))
        if key not in self.cache:
            # (A per-batch hook's scope is a synthetic loop: its `return` ends one call.)
            hook = type(scope.node) is cst.For
            self.cache[key] = build_cfg(
                scope.body, no_grad=scope.no_grad, returns_continue=hook, grad_contexts=self.program.grad_contexts
            )
        return self.cache[key]

    def _flag_names(self, scope: Scope) -> frozenset[str]:
        key = ("flags", id(scope.node))
        if key not in self.cache:
            never_rebound = frozenset(p for p in scope.params if p not in scope.assigned)
            tests = [node.stmt.test for node in self._cfg(scope).nodes if node.kind in (IF, WHILE)]
            tested = [(flag_test(test), test) for test in tests]
            names = [found[0] for found, _ in tested if found is not None]
            twice = {name for name in names if names.count(name) > 1} - never_rebound
            # (The walk over the body only for a scope that tests some local twice.)
            flags = never_rebound | (tested_locals(scope.body) & twice if twice else frozenset())
            self.cache[key] = flags | self._constant_tests(scope, never_rebound, tested)
        return self.cache[key]

    def _constant_tests(self, scope: Scope, never_rebound: frozenset[str], tested: list) -> frozenset[str]:
        """Keys of attribute and comparison tests (`args.sparse`, `cfg.steps > 1`) whose
        roots are parameters the scope never re-binds or names it never binds (module
        constants), and whose attributes it never assigns: one value in the whole scope."""
        bound = scope.assigned | set(scope.params) | scope.locals
        composite = []
        for found, test in tested:
            if found is None or found[1] != "truth" or found[0].isidentifier():
                continue  # a plain name: see above
            roots, paths = flag_roots(test)
            if all(root in never_rebound or root not in bound for root in roots):
                composite.append((found[0], paths))
        if not composite:
            return frozenset()
        assigned = assigned_paths(scope.body)
        return frozenset(
            key for key, paths in composite
            if not any(path == written or path.startswith(written + ".") for path in paths for written in assigned)
        )

    def calls(self, root, fors: tuple = ()) -> list:
        key = ("calls", id(root), tuple(id(f) for f in fors))
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = (_calls_and_grad_writes(root, fors), root)
        return found[0]

    def new(self) -> ENode:
        node = ENode(len(self.nodes))
        self.nodes.append(node)
        return node

    def link(self, a: int, b: int, label=None) -> None:
        if (b, label) not in self.nodes[a].succ:
            self.nodes[a].succ.append((b, label))

    def expand(
        self,
        scope: Scope,
        aliases: dict[str, str],
        depth: int,
        loop: int | None,
        framework: bool,
        constants=None,
        tests=None,
    ) -> tuple[int, int]:
        """Splice the scope's CFG in; returns (entry, exit) event-node ids.

        ``constants`` are the helper's parameters bound to literals at this call
        (`train_step(..., do_backward=False)`), which decide tests on them;
        ``tests`` those bound to a periodic test of the caller, which a test of
        the parameter stands for (`if update_grad:` with `(i + 1) % k == 0`)."""
        cfg = self._cfg(scope)
        self._constants = constants or {}
        key = ("periodic", id(scope.node))
        if key not in self.cache:
            self.cache[key] = _periodic_locals(cfg, self.program.module.code_for_node)
        self._tests = {**self.cache[key], **(tests or {})}
        self._splices += 1
        constant = (self._splices, self._flag_names(scope))
        side = {
            node.id
            for node in cfg.nodes
            if node.kind == FOR and self._is_side_loop(node.stmt, scope, aliases)
        }
        mapping: dict[int, tuple[int, int]] = {}
        for node in cfg.nodes:
            first = self.new()
            first.loop = self._loop_id(mapping, node.loop, loop)
            if node.kind in (FOR, WHILE) and node.id not in side:
                first.header = True
                first.parent_loop = first.loop
                first.loop = first.id
                if node.kind == FOR:
                    first.binds = counter_binding(node.stmt)
            if any(header in side for header in node.loops):
                mapping[node.id] = (
                    first.id,
                    first.id,
                )  # unreachable: its loop is one event
                continue
            constants, tests = self._constants, self._tests
            last = self._fill(
                first,
                node,
                cfg,
                scope,
                aliases,
                depth,
                framework or self._in_accumulate(cfg, node),
                node.id in side,
            )
            self._constants, self._tests = constants, tests
            if node.kind == IF:
                self.nodes[last].fixed = decide(node.stmt.test, constants)
            if node.kind in (IF, WHILE):
                self.nodes[last].constant = constant
            if self.nodes[last].assigns:
                self.nodes[last].splice = constant[0]
            mapping[node.id] = (first.id, last)
        for node in cfg.nodes:
            last = self.nodes[mapping[node.id][1]]
            last.loop_test = self.nodes[mapping[node.id][0]].header
            labels = {label for _, label in node.succ}
            if BACK in labels and node.kind in (IF, WHILE):
                # A branch that ends the loop body goes straight back to the header.
                last.back_branch = True not in labels
            for succ, label in node.succ:
                if node.id in side and label is True:
                    continue  # the side loop's body already ran as the header's events
                self.link(last.id, mapping[succ][0], label)
        self.splice_entries[mapping[cfg.entry][0]] = constant[0]
        return mapping[cfg.entry][0], mapping[cfg.exit][1]

    def _loop_id(self, mapping, own_loop, outer):
        if own_loop is None:
            return outer
        return mapping[own_loop][0] if own_loop in mapping else outer

    def _in_accumulate(self, cfg: CFG, node) -> bool:
        for header in node.withs:
            stmt = cfg.nodes[header].stmt
            for item in stmt.items:
                call = item.item
                if (
                    type(call) is cst.Call
                    and type(call.func) is cst.Attribute
                    and call.func.attr.value
                    in ("accumulate", "no_sync", "autocast_accumulate")
                ):
                    return True
        return False

    def _is_side_loop(self, stmt: cst.For, scope: Scope, aliases) -> bool:
        """A `for` whose body neither backwards nor steps nor calls a helper (a loop over
        parameters, optimizers or callbacks): it is summarised as one event, because such
        iterables are not empty and the body's clears happen whatever the element."""
        kinds = lambda e: self.program.kinds(scope, dotted(e))
        for sub in self.calls(stmt.body):
            if type(sub) is not cst.Call:
                continue
            event = ev.recognise(sub, kinds, lambda e: self.program.imports.qualify(e))
            if isinstance(event, ev.BackwardCall):
                return False
            if isinstance(event, ev.StepCall) and not (
                bound_names(stmt.target) & {(dotted(event.optimizer) or "").split(".")[0]}
            ):
                # `for opt in optimizers: opt.step()` steps each one once, and so does
                # `opt.instance.step()` of wrappers holding one each (pina's).
                return False
            if self._helper(sub.func, scope, aliases) is not None:
                return False
        return True

    def _fill(
        self,
        first: ENode,
        node,
        cfg: CFG,
        scope: Scope,
        aliases,
        depth: int,
        framework: bool,
        side: bool,
    ) -> int:
        stmt = node.stmt
        exprs: list[tuple[cst.CSTNode, tuple]] = []
        if node.kind in (IF, WHILE):
            exprs = [(stmt.test, ())]
        elif node.kind == ITER:
            exprs = [(stmt.iter, ())]
        elif node.kind == FOR:
            # The iterable runs at the pre-header when it calls something (cfg.ITER).
            exprs = [] if _has_pre_header(cfg, node) else [(stmt.iter, ())]
            if side:
                exprs += [(inner, (stmt,)) for inner in stmt.body.body]
        elif node.kind == WITH:
            exprs = [(item.item, ()) for item in stmt.items]
        elif node.kind == DEF or stmt is None:
            exprs = []
        else:
            exprs = [(stmt, ())]
            if type(stmt) is cst.AugAssign and isinstance(
                stmt.operator, cst.AddAssign
            ):
                first.increments = dotted(stmt.target)
        loop_fors = tuple(cfg.nodes[h].stmt for h in node.loops)
        assigns = (
            plain_assignments(stmt)
            if node.kind not in (IF, WHILE, FOR, ITER, WITH, DEF)
            else ()
        )
        current = first
        stepped_here: set = set()
        if assigns and type(stmt) is cst.Assign:
            loops_here = [cfg.nodes[h].stmt for h in node.loops]
            rebuilt = self._optimizer_over_fresh_leaves(stmt, loops_here)
            for cleared in ([rebuilt] if rebuilt is not None else []) + self._optimizers_of_a_new_model(stmt, loops_here):
                current.events.append(Event("Z", stmt, self.resolve(cleared, aliases), scope, dotted(cleared), framework=framework))
        for expr, fors in exprs:
            for item in self._items(expr, fors, loop_fors, scope, aliases, framework):
                if isinstance(item, Event):
                    if side and item.kind in ("S", "SC"):
                        # A side loop's body is summarised as one event sequence: steps of
                        # one optimizer in its branches (`scaler.step(opt)` if a scaler is
                        # used, else `opt.step()`) are alternatives, one step per element.
                        if item.target in stepped_here:
                            continue
                        stepped_here.add(item.target)
                    current.events.append(item)
                    continue
                func, cls, owner_path, call = item
                if (
                    depth >= MAX_DEPTH
                    or func in self.stack
                    or func not in self.program.scopes
                ):
                    continue
                callee_scope = self.program.scope_of(func)
                callee_aliases = {}
                params = list(callee_scope.params)
                if cls is not None and params and params[0] == "self":
                    params.pop(0)
                    if owner_path:
                        callee_aliases["self"] = owner_path
                for param, arg in zip(params, positional(call)):
                    resolved = self.resolve(arg, aliases)
                    if resolved:
                        callee_aliases[param] = resolved
                for arg in call.args:
                    if arg.keyword is not None and arg.keyword.value in params:
                        resolved = self.resolve(arg.value, aliases)
                        if resolved:
                            callee_aliases[arg.keyword.value] = resolved
                constants = literal_arguments(func, params, call)
                tests = periodic_arguments(params, call, self.program.module.code_for_node)
                self.stack.append(func)
                try:
                    entry, exit_ = self.expand(
                        callee_scope,
                        callee_aliases,
                        depth + 1,
                        current.loop,
                        framework,
                        constants,
                        tests,
                    )
                finally:
                    self.stack.pop()
                self.link(current.id, entry)
                after = self.new()
                after.loop = current.loop
                self.link(exit_, after.id)
                current = after
        if node.kind in (IF, WHILE):
            # The node whose edges are the branches (a helper's flag stands for the test passed in).
            key = ("reset counters", id(scope.node))
            if key not in self.cache:
                self.cache[key] = reset_counters(n.stmt for n in cfg.nodes if n.kind == IF)
            test = as_modular(stmt.test, self.cache[key]) or stmt.test
            current.test = _substituted(test, self._tests) if self._tests else test
        current.assigns = assigns
        return current.id

    def _optimizer_over_fresh_leaves(self, stmt: cst.Assign, loops: list) -> cst.Name | None:
        """``opt = torch.optim.SGD([x_in], lr=lr)`` in a loop whose every iteration first
        re-binds ``x_in`` to a new tensor (``latents.detach().clone()``, made to require
        grad): the new optimizer's parameters have no gradient yet, as after a
        zero_grad (diffusers' guidance loops, latent and adversarial optimisation). Its
        target, or None. Parameters that outlive the iteration keep their gradients."""
        if len(stmt.targets) != 1 or type(stmt.targets[0].target) is not cst.Name or not loops:
            return None
        value = stmt.value
        if type(value) is not cst.Call or not value.args:
            return None
        qualified = self.program.imports.qualify(value.func) if dotted(value.func) else None
        if qualified is None or not is_optimizer_class(qualified):
            return None
        body = loops[-1].body
        if type(value.args[0].value) is not cst.List:
            return None
        names = [element.value for element in value.args[0].value.elements]
        if not names or any(type(name) is not cst.Name for name in names):
            return None
        if not all(_rebound_to_a_new_tensor(body, name.value) for name in names):
            return None
        return stmt.targets[0].target

    def _optimizers_of_a_new_model(self, stmt: cst.Assign, loops: list) -> list[cst.Name]:
        """The optimizers a loop body builds over the parameters of the model ``stmt``
        constructs afresh in it (``model = CopyGenerator(**case)``, later
        ``opt = SGD(model.parameters())``): test suites that train a new model per case.
        No gradient an earlier iteration left is on the new model: for those
        optimizers, ``stmt`` clears."""
        if len(stmt.targets) != 1 or type(stmt.targets[0].target) is not cst.Name or not loops:
            return []
        if not _constructs(stmt.value):
            return []
        body = loops[-1].body
        model = stmt.targets[0].target.value
        if _plain_binding(body, model) is not stmt.value:
            return []
        return [target for target, built_over in self._optimizers_built_in(body) if built_over == model]

    def _optimizers_built_in(self, body: cst.CSTNode) -> list[tuple[cst.Name, str | None]]:
        """(target, model constructed afresh in ``body`` it is built over, else None) for
        each optimizer ``body`` builds, under a test too; computed once per body."""
        key = ("optimizers built", id(body))
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = []
            for small in descendants(body):
                if type(small) is not cst.Assign or len(small.targets) != 1 or type(small.targets[0].target) is not cst.Name:
                    continue
                value = small.value
                if type(value) is not cst.Call or not value.args or not dotted(value.func):
                    continue
                qualified = self.program.imports.qualify(value.func)
                if qualified and is_optimizer_class(qualified):
                    found.append((small.targets[0].target, _parameters_of_a_new_model(body, value.args[0].value)))
        return found

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

    def _items(
        self, expr, fors: tuple, loop_fors: tuple, scope: Scope, aliases, framework
    ):
        """Events and helper calls of one expression, in evaluation order."""
        program = self.program
        kinds = lambda e: self.kinds(scope, dotted(e), aliases)

        def qualify(e):
            name = dotted(e)
            if name is None or name.split(".")[0] in scope.locals:
                return None
            return program.imports.qualify(e)

        def clearing(kind: str, call, owner) -> Event:
            """A zero_grad ("Z"), or an unknown call that may clear the gradients of ``owner`` ("U")."""
            local = dotted(owner)
            return Event(
                kind, call, self.resolve(owner, aliases), scope, local, framework=framework,
                bound_from=self._bound_from(scope, local, aliases),
            )

        for sub in self.calls(expr, fors):
            if isinstance(sub, _GradWrite):
                owner = self._grad_owner(sub, loop_fors + sub.fors, aliases)
                yield Event(sub.kind, sub.node, owner, scope, None, framework=framework)
                continue
            event = ev.recognise(sub, kinds, qualify)
            if isinstance(event, ev.BackwardCall):
                if event.writes_grad:
                    yield Event("B", sub, scope=scope, framework=framework)
                continue
            if type(sub.func) is cst.Attribute and (
                (isinstance(event, ev.StepCall) and event.closure is None) or isinstance(event, ev.ZeroGradCall)
            ):
                wrapper = self._helper(sub.func, scope, aliases)
                inner = self._optimizers_call(wrapper[0], sub.func.attr.value) if wrapper is not None else None
                if inner is not None and isinstance(event, ev.ZeroGradCall):
                    # A wrapper's `zero_grad` (fairseq's optimizer classes) clears the
                    # optimizer it holds; reported here, where the code calls it.
                    owner = self.resolve_path(inner, {"self": wrapper[2]}) if wrapper[2] else None
                    yield Event("Z", sub, owner, scope, dotted(event.owner), framework=framework)
                    continue
                if inner is not None:
                    # `opt.step()` of a class of the file whose `step` steps
                    # `self.optimizer` (NoamOpt, a Trainer's own `step`): the inner
                    # optimizer is the one stepped, as its zero_grad is the one cleared.
                    yield wrapper + (sub,)
                    continue
            if isinstance(event, ev.StepCall):
                target = self.resolve(event.optimizer, aliases)
                local = dotted(event.optimizer)
                if event.closure is not None:
                    uncleared = self._closure_backward(event.closure, scope, aliases)
                    yield Event("SC", sub, target, scope, local, framework=framework, uncleared=uncleared)
                else:
                    clears = self._step_clears(scope, local)
                    models = {
                        self.resolve_path(m, aliases)
                        for m in program.optimizer_models(scope, local or "")
                    }
                    caller = self._caller_path(scope, local, aliases)
                    if caller:
                        models |= program.optimizer_models(self.root, caller)
                    models = frozenset(models)
                    yield Event(
                        "S",
                        sub,
                        target,
                        scope,
                        local,
                        clears=clears,
                        framework=framework,
                        models=models,
                    )
                continue
            if isinstance(event, ev.ZeroGradCall):
                yield clearing("Z", sub, event.owner)
                continue
            func = sub.func
            helper = self._helper(func, scope, aliases)
            if helper is not None:
                yield helper + (sub,)
                continue
            name = dotted(func) or ""
            if name.rsplit(".", 1)[-1].startswith("zero_grad") and sub.args:
                # A library's clearing function (`pyro.infer.util.zero_grads(params)`).
                yield clearing("Z", sub, sub.args[0].value)
                continue
            if not self._may_clear_arguments(func, scope, qualify):
                continue
            for arg in sub.args:
                if kinds(arg.value) & {OPTIMIZER, MODULE, FORWARD}:
                    yield clearing("U", sub, arg.value)
                for attribute in self._optimizers_held_by(arg.value, scope):
                    # `cb.on_batch_end(self)`: the callback may clear `self.optimizer`.
                    yield clearing("U", sub, cst.Attribute(value=arg.value, attr=cst.Name(value=attribute)))

    def _optimizers_held_by(self, expr: cst.BaseExpression, scope: Scope) -> list[str]:
        """The attributes holding an optimizer on an object of a class of the file that
        ``expr`` names (`self` in a method, a trainer instance): code handed the object
        can reach them. Only in a file whose own code clears an optimizer it reaches
        through a parameter (`trainer.optimizer.zero_grad()` in a callback): where
        nothing does, a callback handed the trainer is taken to clear nothing."""
        if type(expr) is not cst.Name or not self.program.clears_through_a_parameter:
            return []
        if expr.value == "self":
            cls = scope.cls
        else:
            cls = self.program.class_of_instance(self.program.kinds(scope, expr.value))
        if cls is None:
            return []
        return sorted(
            path[len("self."):]
            for owner in self.program.lineage(cls)
            for path in self.program.attributes_of_kind(owner.name, OPTIMIZER)
            if path.count(".") == 1
        )

    def _bound_from(self, scope: Scope, local: str | None, aliases) -> str | None:
        """The object path a local model name was bound to: `model = self.model`,
        `model = nn.DataParallel(net)` (one object, under another name)."""
        if not local or "." in local or local not in scope.locals:
            return None
        value = self.program.first_assignment(scope, local)
        if type(value) is cst.Call and value.args and (dotted(value.func) or "").endswith(
            ("DataParallel", "DistributedDataParallel")
        ):
            value = value.args[0].value
        source = dotted(value) if type(value) in (cst.Name, cst.Attribute) else None
        return self.resolve_path(source, aliases) if source and source != local else None

    def _may_clear_arguments(self, func, scope: Scope, qualify) -> bool:
        """Whether an unknown call could clear the gradients of the optimizer or model it receives."""
        if (
            type(func) is cst.Name
            and func.value in CUTTING_BUILTINS | PASSING_BUILTINS
        ):
            return False
        qualified = qualify(func) or ""
        if qualified.startswith("torch."):
            return False
        if type(func) is cst.Attribute:
            if func.attr.value == "grad" and qualified:
                return False
            if self.program.kinds(scope, dotted(func.value)) & _NOT_CLEARING_OWNERS:
                return False
        return True

    def _helper(self, func, scope: Scope, aliases):
        program = self.program
        if type(func) is cst.Name:
            nested = self._scopes_by_key.get(f"{scope.key}.{func.value}")
            if nested is not None and scope.key != "<module>":
                return nested.node, None, None
            if func.value in program.functions and (
                scope.key == "<module>" or func.value not in scope.locals
            ):
                return program.functions[func.value], None, None
            cls = program.class_of_instance(program.kinds(scope, func.value))
            if cls is not None:
                found = program.method(cls, "forward") or program.method(cls, "__call__")
                if found:
                    return found[1], found[0], self.resolve(func, aliases)
            return None
        if type(func) is cst.Attribute:
            owner = func.value
            cls = None
            if type(owner) is cst.Name and owner.value == "self":
                cls = scope.cls
            else:
                cls = program.class_of_instance(program.kinds(scope, dotted(owner)))
            if cls is not None:
                found = program.method(cls, func.attr.value)
                if found:
                    return found[1], found[0], self.resolve(owner, aliases)
        return None

    def _closure_backward(self, closure: cst.BaseExpression, scope: Scope, aliases) -> cst.Call | None:
        """The backward of a step's closure (`optimizer.step(closure)`, a `def` of the
        file) that clears no gradients itself; None when it clears some, writes any
        `.grad`, or calls a helper of the file (which might)."""
        found = self._helper(closure, scope, aliases) if type(closure) is cst.Name else None
        if found is None:
            return None
        backward = None
        for sub in _calls_and_grad_writes(found[0].body):
            if _clears(sub):
                return None
            helper = self._helper(sub.func, scope, aliases)
            if helper is not None and any(_clears(inner) or self._helper(inner.func, scope, aliases)
                                          for inner in _calls_and_grad_writes(helper[0].body)):
                return None  # a helper that clears, or calls further helpers: unknown
            if type(sub.func) is cst.Attribute and sub.func.attr.value == "backward" and backward is None:
                backward = sub
        return backward

    def _optimizers_call(self, method: cst.FunctionDef, name: str) -> str | None:
        """The optimizer (`self.optimizer`) whose `step` or `zero_grad` (``name``) a
        method runs: a wrapper's. None for a method updating or clearing parameters
        by hand (an optimizer class of the file) or calling something unknown."""
        scope = self.program.scopes[method]
        for sub in _calls_and_grad_writes(method.body):
            if type(sub) is cst.Call and type(sub.func) is cst.Attribute and sub.func.attr.value == name:
                owner = dotted(sub.func.value)
                if OPTIMIZER in self.program.kinds(scope, owner):
                    return owner
        return None

    def _step_clears(self, scope: Scope, local: str | None) -> bool:
        kinds = self.program.kinds(scope, local)
        if CLEARING_ENGINE in kinds:
            return True
        cls = self.program.class_of_instance(kinds)
        if cls is None:
            return False
        found = self.program.method(cls, "step")
        if found is None:
            return False
        for sub in _calls_and_grad_writes(found[1].body):
            if (isinstance(sub, _GradWrite) and sub.kind == "Z") or (
                type(sub.func) is cst.Attribute
                and (sub.func.attr.value in ZERO_GRAD_METHODS or sub.func.attr.value == "zero_")
            ):
                return True
        return False

    def _grad_owner(self, write: _GradWrite, fors: tuple, aliases) -> str | None:
        """The model (or optimizer) whose parameters a `p.grad = None` loop clears."""
        for index in range(len(fors) - 1, -1, -1):
            loop_stmt = fors[index]
            if write.name not in bound_names(loop_stmt.target):
                continue
            iterable = loop_stmt.iter
            if (
                type(iterable) is cst.Call
                and type(iterable.func) is cst.Attribute
                and iterable.func.attr.value in ("parameters", "named_parameters")
            ):
                return self.resolve(iterable.func.value, aliases)
            if type(iterable) is cst.Subscript and isinstance(
                iterable.value, cst.Name
            ):
                # `for p in group['params']` inside `for group in opt.param_groups`
                group = iterable.value.value
                for outer in fors[:index]:
                    if (
                        group in bound_names(outer.target)
                        and type(outer.iter) is cst.Attribute
                        and outer.iter.attr.value == "param_groups"
                    ):
                        return self.resolve(outer.iter.value, aliases)
                return None
            return self.resolve(iterable, aliases)
        return None


def _rebound_to_a_new_tensor(body: cst.CSTNode, name: str) -> bool:
    """Whether ``body`` binds ``name`` with a plain statement (not under a test) to a
    new tensor: a copy cut from its graph (``x.detach().clone()``) or a factory call."""
    return any(_new_tensor(value) for value in _plain_bindings(body, name))


def _parameters_of_a_new_model(body: cst.CSTNode, expr: cst.BaseExpression) -> str | None:
    """The model whose ``model.parameters()`` ``expr`` is (or a dict or list built from
    them, ``params.values()``), when the loop ``body`` constructs it afresh
    (``model = CopyGenerator(**case)``); else None."""
    if type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value == "values" and not expr.args:
        expr = expr.func.value  # `trainable_params.values()`
    if type(expr) is cst.Call and dotted(expr.func) in ("list", "tuple") and len(expr.args) == 1:
        expr = expr.args[0].value
    if type(expr) is cst.Name:
        expr = _plain_binding(body, expr.value)
        if type(expr) in (cst.DictComp, cst.ListComp, cst.GeneratorExp):
            expr = expr.for_in.iter  # `{n: p for n, p in model.named_parameters() if ...}`
    if not (type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in PARAMETER_METHODS):
        return None
    model = expr.func.value
    built = _plain_binding(body, model.value) if type(model) is cst.Name else None
    return model.value if built is not None and _constructs(built) else None


def _constructs(value: cst.BaseExpression) -> bool:
    """A class call: by Python's naming convention, since the class may be another file's."""
    return type(value) is cst.Call and (last_part(dotted(value.func) or "_")[:1]).isupper()


def _plain_bindings(body: cst.CSTNode, name: str):
    """The values ``body`` binds ``name`` to with plain statements (not under a test), in order."""
    for stmt in body.body:
        for small in stmt.body if type(stmt) is cst.SimpleStatementLine else ():
            if type(small) is cst.Assign and len(small.targets) == 1:
                target = small.targets[0].target
                if type(target) is cst.Name and target.value == name:
                    yield small.value


def _plain_binding(body: cst.CSTNode, name: str) -> cst.BaseExpression | None:
    """The first value ``body`` binds ``name`` to with a plain statement."""
    return next(_plain_bindings(body, name), None)


def _new_tensor(expr: cst.BaseExpression) -> bool:
    """``a.detach().clone()``, ``a.clone().detach().requires_grad_()``, ``torch.zeros(...)``."""
    methods = set()
    while type(expr) is cst.Call and type(expr.func) is cst.Attribute:
        methods.add(expr.func.attr.value)
        expr = expr.func.value
    if "detach" in methods or "clone" in methods:
        return True
    return type(expr) is cst.Call and is_torch_factory(dotted(expr.func) or "")


def _clears(sub) -> bool:
    """A `.grad` write, or a call of a `zero_grad` (or a tensor's `zero_`)."""
    if isinstance(sub, _GradWrite):
        return True
    name = sub.func.attr.value if type(sub.func) is cst.Attribute else dotted(sub.func) or ""
    last = name.rsplit(".", 1)[-1]
    return last.startswith("zero_grad") or last in ZERO_GRAD_METHODS or name == "zero_"


def _calls_and_grad_writes(root, fors: tuple = ()):
    """Calls in evaluation order (arguments first), plus `p.grad = None`-style clears.

    A clear under an `if` inside the loop that selects parameters
    (`if "last_layer" in name: p.grad = None`) clears only those, on purpose:
    DINO and SwAV freeze a layer for the first epochs that way between
    backward and step. It is no clear of the optimizer's gradients;
    `if p.grad is not None: p.grad.zero_()` is one.
    """
    out: list = []

    def visit(node: cst.CSTNode, fors: tuple, selective: bool) -> None:
        if type(node) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            return
        if type(node) is cst.For:
            visit(node.iter, fors, selective)
            inner = fors + (node,)
            visit(node.body, inner, selective)
            if node.orelse is not None:
                visit(node.orelse, fors, selective)
            return
        if type(node) is cst.If and fors and _selects_parameters(node.test, fors):
            visit(node.test, fors, selective)
            visit(node.body, fors, True)
            if node.orelse is not None:
                visit(node.orelse, fors, True)
            return
        if type(node) is cst.Assign:
            visit(node.value, fors, selective)
            for target in node.targets:
                name = _grad_of(target.target)
                if name and not selective:
                    out.append(_GradWrite(target.target, name, fors, _assigned_gradient(node.value, name)))
            return
        for child in children(node):
            visit(child, fors, selective)
        if type(node) is cst.Call:
            func = node.func
            if type(func) is cst.Attribute and func.attr.value in _GRAD_OVERWRITES:
                name = _grad_of(func.value)
                if name:
                    if not selective:
                        out.append(_GradWrite(node, name, fors, _overwritten_gradient(node)))
                    return
            out.append(node)

    if isinstance(root, (list, tuple)):
        for item in root:
            visit(item, fors, False)
    else:
        visit(root, fors, False)
    return out


# In-place methods that replace every element of a gradient: `p.grad.zero_()` clears
# it, `p.grad.fill_(0.01)` / `p.grad.copy_(g)` set one the code chose (a test faking
# gradients, a gradient computed elsewhere) that the next step is meant to apply.
_GRAD_OVERWRITES = ("zero_", "fill_", "copy_")


def _periodic_locals(cfg: CFG, code) -> dict[str, cst.BaseExpression]:
    """Locals bound once, to a periodic test of counters the scope never `+=`s (loop
    variables, the same all through an iteration): `sync = (i + 1) % k == 0` then
    `if sync:` tests what `if (i + 1) % k == 0:` would. Read off the statements of
    the scope's CFG, and only for names its tests use."""
    tested = set()
    for node in cfg.nodes:
        if node.kind in (IF, WHILE):
            tested |= _tested_names(node.stmt.test)
    if not tested:
        return {}
    bound: dict[str, list] = {}
    incremented: set[str] = set()
    for node in cfg.nodes:
        stmt = node.stmt
        if node.kind == FOR:
            for name in bound_names(stmt.target):
                bound.setdefault(name, []).append(None)
        elif type(stmt) is cst.Assign:
            for target in stmt.targets:
                for name in bound_names(target.target):
                    bound.setdefault(name, []).append(stmt.value if type(target.target) is cst.Name else None)
        elif type(stmt) is cst.AugAssign and type(stmt.target) is cst.Name:
            incremented.add(stmt.target.value)
        elif type(stmt) is cst.AnnAssign and type(stmt.target) is cst.Name:
            bound.setdefault(stmt.target.value, []).append(None)
    found = {}
    for name in tested:
        values = bound.get(name, ())
        if len(values) != 1 or values[0] is None:
            continue
        found_atoms = atoms(values[0], code)
        if found_atoms and not any(atom.key[0] in incremented for atom in found_atoms):
            found[name] = values[0]
    return found


def _tested_names(test: cst.BaseExpression) -> set[str]:
    """The names a test is made of through `not`, `and` and `or` (what _substituted replaces)."""
    if type(test) is cst.Name:
        return {test.value}
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return _tested_names(test.expression)
    if type(test) is cst.BooleanOperation:
        return _tested_names(test.left) | _tested_names(test.right)
    return set()


def _substituted(test: cst.BaseExpression, tests: dict[str, cst.BaseExpression]) -> cst.BaseExpression:
    """``test`` with each name of ``tests`` replaced by the test it stands for, through
    `not`, `and` and `or` (`if not is_accumulating:`)."""
    if type(test) is cst.Name:
        return tests.get(test.value, test)
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        inner = _substituted(test.expression, tests)
        return test if inner is test.expression else test.with_changes(expression=inner)
    if type(test) is cst.BooleanOperation:
        left, right = _substituted(test.left, tests), _substituted(test.right, tests)
        return test if (left, right) == (test.left, test.right) else test.with_changes(left=left, right=right)
    return test


def _overwritten_gradient(call: cst.Call) -> str:
    """The _GradWrite kind of `p.grad.zero_()`, `.fill_(v)` or `.copy_(g)`."""
    method = call.func.attr.value
    if method == "zero_":
        return "Z"
    value = call.args[0].value if method == "fill_" and call.args else None
    return "Z" if type(value) in (cst.Integer, cst.Float) and float(value.value) == 0 else "R"


def _assigned_gradient(value: cst.BaseExpression, name: str) -> str:
    """The _GradWrite kind of `name.grad = value`: None or zeros clear; a value built on
    the old gradient (`p.grad * mask`) rebuilds it; any other (DP-SGD's `(summed +
    noise) / n`) replaces it. Either of the last two is what the step is meant to apply."""
    if type(value) is cst.Name and value.value == "None":
        return "Z"
    if type(value) is cst.Call and (dotted(value.func) or "").rsplit(".", 1)[-1] in ("zeros_like", "zeros", "new_zeros"):
        return "Z"
    reads_old = any(_grad_of(node) == name for node in descendants(value))
    return "W" if reads_old else "R"


def _selects_parameters(test: cst.BaseExpression, fors: tuple) -> bool:
    """Whether the test picks some of the loop's parameters: it reads a name a loop
    binds (`name`, `p.shape`), other than through `.grad` / `.requires_grad`. A
    condition on anything else (`if zero:` in a custom optimizer's step) holds
    for every parameter alike."""
    bound = set().union(*(bound_names(loop.target) for loop in fors))
    pending = [test]
    while pending:
        node = pending.pop()
        if type(node) is cst.Attribute and node.attr.value in ("grad", "requires_grad"):
            continue
        if type(node) is cst.Name and node.value in bound:
            return True
        pending.extend(children(node))
    return False


def _grad_of(expr: cst.BaseExpression) -> str | None:
    """`p` for `p.grad` / `p.grad.data`."""
    if type(expr) is cst.Attribute and expr.attr.value == "data":
        expr = expr.value
    if (
        type(expr) is cst.Attribute
        and expr.attr.value == "grad"
        and type(expr.value) is cst.Name
    ):
        return expr.value.value
    return None


class OrderAnalysis:
    """Solve the B/Z/S order per optimizer on one event graph and collect violations."""

    def __init__(self, graph: EventGraph, entry: int, code) -> None:
        self.graph = graph
        self.entry = entry
        self.code = code
        self.violations: list[Violation] = []
        self.line = lambda node: 0  # set by analyse_order: a node's source line
        incremented = {node.increments for node in graph.nodes if node.increments}
        # Counters whose residue is known: bound by a `for` around the guard, or `+= 1`ed.
        self.keys: list[tuple[str, str]] = []
        self.counter_loop: dict[tuple, int] = {}
        self.start: dict[tuple, int] = {}
        self.guards: dict[int, cst.BaseExpression] = {}
        self._deciding = deciding_tests(graph, code)
        for node in graph.nodes:
            if node.id not in self._deciding:
                continue
            usable = False
            for atom in atoms(node.test, code):
                key = atom.key
                if key in self.keys:
                    usable = True
                    continue
                if len(self.keys) >= len(_PERIODS):
                    continue
                header = self._binding_loop(node, key[0])
                if header is None and key[0] not in incremented:
                    continue
                self.keys.append(key)
                usable = True
                if header is not None and key[0] not in incremented:
                    self.counter_loop[key] = header
                    self.start[key] = graph.nodes[header].binds[1]
            if usable:
                self.guards[node.id] = node.test
        # Names tested against None and set to None somewhere (`params = None` before the
        # loop, `params = ...` in it): a first-iteration guard is decided per path.
        set_to_none = {
            name for node in graph.nodes for name, is_none in node.assigns if is_none
        }
        self.nulls: list[str] = []
        for node in graph.nodes:
            if node.id not in self._deciding:
                continue
            for name, _ in null_tests(node.test):
                if name in set_to_none and (name in self.nulls or len(self.nulls) < 3):
                    if name not in self.nulls:
                        self.nulls.append(name)
                    self.guards[node.id] = node.test
        self.assigners = {
            node.id: [
                (self.nulls.index(n), none)
                for n, none in node.assigns
                if n in self.nulls
            ]
            for node in graph.nodes
            if any(n in self.nulls for n, _ in node.assigns)
        }
        # Flags: a parameter its scope never re-binds, or a local only tested (see
        # guards.tested_locals), tested by truth (`if optimizer:`) or against None, and
        # constant attribute or comparison tests (`if args.sparse:`; see _constant_tests),
        # at two tests or more of one splice, or at one inside a loop (each iteration
        # tests it again). Its value cannot change between those tests (a local's
        # binding makes it unknown again, see flag_resets), so the branch the first
        # took decides the others (0 unknown, 1 false / None, 2 true / not None).
        tests: dict[tuple, list[tuple[int, int]]] = {}
        for node in graph.nodes:
            found = flag_test(node.test) if node.test is not None and node.constant else None
            if (
                found is not None
                and found[0] in node.constant[1]
                and found[0] not in self.nulls
                and node.id in self._deciding
            ):
                name, kind, if_true = found
                tests.setdefault((node.constant[0], name, kind), []).append((node.id, if_true))
        self.flags = [
            flag for flag, tested in tests.items() if len(tested) > 1 or graph.nodes[tested[0][0]].loop is not None
        ][:_MAX_FLAGS]
        first = len(self.keys) + len(self.nulls)
        # Test node -> (its flag's position in the residue, the status its True branch means).
        self.flag_tests = {
            node_id: (first + index, if_true)
            for index, flag in enumerate(self.flags)
            for node_id, if_true in tests[flag]
        }
        # An assignment of a flag local makes its value unknown again, and so does a
        # new call of the spliced function (a helper called in a loop, with other arguments).
        self.flag_resets = {
            node.id: [
                first + index
                for index, (splice, name, _) in enumerate(self.flags)
                if splice == node.splice and any(name == assigned for assigned, _ in node.assigns)
            ]
            for node in graph.nodes
            if node.assigns
        }
        for node_id, entered in graph.splice_entries.items():
            resets = [first + index for index, (splice, _, _) in enumerate(self.flags) if splice == entered]
            if resets:
                self.flag_resets[node_id] = self.flag_resets.get(node_id, []) + resets
        self.incrementers = {
            node.id: [k for k in self.keys if k[0] == node.increments]
            for node in graph.nodes
            if node.increments
        }
        self._owners: dict[int, set[str]] = {}
        self._models_of: dict[str, set[str]] = {}  # optimizer -> models its steps update
        self._predecessors: dict[int, list[int]] | None = None

    def _binding_loop(self, node: ENode, name: str) -> int | None:
        header = node.loop
        seen = set()
        while header is not None and header not in seen:
            seen.add(header)
            loop = self.graph.nodes[header]
            if loop.binds and loop.binds[0] == name:
                return header
            header = loop.parent_loop
        return None

    def optimizers(self) -> set[str]:
        return {
            event.target
            for node in self.graph.nodes
            for event in node.events
            if event.kind in ("S", "SC") and event.target and not event.framework
        }

    def run(self) -> list[Violation]:
        for optimizer in sorted(self.optimizers()):
            self._solve(optimizer)
        self._uncleared_closures()
        return self.violations

    def _uncleared_closures(self) -> None:
        """(b) for `optimizer.step(closure)` whose closure backwards but never clears,
        when nothing else clears that optimizer's gradients either: each call of the
        closure (once per step, or several times in one LBFGS step) adds to the
        gradients of all the earlier ones."""
        events = [event for node in self.graph.nodes for event in node.events]
        for event in events:
            if event.kind != "SC" or event.uncleared is None or event.framework:
                continue
            if any(other.kind in ("Z", "R", "U") and self.relation(other, event.target) != NO for other in events):
                continue
            self.violations.append(Violation("b", event.uncleared, event.target, event.uncleared, event.call, event.call))

    # ----- which optimizer a backward feeds -----
    def owners(self, node: ENode, index: int) -> set[str]:
        """The optimizers a backward belongs to: every optimizer in the first run of steps
        after it (steps with no backward or zero_grad between them). zero_grads between the
        backward and that run do not end it: they are what (a) is about."""
        key = id(node.events[index].call) * 1000 + node.id
        if key in self._owners:
            return self._owners[key]
        found: set[str] = set()
        seen: set[tuple[int, bool]] = set()
        todo = [(node.id, index + 1, False)]
        while todo:
            node_id, start, stepped = todo.pop()
            current = self.graph.nodes[node_id]
            alive = True
            for event in current.events[start:]:
                if event.kind in ("S", "SC"):
                    found.add(event.target or "?")
                    stepped = True
                elif stepped and event.kind in ("B", "Z", "U"):
                    alive = False
                    break
            if not alive:
                continue
            for succ, _ in current.succ:
                if (succ, stepped) not in seen:
                    seen.add((succ, stepped))
                    todo.append((succ, 0, stepped))
        self._owners[key] = found
        return found

    def _owned_backwards(self, optimizer: str) -> set[tuple[int, int]]:
        # Per occurrence: a helper spliced in twice has its backward twice, once per call.
        return {
            (node.id, index)
            for node in self.graph.nodes
            for index, event in enumerate(node.events)
            if event.kind == "B" and optimizer in self.owners(node, index)
        }

    # ----- does a zero_grad clear this optimizer's gradients? -----
    def relation(self, event: Event, optimizer: str) -> str:
        target = event.target
        if target is None:
            return MAYBE
        unknown_call = event.kind == "U"
        if target == optimizer:
            return MAYBE if unknown_call else YES
        if related_paths(target, optimizer):
            # An optimizer wrapping another (SAM's `self.base_optimizer`, built on its
            # own param_groups): the wrapper's zero_grad may clear the inner one's.
            return MAYBE
        models = self._models(optimizer)
        if event.bound_from and any(related_paths(event.bound_from, model) for model in models):
            return MAYBE  # `model = self.model; model.zero_grad()`: the same object, as far as seen
        for model in models:
            if target == model or model.startswith(target + "."):
                return MAYBE if unknown_call else YES
            if target.startswith(model + "."):
                return MAYBE  # a submodule: part of the gradients
        kinds = (
            self.graph.program.kinds(event.scope, event.local) if event.scope else set()
        )
        if OPTIMIZER in kinds:
            # Another optimizer; one that steps some of the same models (infoGAN's
            # optimizer over chain(G, D) beside G's and D's own) clears part of these.
            shared = any(related_paths(mine, theirs) for mine in models for theirs in self._models(target))
            wrapped = self._wraps(optimizer, target, event.scope) or self._wraps(target, optimizer, event.scope)
            return MAYBE if shared or wrapped else NO
        if models and MODULE in kinds:
            return NO  # another model
        return MAYBE

    def _wraps(self, outer: str, inner: str, scope: Scope | None) -> bool:
        """Whether ``outer`` (or the object it is an attribute of: `optimizer.optimizer`,
        a wrapper's own step) was built around ``inner`` (`optimizer = Lookahead(base_opt)`):
        one optimizer under two names, as far as its gradients go."""
        program = self.graph.program
        for where in (scope, self.graph.root):
            if where is None:
                continue
            value = program.first_assignment(where, outer.split(".")[0])
            if type(value) is cst.Call and any(dotted(arg.value) == inner for arg in value.args):
                return True
        return False

    def _models(self, optimizer: str) -> set[str]:
        models = self._models_of.get(optimizer)
        if models is None:
            models = self._models_of[optimizer] = {
                model
                for node in self.graph.nodes
                for step in node.events
                if step.kind == "S" and step.target == optimizer
                for model in step.models
            }
        return models

    # ----- the dataflow -----
    def _solve(self, optimizer: str) -> None:
        if any(
            e.framework
            for n in self.graph.nodes
            for e in n.events
            if e.target == optimizer
        ):
            return
        owned = self._owned_backwards(optimizer)
        if not owned:
            return  # no backward feeds this optimizer: nothing to clear or apply twice
        skips = self._skip_edges(optimizer)
        # Counter residues, then None-ness of `self.nulls` (0 unknown, 1 None, 2 not None).
        start = tuple(self.start.get(key, 0) for key in self.keys) + (0,) * (
            len(self.nulls) + len(self.flags)
        )
        empty = frozenset()
        # state: (must or None for "not decided yet", deferred, fresh, applied)
        initial = (empty, empty, empty, empty)
        exit_steps = self._exit_steps(optimizer, owned)
        # Only gradients held back (accumulated) can be abandoned.
        abandons = self._abandon_edges(optimizer) if skips or exit_steps else set()
        abandons |= self._window_exits(skips, exit_steps)
        # key: (node, counter residues, tainted, in a loop entered but not yet iterated)
        states: dict[tuple, tuple] = {(self.entry, start, False, False): initial}
        work = [(self.entry, start, False, False)]
        budget = _BUDGET
        nodes = self.graph.nodes
        passing = self._pass_through({edge[0] for edge in skips | abandons})
        while work:
            budget -= 1
            if budget <= 0:
                return  # too many paths: stay silent rather than guess
            key = work.pop()
            node_id, residue, tainted, unentered = key
            node = nodes[node_id]
            out = self._transfer(node, states[key], optimizer, owned, None)
            for succ, first_label, succ_residue, taint in self._successors(node_id, residue):
                label = first_label
                while succ in passing:
                    succ, label = nodes[succ].succ[0]
                    if nodes[succ].header:
                        succ_residue = self._enter_loop(succ, succ_residue, label == BACK)
                value = out
                # Gradients held back from a step the other branch (or the code after
                # the loop) takes: accumulation, which a zero_grad must not wipe.
                if (
                    (node_id, first_label) in skips or (label == BACK and succ in exit_steps)
                ) and value[0] is not None:
                    value = (value[0], value[0], value[2], value[3])
                elif (node_id, first_label) in abandons and value[1]:
                    value = (value[0], empty, value[2], value[3])
                entering = nodes[succ].header and label != BACK
                succ_unentered = unentered
                if node.loop_test and first_label is True:
                    succ_unentered = False
                elif node.loop_test and first_label is False and unentered:
                    taint = True  # a loop that ran zero times: possible, never certain
                if entering:
                    succ_unentered = True
                skey = (succ, succ_residue, tainted or taint, succ_unentered)
                merged = _join(states.get(skey), value, entering)
                if merged != states.get(skey):
                    states[skey] = merged
                    work.append(skey)
        # (a) must hold on every path, tainted or not; (b) only on untainted ones.
        by_point: dict[tuple[int, tuple], tuple] = {}
        for (node_id, residue, tainted, _), state in states.items():
            by_point[(node_id, residue)] = _join(
                by_point.get((node_id, residue)), state, False
            )
            if not tainted:
                self._transfer(self.graph.nodes[node_id], state, optimizer, owned, "b")
        for (node_id, residue), state in by_point.items():
            self._transfer(
                self.graph.nodes[node_id], state, optimizer, owned, "a", residue
            )

    def _pass_through(self, edge_sources: set[int]) -> set[int]:
        """Nodes the dataflow can step over: no event, no test, not a loop's header,
        nothing counted or assigned, one way on (most statements of a large trainer).
        Their state is their predecessor's; skipping them halves the work."""
        return {
            node.id
            for node in self.graph.nodes
            if len(node.succ) == 1
            and not node.events
            and node.test is None
            and not node.header
            and not node.loop_test
            and not node.increments
            and not node.assigns
            and node.id not in edge_sources
            and node.id not in self.flag_resets
            and node.id != self.entry
        }

    def _successors(self, node_id: int, residue: tuple):
        node = self.graph.nodes[node_id]
        residue = self._increment(node_id, residue)
        # A flag's test takes the branch its earlier test took (or both, each
        # remembering its outcome); a guard's is decided by the residue.
        flag = self.flag_tests.get(node_id)
        test = None if flag is not None else self.guards.get(node_id)
        value = taint_true = None
        if flag is not None:
            status = residue[flag[0]]
            value = None if status == 0 else status == flag[1]
        elif test is not None:
            value = self._evaluate(test, residue, unknown=None)
            # `periodic or other`: taking the branch only `other` allows is not certain.
            taint_true = (
                value is None
                and type(test) is cst.BooleanOperation
                and type(test.operator) is cst.Or
                and self._evaluate(test, residue, unknown=False) is False
            )
        for succ, label in node.succ:
            taint = False
            branch = node.back_branch if label == BACK else label
            if (
                node.fixed is not None
                and branch in (True, False)
                and branch != node.fixed
            ):
                continue
            next_residue = residue
            if (test is not None or flag is not None) and branch in (True, False):
                if value is not None and value != branch:
                    continue
                taint = bool(taint_true and branch is True)
                if flag is not None:
                    position, if_true = flag
                    taken = if_true if branch else 3 - if_true
                    next_residue = residue[:position] + (taken,) + residue[position + 1:]
            if self.graph.nodes[succ].header:
                next_residue = self._enter_loop(succ, next_residue, label == BACK)
            yield succ, label, next_residue, taint

    def _evaluate(self, test, residue: tuple, unknown):
        if type(test) is cst.BooleanOperation:
            left = self._evaluate(test.left, residue, unknown)
            right = self._evaluate(test.right, residue, unknown)
            if type(test.operator) is cst.Or:
                # `periodic or step == len(loader) - 1`: the flush of the last window
                # is one iteration, after which the loop ends; every other iteration
                # the periodic part alone decides (so a zero_grad each iteration still
                # wipes the held-back gradients).
                counters = {key[0] for key in self.keys}
                if left is None and counter_reaches(test.left, counters):
                    left = False
                if right is None and counter_reaches(test.right, counters):
                    right = False
                if left is True or right is True:
                    return True
                return False if left is False and right is False else None
            if left is False or right is False:
                return False
            return True if left is True and right is True else None
        null = null_test(test)
        if null is not None and null[0] in self.nulls:
            status = residue[len(self.keys) + self.nulls.index(null[0])]
            if status == 0:
                return unknown
            return (status == 2) if null[1] else (status == 1)
        atom = periodic(test, self.code)
        if atom is not None and atom.key in self.keys:
            index = self.keys.index(atom.key)
            hit = (residue[index] + atom.offset) % _PERIODS[index] == 0
            return hit if atom.equal else not hit
        if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            inner = self._evaluate(test.expression, residue, unknown)
            return None if inner is None else not inner
        return unknown

    def _increment(self, node_id: int, residue: tuple) -> tuple:
        keys = self.incrementers.get(node_id)
        assigned = self.assigners.get(node_id)
        resets = self.flag_resets.get(node_id)
        if not keys and not assigned and not resets:
            return residue
        values = list(residue)
        for index, is_none in assigned or ():
            values[len(self.keys) + index] = 1 if is_none else 2
        for position in resets or ():
            values[position] = 0
        keys = keys or ()
        for key in keys:
            index = self.keys.index(key)
            values[index] = (values[index] + 1) % _PERIODS[index]
        return tuple(values)

    def _enter_loop(self, header: int, residue: tuple, back: bool) -> tuple:
        """A loop-bound counter restarts when its loop is entered and advances on the back edge."""
        values = list(residue)
        for index, key in enumerate(self.keys):
            if self.counter_loop.get(key) == header:
                if back:
                    values[index] = (values[index] + 1) % _PERIODS[index]
                else:
                    values[index] = self.start[key] % _PERIODS[index]
        return tuple(values)

    def _skip_edges(self, optimizer: str) -> set[tuple[int, object]]:
        """Branches of periodic guards that skip a step the other branch takes, and the
        edges by which such a branch rejoins: a backward inside it (`with
        model.no_sync(): loss.backward()` in the `else` of the step's test) holds its
        gradients back for the step as one before the test does."""
        skips = self._edges_skipping_step(
            self.guards, lambda succ, guard: self._reaches_step(succ, guard, optimizer)
        )
        if not skips:
            return skips
        successors = [[succ for succ, label in node.succ if label != BACK] for node in self.graph.nodes]
        ipdom = immediate_post_dominators(successors)
        rejoining = set()
        for guard, label in skips:
            join = ipdom.get(guard)
            start = next(succ for succ, edge in self.graph.nodes[guard].succ if edge == label)
            seen, todo = {guard, join}, [start]
            while todo:
                node_id = todo.pop()
                if node_id in seen:
                    continue
                seen.add(node_id)
                for succ, edge in self.graph.nodes[node_id].succ:
                    if succ == join and edge != BACK:
                        rejoining.add((node_id, edge))
                    elif edge != BACK:
                        todo.append(succ)
        return skips | rejoining

    def _abandon_edges(self, optimizer: str) -> set[tuple[int, object]]:
        """Branches of other tests that skip a step the other branch takes: a step
        skipped on purpose (`if not finite: zero_grad() else: step()`), whose
        accumulated gradients the code means to throw away."""
        tests = [node.id for node in self.graph.nodes if node.test is not None and node.id not in self.guards]
        reaching = self._nodes_reaching_step(optimizer)  # one walk for every test
        return self._edges_skipping_step(tests, lambda succ, guard: succ in reaching)

    def _window_exits(self, skips: set, exit_steps: set[int]) -> set[tuple[int, object]]:
        """Exits of the loops in which a periodic guard holds gradients back, when no step
        follows the loop: the last window of the loop may be partial, and dropping it (the
        next zero_grad, at the start of the next epoch) is a convention, as `drop_last` is."""
        headers = {self.graph.nodes[guard].loop for guard, _ in skips} - {None} - exit_steps
        return {
            (node.id, label)
            for node in self.graph.nodes
            if node.loop_test and node.loop in headers
            for _, label in node.succ
            if label is False
        }

    def _nodes_reaching_step(self, optimizer: str) -> set[int]:
        """The nodes from which a step of the optimizer is reachable without going around a loop."""
        before: dict[int, list[int]] = {}
        for node in self.graph.nodes:
            for succ, label in node.succ:
                if label != BACK:
                    before.setdefault(succ, []).append(node.id)
        reaching = {node.id for node in self.graph.nodes if _steps(node, optimizer)}
        todo = list(reaching)
        while todo:
            for earlier in before.get(todo.pop(), ()):
                if earlier not in reaching:
                    reaching.add(earlier)
                    todo.append(earlier)
        return reaching

    def _edges_skipping_step(self, tests, reaches_step) -> set[tuple[int, object]]:
        edges = set()
        for node_id in tests:
            node = self.graph.nodes[node_id]
            branches = {}
            for succ, label in node.succ:
                branch = node.back_branch if label == BACK else label
                if branch in (True, False):
                    branches[branch] = (succ, label)
            if len(branches) != 2:
                continue
            reach = {
                branch: label != BACK and reaches_step(succ, node_id)
                for branch, (succ, label) in branches.items()
            }
            for branch in (True, False):
                if not reach[branch] and reach[not branch]:
                    edges.add((node_id, branches[branch][1]))
        return edges

    def _exit_steps(self, optimizer: str, owned: set) -> set[int]:
        """Loop headers after whose loop a step of the optimizer follows before a new backward."""
        found = set()
        for test in self.graph.nodes:
            if not test.loop_test or test.loop is None:
                continue
            exits = [succ for succ, label in test.succ if label is False]
            if exits and self._step_before_backward(exits, optimizer, owned):
                found.add(test.loop)
        return found

    def _step_before_backward(
        self, starts: list[int], optimizer: str, owned: set
    ) -> bool:
        seen: set[int] = set()
        todo = list(starts)
        while todo:
            node_id = todo.pop()
            if node_id in seen:
                continue
            seen.add(node_id)
            node = self.graph.nodes[node_id]
            alive = True
            for index, event in enumerate(node.events):
                if event.kind == "S" and event.target == optimizer:
                    return True
                if (event.kind == "B" and (node_id, index) in owned) or (
                    event.kind == "SC" and event.target == optimizer
                ) or event.kind in ("W", "R"):
                    # (A rebuilt gradient: the step applies what the code wrote, not
                    # the backwards' accumulated sum.)
                    alive = False
                    break
            if alive:
                todo.extend(succ for succ, _ in node.succ)
        return False

    def _reaches_step(self, start: int, guard: int, optimizer: str) -> bool:
        """A step of the optimizer reachable without going around a loop or through the guard."""
        seen = {guard}
        todo = [start]
        while todo:
            node_id = todo.pop()
            if node_id in seen:
                continue
            seen.add(node_id)
            node = self.graph.nodes[node_id]
            if _steps(node, optimizer):
                return True
            todo.extend(succ for succ, label in node.succ if label != BACK)
        return False

    def _step_follows(
        self, node: ENode, index: int, residue: tuple, optimizer: str, owned: set
    ) -> bool:
        """A step of the optimizer may run after this event before any new backward of it.

        For a clear under a periodic test, a backward of a later iteration does not
        end the search (`if i % k == 0: zero_grad()` after the backward wipes the
        first micro-batch of each window the step at `(i + 1) % k == 0` sums), but a
        clear there does. Otherwise a new backward ends it: the cleared gradients were
        a probe (read, then cleared before the real backward), or a batch skipped on
        purpose (`if not isfinite(norm): zero_grad(); continue`)."""
        seen: set[tuple] = set()
        todo = [(node.id, index + 1, residue, False)]
        budget = _BUDGET
        periodic_clear = self._under_a_periodic_test(node.id)
        while todo and budget:
            budget -= 1
            node_id, start, current_residue, later = todo.pop()
            current = self.graph.nodes[node_id]
            alive = True
            for position, event in enumerate(current.events[start:], start):
                if event.kind == "B" and (node_id, position) in owned and not (later and periodic_clear):
                    alive = False
                    break
                if event.kind == "SC" and event.target == optimizer:
                    alive = False
                    break
                if later and event.kind in ("Z", "R") and self.relation(event, optimizer) != NO:
                    alive = False
                    break
                if event.kind == "S" and event.target == optimizer:
                    return True
            if not alive:
                continue
            for succ, label, succ_residue, _ in self._successors(node_id, current_residue):
                succ_later = later or label == BACK
                if (succ, succ_residue, succ_later) not in seen:
                    seen.add((succ, succ_residue, succ_later))
                    todo.append((succ, 0, succ_residue, succ_later))
        return False

    def _under_a_periodic_test(self, node_id: int) -> bool:
        """Whether the nearest test above a node (back along single predecessors) is a
        periodic guard (`if i % k == 0:`)."""
        if self._predecessors is None:
            self._predecessors = {}
            for graph_node in self.graph.nodes:
                for succ, _ in graph_node.succ:
                    self._predecessors.setdefault(succ, []).append(graph_node.id)
        seen = set()
        while node_id not in seen:
            seen.add(node_id)
            before = self._predecessors.get(node_id, [])
            if len(before) != 1:
                return False
            node_id = before[0]
            test = self.graph.nodes[node_id].test
            if test is not None:
                return node_id in self.guards and bool(atoms(test, self.code))
        return False

    def _transfer(
        self, node: ENode, state, optimizer: str, owned: set, record, residue=None
    ):
        must, deferred, fresh, applied = state
        empty = frozenset()
        for index, event in enumerate(node.events):
            kind = event.kind
            if kind == "B" and (node.id, index) in owned:
                must = (must or frozenset()) | {event.call}
                fresh = fresh | {event.call}
            elif kind in ("S", "SC") and event.target == optimizer:
                if record == "b" and kind == "S":
                    for backward, first_step in applied:
                        self.violations.append(
                            Violation(
                                "b",
                                backward,
                                optimizer,
                                backward,
                                event.call,
                                first_step,
                            )
                        )
                if kind == "SC" or event.clears:
                    applied = empty
                else:
                    applied = applied | frozenset((b, event.call) for b in fresh)
                must, deferred, fresh = empty, empty, empty
            elif kind == "R":
                # The gradients the backwards so far wrote are gone, but on purpose: the
                # step applies the replacement. Nothing to report, nothing left to apply twice.
                if self.relation(event, optimizer) != NO:
                    must, deferred, fresh, applied = empty, empty, empty, empty
            elif kind in ("Z", "U"):
                relation = self.relation(event, optimizer)
                if relation == NO:
                    continue
                if record == "a" and relation == YES and kind == "Z" and must:
                    starved = None
                    # Sorting needs positions, which cost a pass over the module: skip it for one backward.
                    ordered = must if len(must) < 2 else sorted(must, key=lambda call: (self.line(call), self.code(call)))
                    for backward in ordered:
                        if backward not in deferred:
                            if starved is None:
                                starved = self._step_follows(
                                    node, index, residue, optimizer, owned
                                )
                            if not starved:
                                continue
                        self.violations.append(
                            Violation("a", event.call, optimizer, backward, None)
                        )
                must, deferred, fresh, applied = empty, empty, empty, empty
        return (must, deferred, fresh, applied)


def _join(old, new, entering_loop: bool):
    must, deferred, fresh, applied = new
    if entering_loop:
        # The first iteration does not decide "on every path": the loop's steady state,
        # reached over its back edge, does (`Z; S; B` clears the previous iteration's B).
        must, deferred = None, frozenset()
    if old is None:
        return (must, deferred, fresh, applied)
    old_must, old_deferred, old_fresh, old_applied = old
    if old_must is None:
        joined, joined_deferred = must, deferred
    elif must is None:
        joined, joined_deferred = old_must, old_deferred
    else:
        joined, joined_deferred = _meet(old_must, must), _meet(old_deferred, deferred)
    # The old parts themselves when nothing is added: the caller's `!=` then
    # compares them by identity (most joins at a visited point change nothing).
    return (
        joined,
        joined_deferred,
        old_fresh if fresh <= old_fresh else old_fresh | fresh,
        old_applied if applied <= old_applied else old_applied | applied,
    )


def _steps(node: ENode, optimizer: str) -> bool:
    """Whether the node steps the optimizer (with or without a closure)."""
    return any(e.kind in ("S", "SC") and e.target == optimizer for e in node.events)


def _meet(old: frozenset, new: frozenset) -> frozenset:
    return old if old <= new else old & new


def analyse_order(program: Program, code, line=lambda node: 0, entry_points=None) -> list[Violation]:
    """``line(node)`` orders events deterministically (memory addresses differ run to run).

    ``entry_points``: the scope nodes to analyse (None: all; see relevance.py).
    """
    violations: list[Violation] = []
    cache: dict = {}
    hooks = _per_batch_hooks(program)
    for scope in program.scopes.values():
        if entry_points is not None and scope.node not in entry_points:
            continue
        if scope.node in hooks:
            scope = _as_loop_body(scope)
        graph = EventGraph(program, cache)
        graph.root = scope
        entry, _ = graph.expand(scope, {}, 0, None, False)
        if not any(e.kind in ("S", "SC") for n in graph.nodes for e in n.events):
            continue
        analysis = OrderAnalysis(graph, entry, code)
        analysis.line = line
        violations.extend(analysis.run())
    return violations


def _per_batch_hooks(program: Program) -> set[cst.CSTNode]:
    """Functions a framework runs once per batch, whose body is a loop body: the
    `training_step` of a LightningModule (under manual optimization it backwards,
    steps and must zero_grad itself) and the process function of an ignite Engine."""
    hooks = set()
    for cls in program.classes.values():
        found = program.method(cls, "training_step")
        if found is not None and any(
            (program.imports.qualify_path(base) or base).endswith("LightningModule")
            for ancestor in program.lineage(cls)
            for base in ancestor.bases
        ):
            hooks.add(found[1])
    if not any(full.startswith("ignite") for full in program.imports.aliases.values()):
        return hooks  # (no walk over a file that cannot build an Engine)
    for node in descendants(program.module):
        if type(node) is cst.Call and node.args and (program.imports.qualify(node.func) or "") in _ENGINES:
            process = node.args[0].value
            if type(process) is cst.Name and process.value in program.functions:
                hooks.add(program.functions[process.value])
    return hooks


# Engines that call the function they are given once per batch.
_ENGINES = ("ignite.engine.Engine", "ignite.engine.engine.Engine")


def _as_loop_body(scope: Scope) -> Scope:
    """The scope of a per-batch hook as the body of a loop over batches, its batch index
    (`training_step(self, batch, batch_idx)`) the loop's counter."""
    params = [param for param in scope.params if param not in ("self", "cls")]
    counter = params[1] if len(params) > 1 else "_"
    batches = cst.Call(func=cst.Name("range"), args=[cst.Arg(cst.Name("batches"))])
    loop = cst.For(target=cst.Name(counter), iter=batches, body=scope.node.body)
    wrapped = Scope(scope.key, loop, [loop], scope.cls, scope.params, scope.locals | {counter})
    wrapped.assigned = scope.assigned | {counter}
    wrapped.no_grad = scope.no_grad
    return wrapped


def _has_pre_header(cfg: CFG, header) -> bool:
    return any(cfg.nodes[pred].kind == ITER for pred, _ in header.pred)
