"""What a module defines: functions, classes, and the kind of object each name holds.

Object kinds (module, optimizer, scheduler, scaler, accelerator, an instance of
a class of this file) are facts about names that do not change along a path, so
they are collected once per scope, flow-insensitively, from constructors and
from how a name is used (``x.param_groups`` only exists on an optimizer).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graphlint.model import syntax as cst

from graphlint.model.statements import assigned_names, assigned_paths, calls_something
from graphlint.model.walk import children, dispatch
from graphlint.model.names import (
    STRING_LITERALS,
    is_false,
    is_literal,
    is_true,
    Imports,
    dotted,
    is_module_class,
    paired_parts,
    is_optimizer_class,
    is_scheduler_class,
    last_part,
    positional,
    PARAMETER_FREE_MODULES,
    SCALER_CLASSES,
    ZERO_GRAD_METHODS,
)

MODULE = "module"
OPTIMIZER = "optimizer"
SCHEDULER = "scheduler"
SCALER = "scaler"
ACCELERATOR = "accelerator"
# Text: a name added to a string literal (`"LABEL: " + label`), which a tensor cannot be.
TEXT = "text"
PARAM_GROUP = "param_group"
INSTANCE = "instance:"  # + class name
CLASS = "class:"  # + class name: the class itself, under another name (`model_class = Net`)
CONTAINER = "container"  # a list, dict, set or deque built in this scope
ITEMS = "items:"  # + class name: a container whose every item is an instance of that class
# A training engine whose step() zeroes the gradients it applied (DeepSpeed's).
CLEARING_ENGINE = "clearing_engine"
# Set-up calls returning such an engine first, then its optimizer, loader and
# scheduler: wrappers of what they are given, no graph (calls.py).
ENGINE_SETUPS = frozenset({"deepspeed.initialize"})
# A name called like a model (`model(x)`, `self.net(x)`) that is not a function,
# class or import: a model, a loss module or a callback, for what an unknown call
# receiving it may do to gradients (GL003).
FORWARD = "forward"
# A module whose parameters are all frozen (`vae.requires_grad_(False)`, or
# `p.requires_grad = False` over its `parameters()`), and one unfrozen again
# anywhere in the scope (progressive unfreezing): only FROZEN without UNFROZEN counts.
FROZEN = "frozen"
UNFROZEN = "unfrozen"
# A torch.nn module without parameters (names.PARAMETER_FREE_MODULES): not a
# MODULE, so a name that also holds a real module (`layer = nn.Linear(...)`
# elsewhere) keeps its forward.
PARAMETER_FREE = "parameter_free"


@dataclass
class ClassInfo:
    name: str
    node: cst.ClassDef
    bases: list[str]
    methods: dict[str, cst.FunctionDef] = field(default_factory=dict)
    is_module: bool = False
    is_optimizer: bool = False
    frozen: bool = False  # its __init__ freezes every parameter of the instance
    # A NamedTuple or dataclass with no __init__ of its own: calling it builds a
    # record of its arguments (a container, no forward, no cut).
    is_record: bool = False


@dataclass
class Scope:
    """A function (or the module body) and the class it is a method of."""

    key: str
    node: cst.CSTNode
    body: list
    cls: ClassInfo | None = None
    params: list[str] = field(default_factory=list)
    locals: set[str] = field(default_factory=set)
    assigned: set[str] = field(default_factory=set)  # names the body binds (parameters it re-binds too)
    no_grad: bool = False


class Program:
    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.imports = Imports(module)
        self.functions: dict[str, cst.FunctionDef] = {}
        self.classes: dict[str, ClassInfo] = {}
        self.scopes: dict[cst.CSTNode, Scope] = {}
        self._kinds: dict[tuple[str, str], set[str]] = {}
        self._optimizer_models: dict[tuple[str, str], set[str]] = {}
        self._first_assignments: dict[str, dict[str, cst.BaseExpression]] = {}
        self._instance_attributes: dict[str, frozenset[str]] = {}
        self._methods_held: dict[str, tuple[dict, set]] = {}
        self._lineages: dict[str, tuple[str, ...]] = {}
        self._backwarded_attributes: dict[str, frozenset[str]] = {}
        self._scopes_by_key: dict[str, Scope] | None = None
        self._backward_summaries: dict[cst.FunctionDef, tuple[bool, bool]] = {}
        self._grad_contexts = None
        # Kind collection (see _collect_kinds): a count of additions, the count at
        # which each key last gained something, and the keys the running collector read.
        self._additions = 0
        self._gained: dict[tuple[str, str], int] = {}
        self._reads: set[tuple[str, str]] | None = None
        self._attributes_of_kind: dict[tuple[str, str], tuple[int, frozenset[str]]] = {}
        # Whether a function of the file calls `zero_grad` on something it reaches
        # through a parameter other than `self` (`trainer.optimizer.zero_grad()`),
        # noted by _KindCollector.visit_Call.
        self.clears_through_a_parameter = False
        self._collect(module)
        self._resolve_class_kinds()
        self._collect_field_annotations()
        # (class name, `self.x`) -> the methods call x.step() / x.zero_grad(): across
        # methods, `self.optimizer` stepped in one and cleared in another is an optimizer.
        self._attribute_calls: dict[tuple[str, str], set[str]] = {}
        self._collect_kinds()
        for (class_name, path), methods in self._attribute_calls.items():
            if methods == {"step", "zero_grad"} and MODULE not in self._kinds.get((class_name, path), ()):
                self.add_kind(class_name, path, OPTIMIZER)

    # ----- structure -----
    def _collect(self, module: cst.Module) -> None:
        top = Scope("<module>", module, list(module.body))
        top.locals = set(module.bound) if module.bound is not None else assigned_names(module.body)
        self.scopes[module] = top
        self._collect_body(module.body, None, "")
        self._collect_function_aliases(module.body)

    def _collect_function_aliases(self, body) -> None:
        """`weight_update = detached_update` at module level, bound nowhere else there: a
        call of `weight_update(...)` runs that function of the file."""
        bindings: dict[str, list] = {}
        for line in body:
            if type(line) is not cst.SimpleStatementLine:
                continue
            for stmt in line.body:
                if type(stmt) is cst.Assign and len(stmt.targets) == 1 and type(stmt.targets[0].target) is cst.Name:
                    bindings.setdefault(stmt.targets[0].target.value, []).append(stmt.value)
                else:  # `x, y = ...`, `x += ...`: bound some other way
                    for name in assigned_names([stmt]):
                        bindings.setdefault(name, []).append(None)
        compound = None
        for name, values in bindings.items():
            value = values[0]
            if (
                len(values) == 1 and name not in self.functions and name not in self.classes
                and type(value) is cst.Name and value.value in self.functions
            ):
                if compound is None:
                    compound = assigned_names([stmt for stmt in body if type(stmt) is not cst.SimpleStatementLine])
                if name not in compound:
                    self.functions[name] = self.functions[value.value]

    def _collect_body(self, body, cls: ClassInfo | None, prefix: str) -> None:
        for stmt in body:
            if type(stmt) is cst.FunctionDef:
                self._add_function(stmt, cls, prefix)
            elif type(stmt) is cst.ClassDef:
                bases = [dotted(arg.value) or "" for arg in stmt.bases]
                info = ClassInfo(stmt.name.value, stmt, bases)
                info.is_record = _declares_a_record(stmt, bases)
                if not prefix:
                    self.classes[info.name] = info
                for inner in stmt.body.body:
                    if type(inner) is cst.FunctionDef:
                        info.methods[inner.name.value] = inner
                self._collect_body(stmt.body.body, info, prefix + info.name + ".")
            elif isinstance(stmt, cst.BaseCompoundStatement):
                # Definitions under `if TYPE_CHECKING:`, try-import blocks, and
                # closures defined inside a module-level loop (LBFGS scripts).
                for block in sub_blocks(stmt):
                    self._collect_body(block, cls, prefix)

    def _add_function(self, func: cst.FunctionDef, cls: ClassInfo | None, prefix: str) -> None:
        key = prefix + func.name.value
        if cls is None and not prefix:
            self.functions[func.name.value] = func
        params = [p.name.value for p in all_params(func.params)]
        scope = Scope(key, func, list(_body_statements(func)), cls, params)
        # The build gathered them (graphlint/model/from_ast.py); a node made elsewhere did not.
        scope.assigned = set(func._bound) if func._bound is not None else assigned_names(scope.body)
        scope.locals = scope.assigned | set(params)
        scope.no_grad = any(_is_no_grad_decorator(d.decorator) for d in func.decorators)
        self.scopes[func] = scope
        # Nested functions (closures, LBFGS closures) are scopes of their own.
        self._collect_nested(scope.body, key + ".")

    def _collect_nested(self, body, prefix: str) -> None:
        for stmt in body:
            if type(stmt) is cst.FunctionDef:
                self._add_function(stmt, None, prefix)
            elif isinstance(stmt, cst.BaseCompoundStatement) and type(stmt) is not cst.ClassDef:
                for block in sub_blocks(stmt):
                    self._collect_nested(block, prefix)

    def _resolve_class_kinds(self) -> None:
        changed = True
        while changed:
            changed = False
            for info in self.classes.values():
                for base in info.bases:
                    qualified = self.imports.qualify_path(base)
                    parent = self.classes.get(base)
                    module_base = base in ("Module", "nn.Module") or (qualified or "").endswith(
                        ("nn.Module", "LightningModule", "nn.modules.module.Module")
                    )
                    optim_base = (qualified or base).endswith(("optim.Optimizer", "Optimizer"))
                    if (module_base or (parent and parent.is_module)) and not info.is_module:
                        info.is_module = changed = True
                    if (optim_base or (parent and parent.is_optimizer)) and not info.is_optimizer:
                        info.is_optimizer = changed = True

    def _collect_field_annotations(self) -> None:
        """`dist_model: Union[DDP, FSDP]` or `optim: torch.optim.Optimizer` in a class body
        (a dataclass's fields, or annotated attributes set elsewhere): ``self.dist_model``
        is a module wherever the class's methods use it."""
        for info in self.classes.values():
            for line in info.node.body.body:
                if type(line) is not cst.SimpleStatementLine:
                    continue
                for stmt in line.body:
                    if type(stmt) is cst.AnnAssign and type(stmt.target) is cst.Name:
                        for kind in self.annotated_kinds(stmt.annotation.annotation):
                            self.add_kind(info.name, "self." + stmt.target.value, kind)

    def annotated_kinds(self, annotation: cst.BaseExpression) -> set[str]:
        """The kinds a type annotation declares: a torch module or optimizer class (or one
        of the file), also inside ``Optional[...]``, ``Union[...]`` and ``A | B``."""
        kinds: set[str] = set()
        for member in _annotation_members(annotation):
            name = dotted(member)
            if name is None:
                continue
            if name in self.classes:
                kinds |= self.instance_kinds(name)
                continue
            full = self.imports.qualify_path(name) or name
            if full.endswith("Optimizer") or is_optimizer_class(full):
                kinds.add(OPTIMIZER)
            elif full.endswith(_MODULE_ANNOTATIONS) or is_module_class(full):
                kinds.add(MODULE)
        return kinds

    def lineage(self, cls: ClassInfo):
        """The class, then its bases defined in this file, nearest first (each once)."""
        seen: set[str] = set()
        todo = [cls]
        while todo:
            current = todo.pop(0)
            if current.name in seen:
                continue
            seen.add(current.name)
            yield current
            todo.extend(self.classes[b] for b in current.bases if b in self.classes)

    def _lineage_names(self, cls: ClassInfo) -> tuple[str, ...]:
        names = self._lineages.get(cls.name)
        if names is None:
            names = self._lineages[cls.name] = tuple(current.name for current in self.lineage(cls))
        return names

    def method(self, cls: ClassInfo, name: str) -> tuple[ClassInfo, cst.FunctionDef] | None:
        for current in self.lineage(cls):
            if name in current.methods:
                return current, current.methods[name]
        return None

    def backwards_and_never_steps(self, func: cst.FunctionDef, cls: ClassInfo | None) -> bool:
        """Whether a call of ``func`` runs a backward and no ``step()`` of anything, counting
        the helpers it calls (`f(...)`, `self.m(...)`): the caller's next `x.step()` is
        then the step that applies that backward (`zero_grad; loss.backward()` in a helper,
        the step under the caller's accumulation test)."""
        summary = self._step_free_backwards(func, cls, set())
        return summary == (True, False)

    def _step_free_backwards(self, func, cls, visiting: set) -> tuple[bool, bool]:
        """(runs a backward, runs a step), over ``func`` and the helpers it calls."""
        known = self._backward_summaries.get(func)
        if known is not None:
            return known
        if func in visiting:
            return (False, False)  # recursion: the outer call answers for it
        visiting.add(func)
        backwards = steps = False
        stack = list(_body_statements(func))
        while stack and not steps:
            node = stack.pop()
            kind = type(node)
            if kind is cst.FunctionDef or kind is cst.ClassDef or kind is cst.Lambda:
                continue
            if kind is cst.Call:
                callee = node.func
                if type(callee) is cst.Attribute:
                    method = callee.attr.value
                    if method in ("backward", "manual_backward"):
                        backwards = True
                    elif method == "step":
                        steps = True
                    elif type(callee.value) is cst.Name and callee.value.value == "self" and cls is not None:
                        found = self.method(cls, method)
                        if found is not None:
                            inner = self._step_free_backwards(found[1], found[0], visiting)
                            backwards, steps = backwards or inner[0], steps or inner[1]
                elif type(callee) is cst.Name and callee.value in self.functions:
                    inner = self._step_free_backwards(self.functions[callee.value], None, visiting)
                    backwards, steps = backwards or inner[0], steps or inner[1]
            stack.extend(children(node))
        visiting.discard(func)
        self._backward_summaries[func] = (backwards, steps)
        return (backwards, steps)

    def holds_no_parameters(self, cls: ClassInfo) -> bool:
        """A module class of this file whose methods give ``self`` only plain values
        (no call result that could be a layer or a Parameter), over bases that are
        ``nn.Module`` or such classes: a byte encoder, a fixed transform."""
        for current in self.lineage(cls):
            if any(base not in self.classes and base not in ("Module", "nn.Module", "torch.nn.Module") for base in current.bases):
                return False
            for method in current.methods.values():
                for small in _assignments_to_self(method.body.body):
                    if calls_something(small.value):  # a layer, a Parameter, a factory
                        return False
        return True

    def backwarded_attributes(self, cls: ClassInfo) -> frozenset[str]:
        """Attributes of ``self`` that a method of the class (or of its bases in this
        file) backwards, directly or through its locals: ``meta_loss =
        sum(self.meta_losses) / n; meta_loss.backward()`` backwards ``meta_losses``.
        A list one method fills and another sums and backwards is an objective, not a
        history (hooks of a trainer base class that calls both, out of sight)."""
        if cls.name not in self._backwarded_attributes:
            self._backwarded_attributes[cls.name] = frozenset(
                attribute
                for current in self.lineage(cls)
                for method in current.methods.values()
                for attribute in _self_attributes_backwarded(method)
            )
        return self._backwarded_attributes[cls.name]

    def instance_attributes(self, cls: ClassInfo) -> frozenset[str]:
        """The attributes the class's methods (and its bases' in this file) assign on `self`."""
        if cls.name not in self._instance_attributes:
            self._instance_attributes[cls.name] = frozenset(
                path.split(".")[1]
                for current in self.lineage(cls)
                for method in current.methods.values()
                for path in assigned_paths(method.body.body)
                if path.startswith("self.")
            )
        return self._instance_attributes[cls.name]

    def method_held(self, cls: ClassInfo, name: str) -> tuple[ClassInfo, cst.FunctionDef] | None:
        """The method of the class that the attribute ``self.<name>`` holds, when a method
        of the class (or of its bases in this file) sets it to one: `self.pre =
        self._identity` where no preprocessor is configured. Of several (`self.get_obj =
        self.get_obj_per` in one branch, `self.get_obj_raw` in the other), one, the
        same every run."""
        return self._members_held(cls)[0].get(name)

    def holds_an_unseen_method(self, cls: ClassInfo, name: str) -> bool:
        """Whether a method of the class sets ``self.<name>`` to a member of `self` that
        this file neither defines nor assigns: a method of a base class of another file
        (skrl's `self._state_preprocessor = self._empty_preprocessor`)."""
        return name in self._members_held(cls)[1]

    def _members_held(self, cls: ClassInfo) -> tuple[dict, set]:
        known = self._methods_held.get(cls.name)
        if known is None:
            held: dict[str, tuple[ClassInfo, cst.FunctionDef]] = {}
            unseen: set[str] = set()
            assigned = self.instance_attributes(cls)
            for current in self.lineage(cls):
                for method in current.methods.values():
                    for path, value in attribute_assignments(method.body.body):
                        if type(value) is not cst.Attribute or dotted(value.value) != "self":
                            continue
                        found = self.method(cls, value.attr.value)
                        if found is not None:
                            held.setdefault(path[len("self."):], found)
                        elif value.attr.value not in assigned:
                            unseen.add(path[len("self."):])
            known = self._methods_held[cls.name] = (held, unseen)
        return known

    def first_assignment(self, scope: Scope, name: str) -> cst.BaseExpression | None:
        """The value of the first plain ``name = value`` in a scope (for optimizer params lists)."""
        table = self._first_assignments.get(scope.key)
        if table is None:
            table = self._first_assignments[scope.key] = _first_assignments(scope.body)
        return table.get(name)

    @property
    def grad_contexts(self):
        """The file's ``@contextmanager`` helpers that set the grad mode (cfg.grad_context_managers)."""
        if self._grad_contexts is None:
            from graphlint.model.cfg import grad_context_managers

            spelled = list(self.functions.items())
            spelled += [(f"self.{name}", func) for info in self.classes.values() for name, func in info.methods.items()]
            self._grad_contexts = grad_context_managers(spelled)
        return self._grad_contexts

    def uses_other_framework(self) -> bool:
        """Imports another deep-learning framework and not torch: its loops are not ours."""
        roots = {full.split(".")[0] for full in self.imports.aliases.values()}
        return bool(roots & _OTHER_FRAMEWORKS) and "torch" not in roots

    def scope_of(self, func: cst.CSTNode) -> Scope:
        return self.scopes[func]

    def scope_by_key(self, key: str) -> Scope | None:
        """The scope named ``key`` (``train``, ``Trainer.fit``; see Scope.key)."""
        if self._scopes_by_key is None:
            self._scopes_by_key = {scope.key: scope for scope in self.scopes.values()}
        return self._scopes_by_key.get(key)

    # ----- kinds -----
    def _collect_kinds(self) -> None:
        """Run each scope's _KindCollector, and again while a kind it read changed after.

        One pass in the order of the file misses what a scope reads from a scope
        written below it (`agent, opt = make_agent()` in a `main` defined above
        `make_agent`), and findings would depend on the order of the definitions.
        A scope runs again only when a key it read (a path's kinds or optimizer
        models) gained something after its last run ended; kinds only grow, so
        this ends.
        """
        pending = list(self.scopes.values())
        ran: dict[cst.CSTNode, tuple[int, set[tuple[str, str]]]] = {}
        while pending:
            for scope in pending:
                self._reads = set()
                _KindCollector(self, scope).run()
                ran[scope.node] = (self._additions, self._reads)
            self._reads = None
            gained = self._gained
            pending = [
                scope for scope in self.scopes.values()
                if any(gained.get(key, -1) > ran[scope.node][0] for key in ran[scope.node][1])
            ]

    def _read(self, scope: Scope, path: str) -> None:
        """Note the keys a lookup of ``path`` in ``scope`` reads, while kinds are collected."""
        reads = self._reads
        reads.add((scope.key, path))
        reads.add(("<module>", path))
        if scope.cls is not None:
            reads.add((scope.cls.name, path))

    def _gain(self, key: tuple[str, str]) -> None:
        self._additions += 1
        self._gained[key] = self._additions

    def add_kind(self, scope_key: str, path: str, kind: str) -> bool:
        kinds = self._kinds.setdefault((scope_key, path), set())
        if kind in kinds:
            return False
        kinds.add(kind)
        self._gain((scope_key, path))
        return True

    def instance_kinds(self, class_name: str) -> set[str]:
        """The kinds of an instance of a class of the file."""
        cls = self.classes.get(class_name)
        if cls is None:
            return set()
        return {INSTANCE + class_name, MODULE} if cls.is_module else {INSTANCE + class_name}

    def item_kinds(self, kinds: set[str]) -> set[str]:
        """The kinds of an item of a container of ``kinds`` (see ITEMS): an instance."""
        return {kind for held in kinds if held.startswith(ITEMS) for kind in self.instance_kinds(held[len(ITEMS):])}

    def names_a_class(self, scope: Scope, name: str | None) -> bool:
        """Whether ``name`` in ``scope`` is a class of the file (at module level the
        `class` statement itself binds it; a function's local of that name shadows it)."""
        return name in self.classes and (scope.key == "<module>" or name not in scope.locals)

    def kinds(self, scope: Scope, path: str | None) -> set[str]:
        if path is None:
            return set()
        if self._reads is not None:
            self._read(scope, path)
        found = set(self._kinds.get((scope.key, path), ()))
        if path.startswith("self.") and scope.cls is not None:
            # What the class's methods, or its bases' in this file, put on self (a base
            # trainer's `self.model`, used by a subclass's step).
            for name in self._lineage_names(scope.cls):
                found |= self._kinds.get((name, path), set())
        if path.split(".")[0] not in scope.locals:
            found |= self._kinds.get(("<module>", path), set())
        return found

    def attributes_of_kind(self, class_name: str, kind: str) -> frozenset[str]:
        """The `self.x` paths a class's methods hold an object of ``kind`` at."""
        known = self._attributes_of_kind.get((class_name, kind))
        if known is None or known[0] != self._additions:  # (kinds gained since: look again)
            found = frozenset(
                path for (owner, path), kinds in self._kinds.items()
                if owner == class_name and kind in kinds and path.startswith("self.")
            )
            known = self._attributes_of_kind[(class_name, kind)] = (self._additions, found)
        return known[1]

    def paths_of_kind(self, kind: str) -> set[str]:
        """Every path, in any scope, that holds an object of ``kind``."""
        return {path for (_, path), kinds in self._kinds.items() if kind in kinds}

    def add_optimizer_models(self, scope_key: str, path: str, models: set[str]) -> None:
        known = self._optimizer_models.setdefault((scope_key, path), set())
        if not models <= known:
            known.update(models)
            self._gain((scope_key, path))

    def optimizer_models(self, scope: Scope, path: str) -> set[str]:
        if self._reads is not None:
            self._read(scope, path)
        found = set(self._optimizer_models.get((scope.key, path), ()))
        if path.startswith("self.") and scope.cls is not None:
            found |= self._optimizer_models.get((scope.cls.name, path), set())
        found |= self._optimizer_models.get(("<module>", path), set())
        return found

    def is_frozen(self, kinds: set[str]) -> bool:
        """Whether an object of ``kinds`` is a module none of whose parameters requires grad
        (or that has none)."""
        if UNFROZEN in kinds:
            return False
        cls = self.class_of_instance(kinds)
        return (
            FROZEN in kinds
            or (cls is not None and cls.frozen)
            or (PARAMETER_FREE in kinds and MODULE not in kinds)
        )

    def class_of_instance(self, kinds: set[str]) -> ClassInfo | None:
        return self._class_named(kinds, INSTANCE)

    def class_aliased(self, kinds: set[str]) -> ClassInfo | None:
        """The class of this file a name holds (`model_class = Net`: calling it constructs)."""
        return self._class_named(kinds, CLASS)

    def _class_named(self, kinds: set[str], prefix: str) -> ClassInfo | None:
        for kind in sorted(kinds):  # sets of str iterate in a per-process hash order
            if kind.startswith(prefix):
                return self.classes.get(kind[len(prefix):])
        return None


# Base classes and decorators that make a class a record of its fields.
_RECORD_BASES = ("NamedTuple",)
_RECORD_DECORATORS = ("dataclass", "dataclasses.dataclass", "attr.s", "attrs.define", "attr.define", "define")
# Calls that return a record class: `LSTMState = namedtuple("LSTMState", ["hx", "cx"])`.
RECORD_FACTORIES = ("namedtuple", "NamedTuple")


# Annotations naming a module class outside torch.nn (and `nn.Module` itself, however imported).
_MODULE_ANNOTATIONS = ("Module", "LightningModule", "FullyShardedDataParallel")


def _annotation_members(annotation: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The types an annotation allows: the members of ``Optional``/``Union`` and of ``A | B``."""
    if type(annotation) is cst.BinaryOperation and type(annotation.operator) is cst.BitOr:
        return _annotation_members(annotation.left) + _annotation_members(annotation.right)
    if type(annotation) is cst.Subscript and (dotted(annotation.value) or "").rpartition(".")[2] in ("Optional", "Union"):
        members = []
        for element in annotation.slice:
            if type(element.slice) is cst.Index:
                members += _annotation_members(element.slice.value)
        return members
    return [annotation]


def _returned_tuple(func: cst.FunctionDef, size: int) -> list | None:
    """The elements of the tuple display of ``size`` every `return` of ``func`` hands
    back, when there is exactly one such `return` (its own code, closures aside)."""
    found = []
    stack = list(func.body.body)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.FunctionDef or kind is cst.ClassDef or kind is cst.Lambda:
            continue
        if kind is cst.Return:
            found.append(node.value)
        stack.extend(children(node))
    if len(found) != 1 or type(found[0]) is not cst.Tuple or len(found[0].elements) != size:
        return None
    if any(type(element) is cst.StarredElement for element in found[0].elements):
        return None
    return [element.value for element in found[0].elements]


def _declares_a_record(node: cst.ClassDef, bases: list[str]) -> bool:
    if any(type(stmt) is cst.FunctionDef and stmt.name.value == "__init__" for stmt in node.body.body):
        return False
    if any(base.rsplit(".", 1)[-1] in _RECORD_BASES for base in bases):
        return True
    for decorator in node.decorators:
        expr = decorator.decorator
        if type(expr) is cst.Call:
            expr = expr.func
        if (dotted(expr) or "") in _RECORD_DECORATORS:
            return True
    return False


def _is_no_grad_decorator(expr: cst.BaseExpression) -> bool:
    if type(expr) is cst.Call:
        expr = expr.func
    name = dotted(expr) or ""
    return name.endswith(("no_grad", "inference_mode"))


def all_params(params: cst.Parameters):
    """Every parameter of a signature, in order: positional-only, plain, *args, keyword-only, **kwargs."""
    yield from params.posonly_params
    yield from params.params
    if type(params.star_arg) is cst.Param:
        yield params.star_arg
    yield from params.kwonly_params
    if params.star_kwarg is not None:
        yield params.star_kwarg


def _body_statements(func: cst.FunctionDef):
    body = func.body
    if type(body) is cst.IndentedBlock:
        return body.body
    return [body]


def _assignments_to_self(body) -> list[cst.Assign | cst.AnnAssign | cst.AugAssign]:
    """Every statement of ``body`` (nested blocks included, nested definitions not)
    assigning an attribute of ``self``."""
    found = []
    blocks = [body]
    while blocks:
        for stmt in blocks.pop():
            if type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    targets = [t.target for t in small.targets] if type(small) is cst.Assign else (
                        [small.target] if type(small) in (cst.AnnAssign, cst.AugAssign) else []
                    )
                    if any((dotted(t) or "").startswith("self.") for t in targets) and small.value is not None:
                        found.append(small)
            elif isinstance(stmt, cst.BaseCompoundStatement) and type(stmt) not in (cst.FunctionDef, cst.ClassDef):
                blocks.extend(sub_blocks(stmt))
    return found


def sub_blocks(stmt: cst.CSTNode):
    """The statement lists of a compound statement (every branch of an if chain, handlers, else, finally)."""
    for child in children(stmt):
        if isinstance(child, (cst.IndentedBlock,)):
            yield child.body
        elif type(child) in (cst.Else, cst.Finally, cst.ExceptHandler, cst.If):
            if type(child) is cst.If:
                yield child.body.body
                yield from sub_blocks(child)
            else:
                yield child.body.body


class _KindCollector:
    """Flow-insensitive object kinds of the names of one scope."""

    def __init__(self, program: Program, scope: Scope) -> None:
        self.program = program
        self.scope = scope
        self.steps: set[str] = set()
        self.zero_grads: set[str] = set()
        # A `.step()` right after a backward steps an optimizer (a scheduler steps after that).
        self.after_backward = False
        # Owners of `owner.backward(loss)` (a wrapper's backward), and paths run like a
        # model: called (`model.network(batch)`) or through `.forward(x)`.
        self.backwards_an_argument: set[str] = set()
        self.run_as_model: set[str] = set()

    def run(self) -> None:
        for param in all_params(self.scope.node.params) if type(self.scope.node) is cst.FunctionDef else ():
            if param.annotation is not None:
                for kind in self.program.annotated_kinds(param.annotation.annotation):
                    self._add(param.name.value, kind)
        dispatch(self, self.scope.body)
        for method, paths in (("step", self.steps), ("zero_grad", self.zero_grads)):
            for path in paths:
                key = self._key(path)
                if self.scope.cls is not None and key == self.scope.cls.name:
                    self.program._attribute_calls.setdefault((key, path), set()).add(method)
        for path in self.steps & self.zero_grads:
            if MODULE not in self.program.kinds(self.scope, path):
                self._add(path, OPTIMIZER)
        # A model that backwards a loss it is given and steps itself is a training
        # engine (DeepSpeed's, passed in as a parameter or built by a wrapper of
        # another file): its step zeroes the gradients, and it is no tensor.
        for path in self.backwards_an_argument & self.steps:
            if path in self.run_as_model or self.program.kinds(self.scope, path) & {MODULE, FORWARD}:
                self._add(path, CLEARING_ENGINE)

    def _key(self, path: str) -> str:
        if path.startswith("self.") and self.scope.cls is not None and path.count(".") == 1:
            return self.scope.cls.name
        return self.scope.key if path.split(".")[0] in self.scope.locals else "<module>"

    def _add(self, path: str, kind: str) -> None:
        self.program.add_kind(self._key(path), path, kind)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._assign(target.target, node.value)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if type(node.operator) is not cst.Add:
            return
        for text, other in ((node.left, node.right), (node.right, node.left)):
            path = dotted(other)
            if type(text) in STRING_LITERALS and path is not None:
                self._add(path, TEXT)  # `tensor + "..."` raises: `label` holds a str

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._assign(node.target, node.value)

    def _freeze(self, owner: str, frozen: bool) -> None:
        if owner == "self" and self.scope.cls is not None and self.scope.node.name.value == "__init__":
            self.scope.cls.frozen = self.scope.cls.frozen or frozen
        elif owner != "self":
            self._add(owner, FROZEN if frozen else UNFROZEN)

    def visit_For(self, node: cst.For) -> None:
        iterable = node.iter
        # `for p in model.parameters(): p.requires_grad = False`
        if (
            type(iterable) is cst.Call and type(iterable.func) is cst.Attribute
            and iterable.func.attr.value == "parameters" and type(node.target) is cst.Name
        ):
            owner = dotted(iterable.func.value)
            setting = _requires_grad_setting(node.body, node.target.value)
            if owner and setting is not None:
                self._freeze(owner, not setting)
        if type(iterable) is cst.Call and type(iterable.func) is cst.Name and iterable.func.value == "enumerate" and iterable.args:
            iterable = iterable.args[0].value
            target = node.target
            if type(target) is cst.Tuple and len(target.elements) == 2:
                self._param_group_target(target.elements[1].value, iterable)
                self._item_target(target.elements[1].value, iterable)
            return
        self._item_target(node.target, iterable)
        if type(iterable) is cst.Call and type(iterable.func) is cst.Name and iterable.func.value == "zip":
            # `for group, base_lr in zip(optimizer.param_groups, self.base_lrs)`
            target = node.target
            if type(target) is cst.Tuple and len(target.elements) == len(iterable.args):
                for element, arg in zip(target.elements, iterable.args):
                    self._param_group_target(element.value, arg.value)
            return
        self._param_group_target(node.target, iterable)

    def _param_group_target(self, target, iterable) -> None:
        if type(iterable) is cst.Attribute and iterable.attr.value == "param_groups":
            name = dotted(target)
            if name:
                self._add(name, PARAM_GROUP)

    def _assign(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        path = dotted(target)
        if type(target) in (cst.Tuple, cst.List) and type(value) in (cst.Tuple, cst.List):
            # critic1, critic2 = Critic(), Critic()
            for part, held in paired_parts(target, value) or ():
                self._assign(part, held)
            return
        if type(target) in (cst.Tuple, cst.List) and type(value) is cst.Call:
            if self.program.imports.qualify(value.func) in ENGINE_SETUPS and target.elements:
                # engine, optimizer, loader, scheduler = deepspeed.initialize(model=..., ...)
                engine = dotted(target.elements[0].value)
                if engine:
                    self._add(engine, MODULE)
                    self._add(engine, CLEARING_ENGINE)
                return
            if self._unpack_factory(target, value):
                return
            # model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            args = positional(value)
            if type(value.func) is cst.Attribute and value.func.attr.value == "prepare" and len(args) == len(target.elements):
                for element, arg in zip(target.elements, args):
                    source, dest = dotted(arg), dotted(element.value)
                    if source and dest:
                        for kind in self.program.kinds(self.scope, source):
                            self._add(dest, kind)
                        self._copy_models(source, dest)
            return
        if path is None:
            return
        for kind, models in self._kinds_of_value(value):
            self._add(path, kind)
            if models:
                self.program.add_optimizer_models(self._key(path), path, models)

    def _unpack_factory(self, target: cst.Tuple | cst.List, value: cst.Call) -> bool:
        """`agent, optimizer = make_agent(cfg)` of a function of the file returning a
        tuple of its locals: each target gets the kinds of the local it receives, an
        optimizer the models it was built on (in the caller's names). Kinds of a
        function defined further down the file are not known yet: nothing then."""
        name = value.func.value if type(value.func) is cst.Name else None
        func = self.program.functions.get(name) if name and name not in self.scope.locals else None
        if func is None:
            return False
        parts = _returned_tuple(func, len(target.elements))
        if parts is None:
            return False
        callee = self.program.scopes[func]
        renamed = {dotted(part): dotted(element.value) for element, part in zip(target.elements, parts)}
        renamed.pop(None, None)
        in_callee = _KindCollector(self.program, callee)
        for element, part in zip(target.elements, parts):
            dest = dotted(element.value)
            if not dest:
                continue
            # A returned local (`return agent, optimizer`) or a value built in the
            # return itself (`return agent, Adam(agent.parameters())`).
            source = dotted(part)
            if source:
                found = [(kind, self.program.optimizer_models(callee, source)) for kind in self.program.kinds(callee, source)]
            else:
                found = list(in_callee._kinds_of_value(part))
            for kind, models in found:
                self._add(dest, kind)
                translated = {renamed.get(model) for model in models or ()}
                if translated and None not in translated:
                    self.program.add_optimizer_models(self._key(dest), dest, translated)
        return True

    def _item_target(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        """`for cb in callbacks:` (or `meters.values()`) over a container whose items are
        all instances of one class of the file: the loop variable is one too."""
        if type(target) is not cst.Name:
            return
        if type(iterable) is cst.Call and type(iterable.func) is cst.Attribute and iterable.func.attr.value == "values":
            iterable = iterable.func.value
        for kind in self.program.item_kinds(self.program.kinds(self.scope, dotted(iterable))):
            self._add(target.value, kind)

    def _items_built(self, container: cst.BaseExpression):
        """ITEMS + class when every item of a container display or comprehension is
        a new instance of one class of the file: `{"loss": AverageMeter(), "acc":
        AverageMeter()}`, `{k: AverageMeter() for k in names}`, `defaultdict(AverageMeter)`."""
        kind = type(container)
        if kind in (cst.List, cst.Set, cst.Tuple):
            items = [element.value for element in container.elements if type(element) is cst.Element]
        elif kind is cst.Dict:
            items = [element.value for element in container.elements if type(element) is cst.DictElement]
        elif kind in (cst.ListComp, cst.SetComp):
            items = [container.elt]
        elif kind is cst.DictComp:
            items = [container.value]
        elif kind is cst.Call and last_part(dotted(container.func) or "") == "defaultdict" and container.args:
            factory = container.args[0].value
            name = factory.value if type(factory) is cst.Name else None
            if self.program.names_a_class(self.scope, name):
                yield ITEMS + name, None
            return
        else:
            return
        names = {item.func.value if type(item) is cst.Call and type(item.func) is cst.Name else None for item in items}
        if len(names) == 1 and self.program.names_a_class(self.scope, next(iter(names))):
            yield ITEMS + names.pop(), None

    def _copy_models(self, source: str, dest: str) -> None:
        models = self.program.optimizer_models(self.scope, source)
        if models:
            self.program.add_optimizer_models(self._key(dest), dest, models)

    def _kinds_of_value(self, value: cst.BaseExpression):
        if type(value) in (cst.List, cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp):
            yield CONTAINER, None
            yield from self._items_built(value)
            return
        if type(value) is cst.Call and last_part(dotted(value.func) or "") in _CONTAINER_TYPES:
            yield CONTAINER, None
            yield from self._items_built(value)
            return
        if type(value) is cst.Subscript:
            base = value.value
            if type(base) is cst.Attribute and base.attr.value == "param_groups":
                yield PARAM_GROUP, None
            return
        if type(value) in (cst.Name, cst.Attribute):
            source = dotted(value)
            if source:
                for kind in self.program.kinds(self.scope, source):
                    yield kind, self.program.optimizer_models(self.scope, source)
            if type(value) is cst.Name and self.program.names_a_class(self.scope, source):
                yield CLASS + source, None
            return
        if type(value) is not cst.Call:
            return
        func = value.func
        qualified = self.program.imports.qualify(func) or ""
        name = dotted(func) or ""
        if type(func) is cst.Attribute and func.attr.value in _RETURNS_ITS_MODULE:
            yield from self._kinds_of_value(func.value)
            return
        if type(func) is cst.Attribute and func.attr.value == "optimizers":
            yield OPTIMIZER, None
            return
        if qualified and is_module_class(qualified):
            if last_part(qualified) in PARAMETER_FREE_MODULES:
                yield PARAMETER_FREE, None
                return
            if last_part(qualified) in ("DataParallel", "DistributedDataParallel") and value.args:
                yield from self._kinds_of_value(value.args[0].value)
            yield MODULE, None
            return
        if qualified and is_optimizer_class(qualified):
            yield OPTIMIZER, self._models_in(value)
            return
        if qualified and is_scheduler_class(qualified):
            yield SCHEDULER, None
            return
        if last_part(qualified or name) in SCALER_CLASSES:
            yield SCALER, None
            return
        if last_part(qualified or name) in ("Accelerator", "Fabric"):
            yield ACCELERATOR, None
            return
        if last_part(name) in ("DistributedDataParallel", "DataParallel", "DDP", "FSDP", "compile") and value.args:
            yield from self._kinds_of_value(value.args[0].value)
            return
        if (qualified or name) in ("copy.deepcopy", "copy.copy") and len(value.args) == 1:
            # `target_net = copy.deepcopy(policy_net)`: another object of the same kind,
            # with parameters of its own (no optimizer steps them).
            for kind, _ in self._kinds_of_value(value.args[0].value):
                yield kind, None
            return
        cls = self.program.classes.get(name) or self.program.class_aliased(self.program.kinds(self.scope, name))
        if cls is not None:
            yield INSTANCE + cls.name, None
            if cls.is_module:
                yield MODULE, None
            if cls.is_optimizer:
                yield OPTIMIZER, self._models_in(value)
            return
        if not qualified and last_part(name) in _OPTIMIZER_NAMES:
            yield OPTIMIZER, self._models_in(value)

    def _models_in(self, call: cst.Call) -> set[str]:
        """The module paths whose parameters an optimizer constructor receives."""
        models: set[str] = set()
        stack: list[cst.CSTNode] = [call]
        seen_names: set[str] = set()
        while stack:
            node = stack.pop()
            if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in ("parameters", "named_parameters"):
                owner = dotted(node.func.value)
                if owner:
                    models.add(owner)
                continue
            if type(node) is cst.Name and node.value not in seen_names:
                seen_names.add(node.value)
                definition = self.program.first_assignment(self.scope, node.value)
                if definition is not None:
                    stack.append(definition)
            stack.extend(children(node))
        if self.scope.cls is not None:
            # `self.model = model; self.optimizer = AdamW(model.parameters())`: the
            # other methods zero_grad and step it as `self.model`.
            for model in [m for m in models if m in self.scope.locals]:
                models |= self._attributes_holding(model)
        return models

    def _attributes_holding(self, name: str) -> set[str]:
        """The `self.<attr>` paths this method assigns the local ``name`` to."""
        return {path for path, value in attribute_assignments(self.scope.body) if type(value) is cst.Name and value.value == name}

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        self._called_object(func, node)
        helper = self._helper(func)
        if helper is not None and self.program.backwards_and_never_steps(*helper):
            self.after_backward = True  # the helper's backward waits for a step here
        if self.after_backward and any(
            OPTIMIZER in self.program.kinds(self.scope, dotted(arg.value)) for arg in node.args if dotted(arg.value)
        ):
            # `run_optimizer_step(self._optimizer)`: a call handed the optimizer may step
            # it, so a `.step()` after it (the scheduler's) is not taken for the optimizer's.
            self.after_backward = False
        called = dotted(func)
        if called:
            self.run_as_model.add(called)
            root = called.partition(".")[0]
            if called.endswith(".zero_grad") and root in self.scope.params and root not in ("self", "cls"):
                self.program.clears_through_a_parameter = True  # see its declaration
        if type(func) is not cst.Attribute:
            qualified = self.program.imports.qualify(func) or ""
            if qualified and is_scheduler_class(qualified) and node.args:
                first = dotted(node.args[0].value)
                if first:
                    self._add(first, OPTIMIZER)
            return
        # `G.eval().requires_grad_(False).to(device)`: every call of the chain is on G.
        owner = dotted(_chained_receiver(func.value))
        method = func.attr.value
        qualified = self.program.imports.qualify(func) or ""
        if qualified and is_scheduler_class(qualified) and node.args:
            first = dotted(node.args[0].value)
            if first:
                self._add(first, OPTIMIZER)
        if method == "backward":
            self._scaled_by(func.value)
        if owner is None:
            return
        if method in ("backward", "manual_backward"):
            self.after_backward = True
            if method == "backward" and node.args:
                self.backwards_an_argument.add(owner)
        elif method == "forward":
            self.run_as_model.add(owner)
        if method == "requires_grad_":
            # `vae.requires_grad_(False)` freezes it, `requires_grad_()` / `(True)` unfreezes.
            self._freeze(owner, bool(node.args) and is_false(node.args[0].value))
        # `state_dict()` is not among them: optimizers, schedulers, scalers and
        # tasks have one too; nor `apply()` (pandas, and any functional style).
        if method in ("parameters", "named_parameters", "train", "eval", "modules", "children", "register_forward_hook"):
            self._add(owner, MODULE)
        elif method == "step":
            self.steps.add(owner)
            known = self.program.kinds(self.scope, owner)
            if self.after_backward and not node.args and not known & {SCHEDULER, MODULE, SCALER}:
                self._add(owner, OPTIMIZER)
            self.after_backward = False
            if node.args and type(func.value) in (cst.Name, cst.Attribute):
                arg = dotted(node.args[0].value)
                if arg and SCALER in self.program.kinds(self.scope, owner):
                    self._add(arg, OPTIMIZER)
        elif method in ZERO_GRAD_METHODS:
            if not (node.args and node.args[0].keyword is None and not is_literal(node.args[0].value)):
                # (`strategy.zero_grad(optimizer)` clears the optimizer it is handed.)
                self.zero_grads.add(owner)
        elif method == "unscale_" and node.args:
            arg = dotted(node.args[0].value)
            if arg:
                self._add(arg, OPTIMIZER)

    def _helper(self, func: cst.BaseExpression) -> tuple[cst.FunctionDef, ClassInfo | None] | None:
        """The function of the file a call runs: `f(...)` of a module-level function not
        re-bound here, or `self.m(...)` of this method's class."""
        if type(func) is cst.Name:
            if func.value in self.program.functions and func.value not in self.scope.locals:
                return self.program.functions[func.value], None
            return None
        if (
            type(func) is cst.Attribute
            and type(func.value) is cst.Name
            and func.value.value == "self"
            and self.scope.cls is not None
        ):
            found = self.program.method(self.scope.cls, func.attr.value)
            return (found[1], found[0]) if found is not None else None
        return None

    def _scaled_by(self, backwarded: cst.BaseExpression) -> None:
        """`scaler.scale(loss).backward()`: ``scaler`` follows GradScaler's protocol
        (a parameter `scaler=None` too), so its `scaler.step(opt)` steps ``opt``."""
        if (
            type(backwarded) is cst.Call
            and type(backwarded.func) is cst.Attribute
            and backwarded.func.attr.value == "scale"
        ):
            scaler = dotted(backwarded.func.value)
            if scaler:
                self._add(scaler, SCALER)

    def _called_object(self, func: cst.BaseExpression, call: cst.Call) -> None:
        if not call.args:
            return
        program = self.program
        if type(func) is cst.Name:
            name = func.value
            if name in program.functions or name in program.classes or program.imports.is_imported(name):
                return
            if name in _BUILTIN_CALLABLES:
                return
            self._add(name, FORWARD)
        elif type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
            cls = self.scope.cls
            if cls is not None and program.method(cls, func.attr.value) is None:
                self._add(f"self.{func.attr.value}", FORWARD)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "param_groups":
            owner = dotted(node.value)
            if owner:
                self._add(owner, OPTIMIZER)


# Methods of a module that return the module itself.
_RETURNS_ITS_MODULE = frozenset({
    "to", "cuda", "cpu", "train", "eval", "half", "float", "double", "bfloat16", "requires_grad_",
})


def _chained_receiver(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``G`` for ``G.eval().to(device)``: the object a chain of such calls starts from."""
    while type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in _RETURNS_ITS_MODULE:
        expr = expr.func.value
    return expr


def _requires_grad_setting(body: cst.BaseSuite, name: str) -> bool | None:
    """The value a loop body gives ``name.requires_grad`` (or ``name.requires_grad_(v)``),
    when every statement of the body is such a setting."""
    found = None
    for line in body.body:
        smalls = line.body if type(line) is cst.SimpleStatementLine else None
        if smalls is None:
            return None
        for small in smalls:
            value = None
            if type(small) is cst.Assign and len(small.targets) == 1:
                target = small.targets[0].target
                if dotted(target) == f"{name}.requires_grad":
                    value = small.value
            elif type(small) is cst.Expr and type(small.value) is cst.Call:
                call = small.value
                if dotted(call.func) == f"{name}.requires_grad_":
                    value = call.args[0].value if call.args else cst.Name("True")
            if value is None or not (is_false(value) or is_true(value)):
                return None
            setting = is_true(value)
            if found is not None and found != setting:
                return None
            found = setting
    return found


_BUILTIN_CALLABLES = frozenset(dir(__import__("builtins")))
_CONTAINER_TYPES = frozenset({"list", "dict", "set", "defaultdict", "OrderedDict", "deque", "Counter"})
# Other frameworks' autograd (mxnet's `l.backward()`, ...) follows other rules.
_OTHER_FRAMEWORKS = frozenset({"mxnet", "tensorflow", "jax", "paddle", "mindspore", "oneflow", "keras"})
_OPTIMIZER_NAMES = frozenset({"SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "LBFGS"})


def attribute_assignments(body):
    """(`self.<attr>`, value) for each assignment of the statements to an attribute of
    self, the parts of `self.model, self.clip = model, clip` included (nested
    functions and classes left out)."""
    stack = list(body)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.FunctionDef or kind is cst.ClassDef:
            continue
        if kind is cst.Assign:
            value = node.value
            for target in node.targets:
                target = target.target
                for part, held in paired_parts(target, value) or [(target, value)]:
                    path = dotted(part)
                    if path and path.startswith("self.") and path.count(".") == 1:
                        yield path, held
        stack.extend(children(node))


def _first_assignments(body) -> dict[str, cst.BaseExpression]:
    """Each name's first plain ``name = value`` (or ``name: T = value``) in a body,
    nested functions excluded; ``a, b = [], {}`` binds each name its part."""
    found: dict[str, cst.BaseExpression] = {}

    class Finder:
        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                for name, value in _paired_names(target.target, node.value):
                    found.setdefault(name, value)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            # `result: List[Record] = []`
            if type(node.target) is cst.Name and node.value is not None:
                found.setdefault(node.target.value, node.value)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

    dispatch(Finder(), body)
    return found


def _paired_names(target: cst.BaseExpression, value: cst.BaseExpression) -> list[tuple[str, cst.BaseExpression]]:
    """(name, value) for ``name = value``, and for each name of ``a, b = x, y`` (see paired_parts)."""
    if type(target) is cst.Name:
        return [(target.value, value)]
    return [(name.value, part) for name, part in paired_parts(target, value) or () if type(name) is cst.Name]


def _self_attributes_backwarded(func: cst.FunctionDef) -> set[str]:
    """The ``self.x`` a backward in ``func`` reads, through its plain local assignments."""
    values: dict[str, list[cst.BaseExpression]] = {}
    targets: list[cst.BaseExpression] = []
    stack = list(_body_statements(func))
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.FunctionDef or kind is cst.ClassDef or kind is cst.Lambda:
            continue
        if kind is cst.Assign and len(node.targets) == 1 and type(node.targets[0].target) is cst.Name:
            values.setdefault(node.targets[0].target.value, []).append(node.value)
        elif kind is cst.Call and type(node.func) is cst.Attribute:
            if node.func.attr.value in ("backward", "manual_backward"):
                # `loss.backward()`, `accelerator.backward(loss)`: the receiver or the argument.
                targets.append(node.func.value)
                targets.extend(arg.value for arg in node.args[:1] if arg.keyword is None)
        stack.extend(children(node))
    found: set[str] = set()
    seen: set[str] = set()
    while targets:
        expr = targets.pop()
        for node in _attribute_reads(expr):
            if type(node) is cst.Attribute:
                if type(node.value) is cst.Name and node.value.value == "self":
                    found.add(node.attr.value)
            elif node.value not in seen:
                seen.add(node.value)
                targets.extend(values.get(node.value, ()))
    return found


def _attribute_reads(expr: cst.CSTNode):
    """The names and ``self.x`` attributes an expression reads."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if type(node) is cst.Name:
            yield node
        elif type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == "self":
            yield node
        else:
            if type(node) is cst.Attribute:
                stack.append(node.value)
                continue
            stack.extend(children(node))
