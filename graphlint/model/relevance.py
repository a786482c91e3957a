"""Which scopes can lead to a fact, so that only they are analysed as entry points.

Every function of a file is an entry point of its own (library code that
nothing in the file calls), but most functions of a real codebase cannot
produce anything a rule reads: no backward, no optimizer hyperparameter, no
accumulation in a loop. Solving them, with their helpers inlined, was most of
the analysis time on library files. A scope is analysed when its own code
spells a trigger, or calls, by name, a function or method of this file whose
code does (transitively): a helper analysed inside its caller sees the same
triggers.

The test is syntactic and deliberately wide, like the prefilter's needles
(graphlint/prefilter.py): a scope that can reach a backward or a
hyperparameter write is always kept. For GL005 without a backward it asks
for more than the analysis does: a call of a module the analysis knows (a
class of this file, a constructed torch module) or a leaf tensor, a loop,
an accumulation, and a spelling of a training or evaluation loop
(`model.eval()`, `.train(False)`, `zero_grad`) in the scope or in what it
calls. A scope it drops can then still record an accumulation fed by a
weaker forward, or by a forward no such code runs; on the corpus every such
finding was a module's own forward collecting its outputs (a false
positive: kornia's ViT, a stacked encoder returning its per-layer lists),
which is why the gate asks for more, not less. An evaluation helper whose
caller switches the mode is analysed inside that caller, with the module the
caller passes. tests/test_relevance.py holds every fixture to the same
findings with and without the gate, GL005 of clean fixtures excepted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graphlint.model import syntax as cst

from graphlint.model.cfg import grad_mode_of_with
from graphlint.model.names import CONTAINER_ADDS, LIST_ADDS, dotted, is_module_housekeeping
from graphlint.model.program import MODULE, PARAM_GROUP, Program, Scope
from graphlint.model.walk import children
from graphlint.prefilter import NEEDLES

# Spellings of a backward (GL001, GL002, and GL005's training loops), of an
# optimizer step (GL003) and of a hyperparameter write (GL004).
_BACKWARD_WORDS = NEEDLES["GL001"].names
_BACKWARD_PARTS = NEEDLES["GL001"].name_parts
_STEP_WORDS = frozenset({"step"})
# `defaults` is a common attribute name elsewhere: only a write to it counts
# (`opt.defaults[k] = v`, `opt.defaults.update(...)`).
_HYPERPARAMETER_WORDS = NEEDLES["GL004"].names - {"defaults"}
# Words that announce a training or evaluation loop (`model.eval()`, `zero_grad`):
# without one, a scope and what it calls run no loop GL005 reports without a backward.
_LOOP_WORDS = NEEDLES["GL005"].names
_LOOP_PARTS = NEEDLES["GL005"].name_parts
# Spellings of a tensor that requires grad (a leaf: graph-bearing from the start).
_LEAF_WORDS = frozenset({"requires_grad", "requires_grad_", "Parameter", "autograd"})
# Methods that add to their receiver, on any receiver (calls.py asks more of the generic ones).
_ADDING_METHODS = LIST_ADDS | CONTAINER_ADDS
# Methods a call of an instance runs, whatever the instance is called.
_CALLED_ON_INSTANCES = ("forward", "__call__")


@dataclass
class Spelled:
    """What one scope's own code spells (nested functions and classes excluded)."""

    # Names and attribute names used: a function of the file named here may be
    # called here, directly or as a callback (`optimizer.step(closure)`).
    words: set[str] = field(default_factory=set)
    loop: bool = False
    accumulation: bool = False
    calls: bool = False
    defaults_write: bool = False
    forward: bool = False  # builds a leaf that requires grad
    called: set[str] = field(default_factory=set)  # dotted callees and arguments
    called_methods: set[tuple[str, str]] = field(default_factory=set)  # (owner, method)
    # (name, owner, in a no-grad block) for each use of a name that may run a
    # function of the file: `f(...)`, `self.f(...)`, `obj.f(...)`, and a bare `f`
    # or `self.f` handed on (a callback runs where its receiver decides: never
    # in a no-grad block). Owner: None for a plain name, "self", or "?" for any
    # other object.
    uses: list[tuple[str, str | None, bool]] = field(default_factory=list)


@dataclass(frozen=True)
class Relevant:
    """The scopes worth analysing as entry points, for each analysis."""

    provenance: frozenset[cst.CSTNode]  # GL001, GL002, GL004, GL005
    order: frozenset[cst.CSTNode]  # GL003: those that reach both a step and a backward


def relevant_scopes(program: Program, spelled: dict[cst.CSTNode, Spelled]) -> Relevant:
    group_words = _param_group_words(program)
    # `from torch.autograd import grad`: the call is spelled `grad(...)`.
    backward_words = _BACKWARD_WORDS | {
        local for local, full in program.imports.aliases.items() if any(part in full for part in _BACKWARD_PARTS)
    }

    def backward_trigger(s: Spelled) -> bool:
        return bool(s.words & backward_words) or _spells_a_part(s, _BACKWARD_PARTS)

    def hyperparameter_trigger(s: Spelled) -> bool:
        return bool(s.words & (_HYPERPARAMETER_WORDS | group_words)) or s.defaults_write

    triggered = _spelling(spelled, lambda s: backward_trigger(s) or hyperparameter_trigger(s))
    provenance = _closure(program, spelled, triggered)
    # GL005 without a backward: an accumulation in a loop that runs a forward
    # GL005 can be sure of (a module of this file, a leaf tensor), in code that
    # announces a training or evaluation loop (`model.eval()`, `zero_grad`). The
    # four may sit in different helpers: each is looked for through named scopes.
    announcing = _spelling(spelled, _announces_a_loop)
    if announcing:
        for node, scope in program.scopes.items():
            spelled[node].forward = spelled[node].forward or _runs_module(program, scope, spelled[node])
        forward = _closure(program, spelled, _spelling(spelled, lambda s: s.forward))
        loop = _closure(program, spelled, _spelling(spelled, lambda s: s.loop))
        accumulation = _closure(program, spelled, _spelling(spelled, lambda s: s.accumulation))
        announced = _closure(program, spelled, announcing)
        provenance |= _closure(program, spelled, forward & loop & accumulation & announced)
    # GL003 reads the order of a step and the backwards it applies: a scope that
    # cannot reach both has nothing to order (its zero_grads and unknown calls
    # alone clear nothing that a step applies).
    steps = _closure(program, spelled, _spelling(spelled, lambda s: bool(s.words & _STEP_WORDS)))
    backwards = _closure(program, spelled, _spelling(spelled, backward_trigger))
    return Relevant(provenance=provenance, order=steps & backwards)


def _announces_a_loop(s: Spelled) -> bool:
    """Spells a training or evaluation loop's housekeeping (the prefilter's GL005 needle)."""
    return bool(s.words & _LOOP_WORDS) or _spells_a_part(s, _LOOP_PARTS)


def _spells_a_part(s: Spelled, parts) -> bool:
    """A part of an import path (`autograd`) as a name or a component of a dotted one
    (`torch.autograd.grad`, `import torch.autograd`), not inside a name of the code's
    own: torchani's `_calc_needs_autograd` runs no backward."""
    return any(part in word and part in word.split(".") for word in s.words for part in parts)


def _spelling(spelled: dict, trigger) -> set:
    """The scopes whose own code spells a trigger."""
    return {node for node, s in spelled.items() if trigger(s)}


def _closure(program: Program, spelled: dict, seeds) -> frozenset:
    """The seed scopes, and every scope that names (transitively) one of them."""
    relevant = set(seeds)
    changed = True
    while changed:
        changed = False
        names: set[str] = set()
        implicit = False
        for node in relevant:
            scope = program.scopes[node]
            name = scope.key.rpartition(".")[2]
            names.add(name)
            if name == "__init__" and scope.cls is not None:
                names.add(scope.cls.name)  # run by `Cls(...)`
            elif name in _CALLED_ON_INSTANCES:
                implicit = True  # run by calling an instance, under any name
        for node, s in spelled.items():
            if node not in relevant and (s.words & names or (implicit and s.calls)):
                relevant.add(node)
                changed = True
    return frozenset(relevant)


def _param_group_words(program: Program) -> set[str]:
    """Last parts of every path holding a parameter group (``for g in opt.param_groups``)."""
    return {path.rpartition(".")[2] for path in program.paths_of_kind(PARAM_GROUP)}


def spell_scopes(program: Program) -> dict[cst.CSTNode, Spelled]:
    """What each scope of the program spells (read by relevant_scopes and callers.py)."""
    return {node: _spell(scope) for node, scope in program.scopes.items()}


class _GradMode:
    """Pushed below a ``with`` block's children: popped, it restores the mode around the block."""

    __slots__ = ("no_grad",)

    def __init__(self, no_grad: bool) -> None:
        self.no_grad = no_grad


def _spell(scope: Scope) -> Spelled:
    # Exact type tests (all these node classes are final): the cheapest test.
    found = Spelled()
    uses = found.uses
    no_grad = False
    stack = list(scope.body)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.Name:
            found.words.add(node.value)
            uses.append((node.value, None, False))
            continue  # a leaf, for what is spelled
        if kind is cst.FunctionDef or kind is cst.ClassDef:
            continue  # a scope of its own (reached through its name)
        if kind is _GradMode:
            no_grad = node.no_grad
            continue
        if kind is cst.Attribute:
            found.words.add(node.attr.value)
            uses.append((node.attr.value, _owner(node.value), False))
        elif kind is cst.Call:
            _spell_call(node, found)
            func = node.func
            # The callee is a call's use, not a reference handed on.
            if type(func) is cst.Name:
                found.words.add(func.value)
                uses.append((func.value, None, no_grad))
            elif type(func) is cst.Attribute:
                found.words.add(func.attr.value)
                uses.append((func.attr.value, _owner(func.value), no_grad))
                stack.append(func.value)
            else:
                stack.append(func)
            stack.extend(child for child in children(node) if child is not func)
            continue
        elif kind is cst.With:
            inside = grad_mode_of_with(node, no_grad)
            if inside != no_grad:
                stack.append(_GradMode(no_grad))
                no_grad = inside
        elif kind is cst.Subscript:
            # Over-wide (reads count too), but cheap and never misses a write.
            found.defaults_write |= _is_defaults(node.value)
        elif kind is cst.For or kind is cst.While:
            found.loop = True
        elif kind is cst.AugAssign or (kind is cst.Assign and type(node.value) is cst.BinaryOperation):
            found.accumulation = True
        stack.extend(children(node))
    found.forward = bool(found.words & _LEAF_WORDS)
    return found


def _owner(receiver: cst.BaseExpression) -> str:
    """A method's receiver as callers.py tells them apart: "self", or "?" for any other object."""
    return "self" if type(receiver) is cst.Name and receiver.value == "self" else "?"


def _spell_call(node: cst.Call, found: Spelled) -> None:
    found.calls = True
    func = node.func
    # The callee, and what is passed in: a module handed to a helper runs there.
    for expr in (func, *(arg.value for arg in node.args)):
        path = dotted(expr)
        if path is not None:
            found.called.add(path)
    if type(func) is cst.Attribute:
        method = func.attr.value
        if not is_module_housekeeping(method, node):
            # `model.generate(x)` on a module runs a forward (its own methods
            # defined in this file are reached through their names instead).
            owner = dotted(func.value)
            if owner is not None:
                found.called_methods.add((owner, method))
        if method in _ADDING_METHODS:
            found.accumulation = True
            found.defaults_write |= _is_defaults(func.value)


def _runs_module(program: Program, scope: Scope, spelled: Spelled) -> bool:
    """Whether the scope calls a module, or hands one to a call (a forward the analysis is sure of)."""
    def is_module(path: str) -> tuple[bool, object]:
        kinds = program.kinds(scope, path)
        cls = program.class_of_instance(kinds) if kinds else None
        return MODULE in kinds or (cls is not None and cls.is_module), cls

    if any(is_module(path)[0] for path in spelled.called):
        return True
    for owner, method in spelled.called_methods:
        module, cls = is_module(owner)
        if module and (cls is None or program.method(cls, method) is None):
            return True
    return False


def _is_defaults(expr: cst.BaseExpression) -> bool:
    return type(expr) is cst.Attribute and expr.attr.value == "defaults"
