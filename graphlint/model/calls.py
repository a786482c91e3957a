"""What a call does to graph provenance: events, cuts, forwards, and inlined helpers."""

from __future__ import annotations

from graphlint.model import syntax as cst

from graphlint.model import events as ev
from graphlint.model.names import (
    STRING_LITERALS,
    CONDITION_FIRST_FUNCTIONS,
    MASK_FIRST_METHODS,
    CONTAINER_ADDS,
    CUTTING_ATTRIBUTES,
    CUTTING_BUILTINS,
    CUTTING_METHODS,
    INPLACE_CUTS,
    LIST_ADDS,
    PARAMETER_METHODS,
    SAMPLING_METHODS,
    PASSING_BUILTINS,
    TENSOR_METHODS,
    TORCH_CUTTING,
    is_false,
    is_integer_literal,
    dotted,
    is_module_housekeeping,
    is_module_class,
    is_optimizer_class,
    is_scheduler_class,
    is_torch_factory,
    is_true,
    keyword,
    last_part,
    related_paths,
)
from graphlint.model.program import (
    ACCELERATOR,
    CONTAINER,
    ENGINE_SETUPS,
    MODULE,
    OPTIMIZER,
    RECORD_FACTORIES,
    SCALER,
    SCHEDULER,
    all_params,
)
from graphlint.model.provenance import (
    CERTAIN,
    ELEMENT,
    PARAMS,
    EMPTY,
    Inlined,
    LIKELY,
    MAX_INLINE_DEPTH,
    NEW,
    WEAK,
    State,
    item_path,
)
from graphlint.model.statements import calls_something, read_names

# Methods returning (part of) the receiver's content.
_CONTAINER_READS = frozenset({"get", "pop", "values", "items", "copy", "popleft", "clone", "contiguous"})
_NON_TORCH_CUTTING_ROOTS = ("math.", "numpy.", "np.", "random.", "time.", "os.", "json.", "logging.", "wandb.")
# Packages whose calls hand back (an iterator or a container of) what they are given.
_PASSING_ROOTS = ("collections.", "itertools.", "tqdm.", "rich.progress.", "copy.copy")


def _pops_one_element(method: str, call: cst.Call) -> bool:
    """`x.popleft()`, `x.pop()` or `x.pop(<integer>)`: an element off a list or deque."""
    if method == "popleft":
        return True
    if method != "pop" or len(call.args) > 1:
        return False
    if not call.args:
        return True
    return call.args[0].keyword is None and is_integer_literal(call.args[0].value)


class _CallEvaluator:
    def __init__(self, ctx, call: cst.Call) -> None:
        self.ctx = ctx
        self.interp = ctx.interp
        self.program = ctx.program
        self.frame = ctx.frame
        self.call = call

    # ----- helpers -----
    def args_value(self, skip: int = 0) -> frozenset:
        value = EMPTY
        for index, arg in enumerate(self.call.args):
            if index < skip:
                continue
            value = value | self.ctx.eval(arg.value)
        return value

    def args_value_but_a_mask(self) -> frozenset:
        """The arguments' value, leaving out a boolean mask or condition in first place
        (`x.masked_fill(mask, 0)`, `torch.where(cond, a, b)`): it is evaluated, but a
        bool tensor carries no graph into the result (whatever it was computed from)."""
        args = self.call.args
        if args and args[0].keyword is None and not args[0].star:
            self.ctx.eval(args[0].value)
            return self.args_value(skip=1)
        return self.args_value()

    def backwards_itself(self, owner: cst.BaseExpression, gradient: cst.BaseExpression) -> bool:
        """Whether ``owner.backward(gradient)`` backwards ``owner``, a tensor (``gradient``
        its seed), rather than handing ``gradient`` to a wrapper that backwards it.

        A wrapper that an unseen call returned (``model, acc = init_fn(args)``) may
        carry that call's graphs; the loss handed to it then carries all of them and
        more (it was built from the model the same call returned). A tensor's seed is
        never built on the tensor it seeds.
        """
        owner_graph = self.ctx.eval_quiet(owner) - {NEW}
        return bool(owner_graph) and not owner_graph < (self.ctx.eval_quiet(gradient) - {NEW})

    def qualify(self, expr: cst.BaseExpression) -> str | None:
        name = dotted(expr)
        if name is None:
            return None
        root = name.split(".")[0]
        if root in self.frame.aliases:
            return None
        if root in self.frame.scope.locals and not self._still_the_import(root):
            return None
        return self.program.imports.qualify(expr)

    def _still_the_import(self, name: str) -> bool:
        """An imported name the scope re-binds later, read before any binding on every
        path here: ``import model`` then ``model = model.RNNModel(...)`` calls the import."""
        # (The local's path, as Interpreter.path spells a local that is no alias.)
        return self.program.imports.is_imported(name) and not self.ctx.state.has(self.frame.prefix + name)

    def kinds(self, expr: cst.BaseExpression) -> set[str]:
        return self.interp.kinds(self.frame, expr)

    def forward(self, strength: int, callee: cst.BaseExpression | None) -> frozenset:
        """A forward call: its result is a new graph node."""
        if self.ctx.no_grad:
            return EMPTY
        self.ctx.produced = max(self.ctx.produced, strength)
        if callee is not None:
            path = self.interp.path(self.frame, callee)
            if path:
                self.ctx.callees.add(path)
        if strength >= LIKELY:
            self.interp.forwards_run += 1
            if self.interp.recording:
                self.check_carried_state()
                for loop in self.ctx.loop_keys:
                    self.interp.facts.active_loops.add(loop)
        return frozenset({NEW})

    def check_carried_state(self) -> None:
        """Record arguments that carry this very statement's previous graph (recurrent state)."""
        ctx = self.ctx
        if ctx.site is None or ctx.no_grad or self.interp.suppress_carried:
            return False
        found = False
        state = ctx.state
        for arg in self.call.args:
            value = ctx.eval_quiet(arg.value)
            for origin in value:
                if origin[0] != ctx.site.id or origin in self.frame.passed_in:
                    continue
                freed, traversed = state.freed.get(origin), state.traversed.get(origin)
                if freed is None and traversed is None:
                    continue
                found = True
                self.interp.facts.carried.append(
                    ev.CarriedState(
                        self.call, origin, freed, traversed,
                        self.interp.path(self.frame, arg.value), ctx.loop, arg.value,
                        tuple(ctx.loop_keys), frozenset(value),
                    )
                )
        return found

    # ----- entry -----
    def evaluate(self) -> frozenset:
        call, ctx = self.call, self.ctx
        event = ev.recognise(call, self.kinds, self.qualify, self.backwards_itself)
        if isinstance(event, ev.BackwardCall):
            # `self.optimizer.backward(loss)` of a wrapper class of this file: its own
            # `loss.backward()` is the backward (reported there, where PyTorch raises).
            wrapped = self.file_method(call.func)
            if wrapped is not None:
                result = self.inline(wrapped[1], wrapped[0], call.func.value)
                if result is not None:
                    return result
            return self.backward(event)
        if isinstance(event, ev.StepCall):
            return self.step(event)
        if isinstance(event, ev.ZeroGradCall):
            self.ctx.eval(event.owner)
            return EMPTY
        func = call.func
        if self._class_of_a_value(func):
            # `type(state)(detach(s) for s in state)`: the container rebuilt, a
            # constructor of what it holds, no forward.
            return self.args_value()
        if type(func) is cst.Attribute:
            return self.method_call(func)
        if type(func) is cst.Name:
            return self.name_call(func)
        # self.layers[i](x), make_model()(x), ...
        callee_value = ctx.eval(func)
        return callee_value | self.args_value() | self.forward(LIKELY, None)

    def _class_of_a_value(self, func: cst.BaseExpression) -> bool:
        """Whether ``func`` is `type(x)` (the builtin) or `x.__class__`."""
        if type(func) is cst.Attribute:
            return func.attr.value == "__class__"
        if type(func) is not cst.Call or type(func.func) is not cst.Name or func.func.value != "type":
            return False
        return len(func.args) == 1 and not self._bound_here("type")

    def _bound_here(self, name: str) -> bool:
        """Whether ``name`` is a variable here (a local, an alias of the caller's object,
        or a module-level binding), not a builtin."""
        frame = self.frame
        return (
            name in frame.aliases or name in frame.scope.locals
            or name in self.program.scopes[self.program.module].locals
        )

    # ----- events -----
    def backward(self, event: ev.BackwardCall) -> frozenset:
        ctx, interp = self.ctx, self.interp
        value = ctx.eval(event.target) - {NEW}
        stop = EMPTY
        for arg in self.call.args:
            if arg.value is event.inputs:
                stop = ctx.eval(arg.value)
            elif arg.value is not event.target:
                ctx.eval(arg.value)
        # `autograd.grad(loss, fast_weights)` walks down to the inputs, not through them.
        graph, value = value, value - stop
        # Read the state only now: a helper inlined by the target (`model(x).sum()`)
        # replaced it with the state after its forward.
        state = ctx.state
        if interp.recording:
            freed_hits = {o: state.freed[o] for o in value if o in state.freed}
            stepped_hits = {o: state.stepped[o] for o in value if o in state.stepped}
            interp.facts.backwards.append(
                ev.Backward(
                    self.call, event.spelling, value, event.retain, event.writes_grad,
                    freed_hits, stepped_hits, ctx.loop, self._roots(event.target, value, event.retain),
                    frozenset(ctx.read_paths(event.target)), tuple(ctx.loop_keys),
                )
            )
            for loop in ctx.loop_keys:
                interp.facts.active_loops.add(loop)
        interp.facts.backwarded_sites.update(o[0] for o in value)
        # One element of a container stands for all of them here; backwarding it
        # frees only that element's graph, which this analysis cannot single out
        # (but what every known item holds, see _shared_by_every_item).
        # Nor can it single out what `loss.backward(inputs=head_params)` runs: only
        # the nodes on the way to those inputs (an online probe leaves the backbone's).
        frees = not event.retain and not (event.writes_grad and event.inputs is not None)
        freed = value if ELEMENT not in value else self._shared_by_every_item(event.target)
        # `autograd.grad(..., create_graph=True)` extends the graph on purpose (MAML's
        # fast weights, unrolled inner solvers): carrying its result is not retention.
        # A literal `create_graph=False` (the default, spelled out) builds nothing.
        create = keyword(self.call, "create_graph")
        differentiable = not event.writes_grad and create is not None and not is_false(create)
        if differentiable and interp.recording and ctx.site is not None:
            interp.facts.differentiable_grad_sites.add(ctx.site.id)
        sites = interp.sites
        for origin in value:
            if not differentiable:
                state.traversed.setdefault(origin, self.call)
            if frees and origin in freed and origin[0] >= 0 and not sites[origin[0]].leaf:
                state.freed.setdefault(origin, self.call)
        return graph if differentiable else EMPTY

    def _shared_by_every_item(self, target: cst.BaseExpression) -> frozenset:
        """For `for loss in losses: loss.backward()` over a list display whose items
        are known (`losses = [mse(out, y), out.abs().mean()]`), the nodes every item's
        graph holds: whichever item is backwarded first frees them (the forward both
        losses share). Nothing for any other element of a container."""
        container = self._iterated_container(target)
        if container is None:
            return EMPTY
        env, below = self.ctx.state.env, container + "["
        items = [value for key, value in env.items() if key.startswith(below) and key.count("[") == container.count("[") + 1]
        if len(items) < 2 or not env.get(container, EMPTY) <= frozenset().union(*items):
            return EMPTY
        # The display's own statement is one site for all its items, however separate
        # their forwards (`{"small": small(x).sum(), "large": large(x).sum()}`).
        sites = self.interp.sites
        return frozenset(
            origin for origin in frozenset.intersection(*items)
            if origin[0] < 0 or container not in sites[origin[0]].targets
        )

    def _iterated_container(self, target: cst.BaseExpression) -> str | None:
        """The container whose elements the loop hands the backward one by one: ``loss`` in
        ``for loss in losses``, or ``losses[k]`` in ``for k in losses`` (a dict's keys)."""
        iterating = self.frame.iterating
        if type(target) is cst.Name:
            if target.value in iterating:
                return iterating[target.value]
            # `lc = l * world_size; lc.backward()` in `for l in losses` (nequip): a value
            # computed from one element alone (and constants) is that element's graph.
            bound = self.program.first_assignment(self.frame.scope, target.value)
            read = read_names(bound) & iterating.keys() if bound is not None and not calls_something(bound) else ()
            return iterating[next(iter(read))] if len(read) == 1 else None
        if type(target) is not cst.Subscript or len(target.slice) != 1 or type(target.slice[0].slice) is not cst.Index:
            return None
        key = target.slice[0].slice.value
        if type(key) is not cst.Name or key.value not in iterating:
            return None
        container = self.interp.path(self.frame, target.value)
        return container if container is not None and iterating[key.value] == container else None

    def _roots(self, target: cst.BaseExpression, value: frozenset, retain: bool) -> frozenset:
        if not retain:
            # (A helper's `loss.backward()` frees the caller's variable it was given too.)
            read = self.ctx.read_paths(target, arguments=True)
            self.interp.facts.freeing_backward_paths.update(read | self.frame.callers_paths(read))
        paths = self.ctx.read_paths(target)
        sites = self.interp.sites
        roots = {o[0] for o in value if o[0] >= 0 and sites[o[0]].targets & paths}
        if type(target) is cst.Call or not paths:
            roots |= {self.ctx.site.id} if self.ctx.site is not None else set()
        return frozenset(roots)

    def step(self, event: ev.StepCall) -> frozenset:
        if self.interp.recording:
            loops = self.ctx.loop_keys
            self.interp.facts.step_loops.update(loops)
            if loops:
                self.interp.facts.stepping_loops.add(loops[-1])
                if not self.ctx.runs_every_iteration():  # (a helper's step: unknown, so maybe)
                    self.interp.facts.conditional_step_loops.add(loops[-1])
            around = self.ctx.loop_around_the_optimizers(event.optimizer)
            if around is not None:
                # `for optim in self.optimizers.values(): optim.step()`: the loop over the
                # optimizers is part of a step; the loop around it is the one that steps.
                self.interp.facts.stepping_loops.add(around[0])
                if not around[1]:
                    self.interp.facts.conditional_step_loops.add(around[0])
        if event.closure is not None:
            self._call_closure(event.closure)
        state = self.ctx.state  # after the closure: inlining it replaced the state
        local = dotted(event.optimizer)
        resolved = self._optimized_models(self.frame, local) if local else set()
        if resolved:
            for origin in _built_by(self.interp.sites, state, resolved):
                state.stepped.setdefault(origin, self.call)
        return EMPTY

    def _call_closure(self, closure: cst.BaseExpression) -> None:
        if type(closure) is cst.Name and closure.value in self.frame.local_defs:
            self.inline(self.frame.local_defs[closure.value], None, None)
        elif type(closure) is cst.Name and closure.value in self.program.functions:
            self.inline(self.program.functions[closure.value], None, None)

    def _optimized_models(self, frame, local: str) -> set[str]:
        """The paths of the modules whose parameters the optimizer ``local`` of ``frame``
        updates; for a helper's parameter (`def apply_update(optimizer)`), those of the
        caller's optimizer it is bound to."""
        models = self.program.optimizer_models(frame.scope, local)
        if models:
            resolved = {self._resolve_dotted(frame, m) for m in models}
            resolved.discard(None)
            return resolved
        root, _, rest = local.partition(".")
        owner = frame.aliases.get(root)
        if not owner:
            return set()
        frames = self.interp.frames
        position = next((index for index, known in enumerate(frames) if known is frame), 0)
        callers = frames[:position]
        for outer in reversed(callers):
            if owner.startswith(outer.prefix):
                caller_local = owner[len(outer.prefix):] + (f".{rest}" if rest else "")
                return self._optimized_models(outer, caller_local)
        return set()

    def _resolve_dotted(self, frame, local: str) -> str | None:
        root, _, rest = local.partition(".")
        base = self.interp.path(frame, cst.Name(root))
        if base is None:
            return None
        return f"{base}.{rest}" if rest else base

    # ----- calls by shape -----
    def name_call(self, func: cst.Name) -> frozenset:
        name = func.value
        frame = self.frame
        if name in frame.local_defs:
            return self.inline_or_unknown(frame.local_defs[name], None, None)
        # At module level a `def`/`class` is itself the binding of its name.
        module_level = frame.scope.key == "<module>"
        is_local = name in frame.aliases or (name in frame.scope.locals and not module_level)
        if not is_local and name in self.program.functions:
            return self.inline_or_unknown(self.program.functions[name], None, None)
        if not is_local and name in self.program.classes:
            return self.construct(self.program.classes[name])
        # A module-level variable (`net = nn.Linear(...)`) called inside a function is a value too.
        is_local = self._bound_here(name)
        if not is_local:
            if name in CUTTING_BUILTINS:
                self.args_value()
                return EMPTY
            if name == "map" and self.call.args and _cutting_function(self.call.args[0].value):
                self.args_value()  # `map(lambda t: t.detach(), hidden)`
                return EMPTY
            if name in PASSING_BUILTINS:
                return self.args_value()
            qualified = self.qualify(func)
            if qualified:
                return self.qualified_call(qualified)
            return self.args_value()
        kinds = self.kinds(func)
        aliased = self.program.class_aliased(kinds)
        if aliased is not None:
            return self.construct(aliased)
        if self.program.is_frozen(kinds):
            return self.frozen_call()
        cls = self.program.class_of_instance(kinds)
        if cls is None and name == "self" and frame.scope.cls is not None:
            cls = frame.scope.cls  # `out = self(x)`: the class's own forward or __call__
        if cls is not None:
            return self.instance_call(cls, func)
        if kinds & {OPTIMIZER, SCHEDULER, SCALER, ACCELERATOR}:
            return self.args_value()
        if MODULE in kinds:
            return self.args_value() | self.forward(CERTAIN, func)
        if _builds_a_record_class(self.program.first_assignment(self.program.scopes[self.program.module], name)):
            return self.args_value()  # `State = namedtuple(...)` at module level: `State(h, c)`
        if type(self.program.first_assignment(frame.scope, name)) is cst.Lambda:
            # `add_skip = lambda x: cat((x, hiddens.pop()))`: its closure's graphs come back too.
            return self.ctx.eval(func) | self.args_value() | self.forward(LIKELY, func)
        if not self.call.args:
            # `sampler = sampler()`, `factory()`: an unknown callable given nothing, a
            # class or a factory far more often than a model (a forward takes input).
            return self.forward(WEAK, func)
        given = self.args_value()
        value = self._object_inputs(given)
        if PARAMS in given and not value:
            # `optimizer = optimizer_class(model.parameters(), lr=lr)`: a callable handed
            # the parameters and nothing graph-bearing builds an object over them (an
            # optimizer, an EMA), not a forward: a module is not called on its weights.
            return EMPTY
        return value | self.forward(LIKELY, func)

    def frozen_call(self) -> frozenset:
        """A call of a module whose parameters are all frozen: no graph of its own;
        gradients still flow through it to its inputs (a frozen VAE on a leaf)."""
        return self.args_value() - {PARAMS}

    def qualified_call(self, qualified: str) -> frozenset:
        """A call of something imported: torch, numpy, math, another package."""
        call = self.call
        if last_part(qualified) == "tree_map" and call.args and _cutting_function(call.args[0].value):
            # `pytree.tree_map(lambda t: t.detach(), state)`: every leaf of a nested state, cut.
            self.args_value()
            return EMPTY
        if qualified.startswith("torch."):
            name = last_part(qualified)
            if name == "as_tensor":
                # Given a tensor of its dtype and device, `as_tensor` returns that tensor
                # itself, graph and all (`torch.as_tensor(loss)`); kept only for a value
                # surely carrying one: it converts observations and lists far more often.
                value = self.args_value()
                return value if self.interp.strength(value) >= CERTAIN else EMPTY
            if is_torch_factory(qualified):
                self.args_value()
                if is_true(keyword(call, "requires_grad")):
                    return self.leaf()
                return EMPTY
            if name in TORCH_CUTTING:
                self.args_value()
                return EMPTY
            if name == "Parameter" or qualified.endswith("nn.parameter.Parameter"):
                self.args_value()
                return self.leaf()
            if qualified.startswith("torch.nn.utils.") or qualified.startswith("torch.optim."):
                self.args_value()
                return EMPTY
            if is_module_class(qualified) or is_optimizer_class(qualified) or is_scheduler_class(qualified):
                self.args_value()
                return EMPTY
            if qualified.startswith("torch.distributions."):
                # Categorical(logits=logits): log_prob(), entropy() and rsample() of the
                # distribution carry the graph of its parameters.
                return self.args_value()
            if name[:1].isupper():
                self.args_value()
                return EMPTY
            if name in CONDITION_FIRST_FUNCTIONS:
                return self.args_value_but_a_mask()
            return self.args_value()
        if qualified == "copy.deepcopy":
            # A deep copy of a tensor with a graph raises; what it returns holds none
            # (a model's copy is known by its kind, not its value).
            self.args_value()
            return EMPTY
        if (
            qualified.startswith(_NON_TORCH_CUTTING_ROOTS)
            or qualified.split(".")[0] in ("math", "numpy", "random", "time", "os", "json", "logging")
            or qualified in ENGINE_SETUPS  # wraps model, optimizer and data, whatever parameters it is given
        ):
            self.args_value()
            return EMPTY
        if qualified.startswith(_PASSING_ROOTS):
            # `defaultdict(list)`, `deque(losses, maxlen=k)`: a container of what it is
            # given; `pbar = tqdm(loader)`, `islice(loader, n)`: an iterator over it;
            # `copy.copy(stats)`: a container holding the same values.
            return self.args_value()
        if last_part(qualified) == "Tensor" or last_part(qualified)[:1].isupper():
            return self.maybe_leaf_constructor()
        if self.rebinds_its_only_argument() or self.rebinds_its_detached_argument():
            # `hidden = repackage_hidden(hidden)` with the helper in another file: a
            # transform of the state between batches (detach, reset, move to a
            # device) that the analysis cannot see. Precision first: its result
            # carries no graph the analysis could blame.
            self.args_value()
            return EMPTY
        # A leaf handed to a function of another package (`thop.profile(m, inputs=(x,))`)
        # may come back as anything: no sure graph of it, only a weak forward.
        sites = self.interp.sites
        passed = frozenset(o for o in self.args_value() if not (o[0] >= 0 and sites[o[0]].leaf))
        return passed | self.forward(WEAK, None)

    def _assigned_to(self) -> str | None:
        """The path of ``x`` when the call is a whole statement ``x = f(...)``."""
        stmt = self.ctx.stmt
        if type(stmt) is not cst.Assign or stmt.value is not self.call:
            return None
        return self.ctx.construct_target

    def rebinds_its_only_argument(self) -> bool:
        """The call is a whole statement ``x = f(x)``: one positional argument, assigned back to it."""
        args = self.call.args
        if len(args) != 1 or args[0].keyword is not None or args[0].star:
            return False
        target = self._assigned_to()
        return target is not None and self.interp.path(self.frame, args[0].value) == target

    def rebinds_its_detached_argument(self) -> bool:
        """The call is a whole statement ``x = f(a, x.detach(), b)``: the state, cut off its
        history by the caller, handed to a function of another module that returns its
        new value (norse's `weights = correlation_based_update(ts, weights.detach(), ...)`).
        The caller cut the state on purpose; what the update returns is as unknown as
        ``repackage_hidden(hidden)``'s."""
        target = self._assigned_to()
        if target is None:
            return False
        for arg in self.call.args:
            value = arg.value
            if (
                arg.keyword is None and not arg.star and type(value) is cst.Call and not value.args
                and type(value.func) is cst.Attribute and value.func.attr.value == "detach"
                and self.interp.path(self.frame, value.func.value) == target
            ):
                return True
        return False

    def leaf(self) -> frozenset:
        """A tensor that requires grad: graph-bearing from here on, never freed itself."""
        if self.ctx.no_grad:
            return EMPTY
        self.ctx.produced = max(self.ctx.produced, CERTAIN)
        self.ctx.leaf_created = True
        return frozenset({NEW})

    def object_args(self) -> frozenset:
        """Arguments of a call that builds an object: parameters and leaves build no graph."""
        return self._object_inputs(self.args_value())

    def _object_inputs(self, given: frozenset) -> frozenset:
        sites = self.interp.sites
        return frozenset(o for o in given if o != PARAMS and not (o[0] >= 0 and sites[o[0]].leaf))

    def maybe_leaf_constructor(self) -> frozenset:
        """``Tensor(data, autograd=True)`` (a custom engine) or ``requires_grad=True``: a new leaf."""
        value = self.object_args()
        if self.requests_grad():
            return self.leaf()
        return value

    def requests_grad(self) -> bool:
        """``autograd=True`` or ``requires_grad=True`` among the call's keywords."""
        return is_true(keyword(self.call, "autograd")) or is_true(keyword(self.call, "requires_grad"))

    def method_call(self, func: cst.Attribute) -> frozenset:
        ctx = self.ctx
        method = func.attr.value
        owner = func.value
        qualified = self.qualify(func)
        if qualified:
            return self.qualified_call(qualified)
        if method in INPLACE_CUTS or method in CUTTING_METHODS:
            # `memory.detach()` of a module of this file that defines `detach` runs that method.
            found = self.file_method(func)
            if found is not None:
                return self.inline_or_unknown(found[1], found[0], owner)
        if method in INPLACE_CUTS:
            self.inplace_cut(owner)
            if method == "requires_grad_" and not (self.call.args and is_false(self.call.args[0].value)):
                if type(self.ctx.stmt) is cst.Expr and self.ctx.stmt.value is self.call:
                    self.ctx.becomes_leaf(owner)  # the statement `x.requires_grad_()`
                return self.leaf()  # `x = images.clone().detach().requires_grad_(True)`
            return EMPTY
        if method in CUTTING_METHODS or type(owner) in STRING_LITERALS:
            # (`"loss {:.4f}".format(loss)`, `" ".join(parts)`: a string.)
            ctx.eval(owner)
            self.args_value()
            return EMPTY
        kinds = self.kinds(owner)
        if MODULE in kinds and self.program.is_frozen(kinds):
            ctx.eval(owner)
            return self.frozen_call()  # `vae.encode(x)`, `operator.forward(x)`
        cls = self.program.class_of_instance(kinds) if kinds else None
        if cls is None and type(owner) is cst.Name and owner.value == "self" and self.frame.scope.cls is not None:
            cls = self.frame.scope.cls
        if cls is not None:
            found = self.program.method(cls, method)
            if found is not None and not _abstract(found[1]):
                return self.inline_or_unknown(found[1], found[0], owner)
        static = self._static_method(owner, method)
        if static is not None:
            return self.inline_or_unknown(static, None, None)  # `Utils.clone(v)`: a plain function
        if method in SAMPLING_METHODS and MODULE not in kinds:
            ctx.eval(owner)
            self.args_value()
            return EMPTY
        if method in PARAMETER_METHODS:
            self.args_value()
            return EMPTY if self.ctx.no_grad else frozenset({PARAMS})
        if kinds & {OPTIMIZER, SCHEDULER, SCALER, ACCELERATOR} and method not in ("scale",):
            if method == "prepare":
                return self.prepared()
            self.args_value()
            return EMPTY
        attribute_kinds = self.kinds(func)
        if self.program.is_frozen(attribute_kinds):
            ctx.eval(owner)
            return self.frozen_call()  # `self.vae(x)`
        attribute_class = self.program.class_of_instance(attribute_kinds)
        if attribute_class is not None:
            return self.instance_call(attribute_class, func)
        if MODULE in attribute_kinds:
            return self.args_value() | self.forward(CERTAIN, func)
        held = self.program.method_held(cls, method) if cls is not None else None
        if held is not None:
            # An attribute holding one of the class's methods, whatever else it may hold
            # (`self.pre = self._identity` unless a preprocessor object is configured).
            return self.inline_or_unknown(held[1], held[0], owner)
        if MODULE in kinds:
            if is_module_housekeeping(method, self.call):
                self.args_value()
                return EMPTY
            # A method of a module other than its forward (`model.encode(x)`, `ac.act(obs)`)
            # may run one, or may run under no_grad (`act`, `predict`, `generate`).
            strength = CERTAIN if method in ("forward", "__call__") else LIKELY
            return self.args_value() | self.forward(strength, owner)
        if method == "clear" and not self.call.args:
            path = self.interp.path(self.frame, owner)
            if path is not None:
                ctx.state.set(path, EMPTY)
            return EMPTY
        owner_value = ctx.eval(owner)
        if (method in LIST_ADDS and _list_add_arguments(method, self.call)) or (
            method in CONTAINER_ADDS and (CONTAINER in kinds or self.ctx._is_param_group(owner))
        ):
            if method == "setdefault" and self.call.args:
                # `d.setdefault(key, [])` stores its default under the key, not the key.
                ctx.eval(self.call.args[0].value)
                added = self.args_value(skip=1)
            else:
                added = self.args_value()
            self.container_add(owner, added, method)
            return EMPTY
        if method in _CONTAINER_READS:
            value = owner_value | self.args_value()
            # `queue.pop(0)`, `stack.pop()`, `fifo.popleft()`: one element of a list
            # or deque, which the pop removes (a 1F1B pipeline's queue of forwards,
            # each popped and backwarded once). As any element (see ELEMENT), its
            # backward frees no graph the list's other elements could be blamed for.
            # (`outputs.pop("loss")` reads an item of a dict: its graph, as `outputs["loss"]`.)
            return value | {ELEMENT} if value and _pops_one_element(method, self.call) else value
        if owner_value - {NEW} or _cut_receiver(owner):
            # A tensor method: the result is a node of the same graph (none, for a
            # tensor cut off its graph: `model(x).detach().view(n, -1)`).
            if method in MASK_FIRST_METHODS:
                return owner_value | self.args_value_but_a_mask()
            return owner_value | self.args_value()
        if type(owner) is cst.Name and owner.value in ("self", "cls") and not self._inherited_by_a_plain_class():
            return self.args_value() | self.forward(LIKELY, func)
        if method in TENSOR_METHODS and not kinds:
            return owner_value | self.args_value()  # `x.view(n, -1)` of data: no new node
        return owner_value | self.args_value() | self.forward(WEAK, None)

    def _inherited_by_a_plain_class(self) -> bool:
        """A method of `self` that neither this file defines nor the class assigns, in a
        class that is no module: an engine's or trainer's helper from its base class
        (`self.parse_data_for_train(data)`), as unknown as any object's method; so is an
        attribute the class sets to such a method. A module's own may run a forward;
        `self.model(x)` calls an attribute the class assigned."""
        cls = self.frame.scope.cls
        func = self.call.func
        if cls is None or cls.is_module or type(func) is not cst.Attribute:
            return False
        name = func.attr.value
        return name not in self.program.instance_attributes(cls) or self.program.holds_an_unseen_method(cls, name)

    def prepared(self) -> frozenset:
        """``model, optimizer = accelerator.prepare(model, optimizer)``: each object back
        in its place, wrapped (so the model does not take on the optimizer's values)."""
        args = self.call.args
        if args and all(arg.keyword is None and not arg.star for arg in args):
            elements = [self.ctx.eval(arg.value) for arg in args]
            if len(elements) > 1:
                self.ctx.returned_elements = elements
            self.ctx.passed_through = self.call
            return frozenset().union(*elements)
        return self.args_value()

    def file_method(self, func: cst.BaseExpression):
        """(class, method) when ``func`` is ``obj.method`` of an instance of a class of this file."""
        if type(func) is not cst.Attribute:
            return None
        kinds = self.kinds(func.value)
        cls = self.program.class_of_instance(kinds) if kinds else None
        return self.program.method(cls, func.attr.value) if cls is not None else None

    def inplace_cut(self, owner: cst.BaseExpression) -> None:
        if type(owner) is cst.Subscript:
            # `hidden[0].detach_(); hidden[1].detach_()`: the state is one value here, and
            # its elements are cut one by one (cutting one alone leaves a graph unseen).
            owner = owner.value
        path = self.interp.path(self.frame, owner)
        if path is None:
            return
        self.ctx.state.set(path, EMPTY)
        self.ctx._cut(path)
        # `net.memory.detach_()` each iteration bounds what `self.memory = self.memory + m`
        # can accumulate, as `net.memory = net.memory.detach()` would.
        self.ctx.record_reset(path)
        if type(owner) is cst.Name and owner.value in self.frame.iterating:
            container = self.frame.iterating[owner.value]
            self.ctx.state.set(container, EMPTY)
            self.ctx._cut(container)
            self.ctx.record_reset(container)

    def container_add(self, owner: cst.BaseExpression, added: frozenset, method: str) -> None:
        if type(owner) is cst.Call and type(owner.func) is cst.Attribute and owner.func.attr.value == "setdefault":
            owner = owner.func.value  # `history.setdefault(k, []).append(v)` adds to history
        path = self.interp.path(self.frame, owner)
        if path is None and type(owner) is cst.Subscript:
            path = self.interp.path(self.frame, owner.value)
        if method == "update" and self.ctx._is_param_group(owner):
            if self.interp.recording:
                for arg in self.call.args:
                    if arg.keyword is not None and arg.keyword.value == "params":
                        continue  # the group's parameter list, not a hyperparameter
                    value = self.ctx.eval_quiet(arg.value) - {NEW}
                    self.interp.facts.hyperparameters.append(
                        ev.HyperparameterWrite(self.ctx.stmt, self.call, value, self.ctx.loop)
                    )
            return
        if path is None:
            return
        stored = self.ctx.collected([arg.value for arg in self.call.args], added)
        if stored:
            self.ctx.state.add(path, stored)
        operand = self.call.args[0].value if self.call.args else None
        self.ctx._accumulation(owner, (added - {NEW}) or stored, stored, operand)

    # ----- helpers of this module -----
    def inline_or_unknown(self, func: cst.FunctionDef, cls, owner) -> frozenset:
        result = self.inline(func, cls, owner)
        if result is None:
            # Too deep to follow from here. Every function of the file is also analysed
            # from shallower callers (and as an entry point), where the helper is
            # followed; a node made here would share the site (and so the strength) of
            # the helper's statements there. Precision first: nothing is known of it.
            self.args_value()
            return EMPTY
        return result

    def _static_method(self, owner: cst.BaseExpression, method: str) -> cst.FunctionDef | None:
        """The `@staticmethod` ``method`` of the class of this file ``owner`` names, if any."""
        if type(owner) is not cst.Name or not self.program.names_a_class(self.frame.scope, owner.value):
            return None
        found = self.program.method(self.program.classes[owner.value], method)
        if found is None or not any(dotted(d.decorator) == "staticmethod" for d in found[1].decorators):
            return None
        return found[1]

    def instance_call(self, cls, callee: cst.BaseExpression) -> frozenset:
        found = self.program.method(cls, "forward") or self.program.method(cls, "__call__")
        strength = CERTAIN if cls.is_module else LIKELY
        if found is None:
            return self.args_value() | self.forward(strength, callee)
        forwards = self.interp.forwards_run
        result = self.inline(found[1], found[0], callee)
        if result is None:
            if cls.is_module and self.program.holds_no_parameters(cls):
                return self.args_value()  # too deep to follow, and no parameter to build on
            return self.args_value() | self.forward(strength, callee)
        if self.interp.forwards_run == forwards and (
            not result or (_takes_no_input(found[1]) and self.interp.only_leaves(result))
        ):
            # A forward that ran no forward and used no parameter builds no graph: a
            # byte encoder returning `torch.tensor(ids)`; `def forward(self): return
            # self.embeds` (a ParameterDict) hands out its own parameters.
            return result
        if not result and not cls.is_module:
            # A loss-compute object whose `__call__` backwards, steps and returns
            # `loss.item()`: followed to the end, it hands back no graph (the forwards
            # it ran, its arguments' included, stay behind it).
            return result
        return result | self.forward(strength, callee)

    def construct(self, cls) -> frozenset:
        if cls.is_record:
            self.ctx.gathering.add(self.call)
            return self.args_value()  # `LSTMState(h, c)`: the fields, kept together
        target = self.ctx.construct_target
        found = self.program.method(cls, "__init__")
        if found is not None and target is not None:
            # A new object at `target`: the old one's attributes go, __init__ sets its own,
            # and the assignment that follows must keep them (see _StmtContext.assign).
            self.ctx.state.set(target, EMPTY)
            self.inline(found[1], found[0], target)
            self.ctx.constructed = target
        else:
            self.args_value()
        if self.program.method(cls, "backward") is not None:
            # A tensor class of a custom autograd engine defined in this file
            # (`Tensor(data, autograd=True)`): a leaf, or a new node of its inputs' graph
            # (leaves included: `Tensor(a.data @ w.data, creators=[a, w])` is a node).
            if self.requests_grad():
                return self.leaf()
            value = self.args_value() - {PARAMS}
            return value | {NEW} if value else EMPTY
        return EMPTY

    def inline(self, func: cst.FunctionDef, cls, owner) -> frozenset | None:
        """Analyse ``func`` at this call with the caller's state; None when it cannot be inlined."""
        interp, ctx = self.interp, self.ctx
        if self.frame.depth >= MAX_INLINE_DEPTH:
            return None
        if func in interp._stack:
            # Recursion: the recursive call contributes what the other paths return.
            self.args_value()
            return EMPTY
        scope = self.program.scope_of(func)
        aliases: dict[str, str | None] = {}
        params = list(scope.params)
        bound: dict[str, frozenset] = {}
        parts: dict[str, list] = {}  # the parts of a tuple a helper returned, per parameter
        argument_paths: dict[str, frozenset] = {}
        is_method = cls is not None and params and params[0] in ("self", "cls")
        if is_method:
            first = params.pop(0)
            aliases[first] = owner if isinstance(owner, str) else (
                self.interp.path(self.frame, owner) if owner is not None else None
            )
            if aliases[first] is None:
                del aliases[first]
        args = [a for a in self.call.args]
        positional_args = [a.value for a in args if a.keyword is None and not a.star]
        keyword_args = {a.keyword.value: a.value for a in args if a.keyword is not None}
        keyword_args.update(self._spread_keywords(args))
        star_kwarg = func.params.star_kwarg.name.value if type(func.params.star_kwarg) is cst.Param else None
        # `def update(self, **kwargs)`: the keywords no parameter takes, kept per key
        # (`self.compute_loss(**kwargs)` hands them on: see _spread_keywords).
        extra = {key: ctx.eval(expr) for key, expr in keyword_args.items() if key not in params} if star_kwarg else {}
        for index, param in enumerate(params):
            expr = _argument_for(index, param, positional_args, keyword_args)
            if expr is None:
                continue
            built = self._constructed_argument(expr)
            if built is not None:
                # `run_epoch(..., SimpleLossCompute(gen, crit, opt))`, `fit(Model())`: the
                # parameter stands for that new instance, its class and attributes known.
                bound[param] = EMPTY
                aliases[param] = built
                continue
            if type(expr) is cst.Call and ctx.site is not None:
                # `loss_fn(model(x))`: the forward's output is a node of its own, which
                # the helper's parameter holds (a bare NEW mark would be dropped).
                ctx.returned_elements, ctx.returned_plain = None, False
                bound[param] = ctx.element_node(expr, only_new=True)
                if ctx.returned_elements and not ctx.returned_plain:
                    # `update(collect())` of a helper returning a tuple: `obs, values =
                    # batch` in the callee reads each part, as after `batch = collect()`.
                    parts[param] = ctx.returned_elements
            elif (displayed := ctx.tuple_parts(expr)) is not None:
                parts[param] = displayed  # `update((obs, net(obs)))`: the same
                bound[param] = frozenset().union(*displayed)
            else:
                bound[param] = ctx.eval(expr)
            path = self.interp.path(self.frame, expr) if type(expr) in (cst.Name, cst.Attribute) else None
            if path is not None and type(expr) is cst.Attribute and bound[param] and not self._names_an_object(expr, path):
                # `kd_term(out.logits, t)`: an attribute of a value (an output's field),
                # which the state holds no path for; the parameter holds what it reads.
                path = None
            # A parameter the helper re-binds (`out, hidden = model(x, hidden)`) is a
            # local holding the argument's value; the others stand for the caller's object.
            if path is not None and param not in scope.assigned:
                aliases[param] = path
            else:
                argument_paths[param] = self.frame.callers_paths(ctx.read_paths(expr, arguments=True))
        for arg in args:
            if arg.star:
                ctx.eval(arg.value)
        frame = interp._frame(scope, aliases, ctx.loop_keys, self.frame.depth + 1)
        frame.no_grad = ctx.no_grad
        frame.called_every_iteration = bool(ctx.loop_keys) and ctx.runs_every_iteration()
        frame.passed_in = self.frame.passed_in.union(*(v for p, v in bound.items() if p not in aliases))
        frame.local_defs.update(self.frame.local_defs)
        frame.argument_paths = argument_paths
        frame.flags = self._flags(func, params, positional_args, keyword_args)
        state: State = ctx.state
        for param, value in bound.items():
            if param not in aliases:
                state.set(frame.prefix + param, value - {NEW})
                for index, part in enumerate(parts.get(param, ())):
                    state.put(item_path(frame.prefix + param, str(index)), part - {NEW})
        if extra:
            state.set(frame.prefix + star_kwarg, frozenset().union(*extra.values()) - {NEW})
            for key, value in extra.items():
                state.put(item_path(frame.prefix + star_kwarg, key), value - {NEW})
        memo_key = interp.inline_key(func, frame, state)
        known = interp.inlined.get(memo_key)
        if known is not None and not interp.recording:
            return self._inlined(func, known, known.exit_state.copy())
        forwards_before = interp.forwards_run
        # A helper that runs a forward is a forward call of its own; the carried
        # state is reported where it is passed in, not again inside the helper.
        outer_carry = interp.recording and interp.runs_forward.get(func) and self.check_carried_state()
        if interp.recording and frame.depth == 1 and not (frame.no_grad or frame.flags or outer_carry):
            # (Where the state it carries is reported at this call, it reports none inside.)
            interp.analysed_inside.add(func)
        interp._stack.append(func)
        interp.suppress_carried += 1 if outer_carry else 0
        try:
            known_states = interp.remembered_fixpoint(memo_key) if known is not None else None
            if known_states is not None:
                # Recording, at a state an earlier fixpoint already solved this
                # helper from: only the recording pass over its states is left.
                frame.returns, frame.returned_elements = known.returns, known.returned_elements
                frame.returned_plain, frame.returned_paths = known.returned_plain, known.returned_paths
                frame.returned_items, frame.returned_nested = known.returned_items, known.returned_nested
                interp.record(frame, known_states)
                return self._inlined(func, known, known.exit_state.copy())
            states = interp.fixpoint(frame, state)
            if interp.recording:
                interp.record(frame, states)
        finally:
            interp._stack.pop()
            interp.suppress_carried -= 1 if outer_carry else 0
        exit_state = interp.exit_state(frame, states, state)
        exit_state.drop_prefix(frame.prefix, interp.dead_keys())
        outcome = Inlined(
            exit_state, frame.returns, frame.returned_elements, frame.returned_plain, interp.forwards_run - forwards_before,
            frame.returned_paths,
            frame.returned_items,
            frame.returned_nested,
        )
        if not interp.recording:
            interp.remember_inlined(memo_key, outcome, states)
            exit_state = exit_state.copy()
        interp.forwards_run = forwards_before
        return self._inlined(func, outcome, exit_state)

    def _spread_keywords(self, args) -> dict[str, cst.BaseExpression]:
        """``f(**kwargs)`` of a dict whose string keys the state keeps (a helper's
        ``**kwargs``, see inline): each key as the keyword argument ``kwargs['key']``."""
        found = {}
        for arg in args:
            if arg.star != "**" or type(arg.value) is not cst.Name:
                continue
            path = self.interp.path(self.frame, arg.value)
            for key in self.ctx.state.string_items(path) if path is not None else ():
                index = cst.Index(cst.SimpleString(repr(key)))
                found[key] = cst.Subscript(arg.value, [cst.SubscriptElement(index)])
        return found

    def _flags(self, func: cst.FunctionDef, params, positional_args, keyword_args) -> dict[str, bool]:
        """Parameter -> True/False for those this call sets to a literal, or to a flag of
        the caller's with a known value, or leaves at a literal default."""
        defaults = {p.name.value: p.default for p in all_params(func.params) if p.default is not None}
        flags = {}
        for index, param in enumerate(params):
            expr = _argument_for(index, param, positional_args, keyword_args)
            if expr is None:
                expr = defaults.get(param)
            if type(expr) is cst.Name:
                if expr.value in ("True", "False"):
                    flags[param] = expr.value == "True"
                elif expr.value in self.frame.flags:
                    flags[param] = self.frame.flags[expr.value]
        return flags

    def _names_an_object(self, expr: cst.Attribute, path: str) -> bool:
        """Whether ``expr`` (at ``path``) is somewhere the analysis keeps track of: bound
        in the state (or below it) or an object of a known kind (`self.model`)."""
        return self.ctx.state.has(path) or bool(self.interp.kinds(self.frame, expr))

    def _constructed_argument(self, expr: cst.BaseExpression) -> str | None:
        """For an argument that builds an instance of a class of the file (`Model()`),
        the path the new instance lives at, its kind recorded; else None."""
        if type(expr) is not cst.Call or type(expr.func) is not cst.Name:
            return None
        name, frame = expr.func.value, self.frame
        cls = self.program.classes.get(name)
        if cls is None or cls.is_record or name in frame.aliases or name in frame.local_defs:
            return None
        if name in frame.scope.locals and frame.scope.key != "<module>":
            return None
        local = f"<{name} built at {id(expr)}>"
        path = frame.prefix + local
        for kind in self.program.instance_kinds(name):
            self.program.add_kind(frame.scope.key, local, kind)
        saved, self.ctx.construct_target = self.ctx.construct_target, path
        try:
            self.ctx.eval(expr)
        finally:
            self.ctx.construct_target = saved
        return path

    def _inlined(self, func, outcome: Inlined, exit_state: State) -> frozenset:
        """Continue the caller after an inlined helper (solved now or remembered),
        from ``exit_state`` (the outcome's own, or a copy of it)."""
        self.interp.forwards_run += outcome.forwards
        if outcome.forwards:
            self.interp.runs_forward[func] = True
        self.ctx.state = exit_state
        if outcome.returned_elements:
            self.ctx.returned_elements = outcome.returned_elements
            self.ctx.returned_plain = outcome.returned_plain
            self.ctx.returned_paths = outcome.returned_paths
            self.ctx.returned_nested = outcome.returned_nested
        if outcome.returned_items:
            self.ctx.returned_items = outcome.returned_items
        returns = outcome.returns
        if self.interp.only_leaves(returns - {PARAMS}):
            # `w = weight(n, m)`: a helper handing out leaves (a new parameter) makes
            # no node; what the caller stores is a leaf too.
            return self.leaf()
        return returns


def _abstract(func: cst.FunctionDef) -> bool:
    """A method with no body of its own (`pass`, `...`, `raise NotImplementedError`, a
    docstring): what a subclass of another file implements, as unknown as its result."""
    body = func.body.body
    if type(body) is not list:
        body = [body]
    for stmt in body:
        for small in stmt.body if type(stmt) is cst.SimpleStatementLine else [stmt]:
            kind = type(small)
            if kind is cst.Pass:
                continue
            if kind is cst.Expr and type(small.value) in (cst.Ellipsis, *STRING_LITERALS):
                continue
            if kind is cst.Raise and small.exc is not None and last_part(
                dotted(small.exc.func if type(small.exc) is cst.Call else small.exc) or ""
            ) == "NotImplementedError":
                continue
            return False
    return True


def _argument_for(index: int, param: str, positional_args: list, keyword_args: dict) -> cst.BaseExpression | None:
    """The expression a call passes the parameter at ``index`` (None when it passes none)."""
    if index < len(positional_args):
        return positional_args[index]
    return keyword_args.get(param)


def _built_by(sites, state, models: set[str]) -> set:
    """The live nodes whose forward ran one of ``models`` (their parameters are saved there).

    A method's statement runs once per instance it is called on (twin critics:
    one class, two instances, an optimizer each), and its site does not tell the
    runs apart. A node of such a site counts only when a value holding it also
    holds a node that only these models built (the call ``q1 = critic1(s, a)``).
    """
    frames = {_frame_of(model) for model in models}
    sure, unsure = set(), set()
    for origin in set().union(*state.env.values()):
        if origin[0] < 0:
            continue
        # The runs named in this frame (a standalone solve of the method names `self`).
        runs = [run for run in sites[origin[0]].callee_sets if any(_frame_of(path) in frames for path in run)]
        related = [any(related_paths(callee, model) for callee in run for model in models) for run in runs]
        if related and all(related):
            sure.add(origin)
        elif any(related):
            unsure.add(origin)
    if unsure:
        for value in state.env.values():
            if not value.isdisjoint(sure):
                sure |= value & unsure
    return sure


def _builds_a_record_class(value: cst.BaseExpression | None) -> bool:
    """`namedtuple("State", ["h", "c"])` / `typing.NamedTuple("State", [...])`."""
    return type(value) is cst.Call and last_part(dotted(value.func) or "") in RECORD_FACTORIES


def _cutting_function(func: cst.BaseExpression) -> bool:
    """`lambda t: t.detach()` (or `.data`, `.item()`, ...) or `torch.Tensor.detach`: a
    function returning its argument cut off its graph."""
    if type(func) is cst.Attribute:
        owner = dotted(func.value) or ""
        return func.attr.value in CUTTING_METHODS and (owner == "Tensor" or owner.endswith(".Tensor"))
    if type(func) is not cst.Lambda or len(func.params.params) != 1:
        return False
    body, name = func.body, func.params.params[0].name.value
    if type(body) is cst.Call and type(body.func) is cst.Attribute:
        receiver, cut = body.func.value, body.func.attr.value in CUTTING_METHODS
    elif type(body) is cst.Attribute:
        receiver, cut = body.value, body.attr.value in CUTTING_ATTRIBUTES
    else:
        return False
    return cut and type(receiver) is cst.Name and receiver.value == name


def _takes_no_input(func: cst.FunctionDef) -> bool:
    """`def forward(self)`: no parameter but the instance."""
    return len(list(all_params(func.params))) <= 1


def _list_add_arguments(method: str, call: cst.Call) -> bool:
    """Whether the arguments fit a list's (or deque's) method: ``append(x)``,
    ``insert(i, x)``. speechbrain's ``metrics.append(ids, predict, target, lengths)``
    is another object's method, which stores what it chooses (detached scores)."""
    args = call.args
    if any(arg.keyword is not None or arg.star for arg in args):
        return False
    return len(args) == (2 if method == "insert" else 1)


def _frame_of(path: str) -> str:
    """The frame a path is named in: ``@scope:`` (see Interpreter.path), or "" for the module body."""
    return path.partition(":")[0] if path.startswith("@") else ""


def _cut_receiver(receiver: cst.BaseExpression) -> bool:
    """Whether the receiver is a value cut off its graph (`t.detach()`, `t.data`, `t.size(0)`)
    or a chain of calls and attributes on one: a tensor or number, not an unknown object."""
    while True:
        if type(receiver) is cst.Call and type(receiver.func) is cst.Attribute:
            if receiver.func.attr.value in CUTTING_METHODS:
                return True
            receiver = receiver.func.value
        elif type(receiver) is cst.Attribute:
            if receiver.attr.value in CUTTING_ATTRIBUTES:
                return True
            receiver = receiver.value
        else:
            return False
