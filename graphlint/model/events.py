"""Events of a training loop and the one recogniser for their spellings.

Every spelling RULES.md lists for a backward, a step and a zero_grad is
recognised in ``recognise``; nothing else in graphlint matches these names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from graphlint.model import syntax as cst

from graphlint.model.names import STRING_LITERALS, ZERO_GRAD_METHODS, dotted, is_false, is_true, keyword, positional
from graphlint.model.program import ACCELERATOR, CLEARING_ENGINE, MODULE, OPTIMIZER, SCALER

Origin = tuple[int, bool]


# ----- recognised call events -----
@dataclass(frozen=True)
class BackwardCall:
    call: cst.Call
    target: cst.BaseExpression  # the expression whose graph is walked
    retain: bool  # True when the graph may be kept (retain_graph true, unknown, or create_graph)
    writes_grad: bool  # autograd.grad returns gradients instead of writing .grad
    spelling: str
    # `inputs`: the walk stops there, so their own history is neither walked nor freed.
    inputs: cst.BaseExpression | None = None


@dataclass(frozen=True)
class StepCall:
    call: cst.Call
    optimizer: cst.BaseExpression
    closure: cst.BaseExpression | None
    spelling: str


@dataclass(frozen=True)
class ZeroGradCall:
    call: cst.Call
    owner: cst.BaseExpression  # an optimizer or a model
    spelling: str


def _retain(call: cst.Call, retain_position: int | None) -> bool:
    if any(arg.star for arg in call.args):
        return True  # `**kwargs` / `*args` may carry retain_graph=True: unknown, so maybe
    retain = keyword(call, "retain_graph")
    if retain is None and retain_position is not None:
        args = positional(call)
        if len(args) > retain_position:
            retain = args[retain_position]
    create = keyword(call, "create_graph")
    if retain is None:
        # retain_graph defaults to create_graph.
        return create is not None and not is_false(create)
    # Anything but a literal False/None may be true at run time.
    return not is_false(retain)


def recognise(
    call: cst.Call,
    kinds: Callable[[cst.BaseExpression], set[str]],
    qualify: Callable[[cst.BaseExpression], str | None],
    backwards_itself: Callable[[cst.BaseExpression, cst.BaseExpression], bool] | None = None,
):
    """The event a call is, if any: BackwardCall, StepCall, ZeroGradCall or None.

    ``backwards_itself(owner, gradient)`` tells whether ``owner.backward(gradient)``
    backwards a tensor ``owner`` (None: no values known, as in a syntactic pass).
    """
    func = call.func
    args = positional(call)
    qualified = qualify(func) or ""
    if qualified in ("torch.autograd.backward", "torch.autograd.grad"):
        target = keyword(call, "tensors") or keyword(call, "outputs") or (args[0] if args else None)
        if target is None:
            return None
        is_grad = qualified.endswith(".grad")
        inputs = keyword(call, "inputs") or (args[1] if is_grad and len(args) > 1 else None)
        return BackwardCall(call, target, _retain(call, 3 if is_grad else 2), not is_grad, qualified, inputs)
    if type(func) is not cst.Attribute:
        return None
    method = func.attr.value
    owner = func.value
    if method == "backward":
        owner_kinds = kinds(owner)
        wrapper = bool(owner_kinds & {ACCELERATOR, OPTIMIZER, CLEARING_ENGINE}) or (
            bool(args)
            and not (backwards_itself is not None and backwards_itself(owner, args[0]))
            and not _looks_like_tensor_expr(owner)
        )
        if wrapper and args:
            return BackwardCall(call, args[0], _retain(call, None), True, f"{dotted(owner) or '...'}.backward(...)")
        return BackwardCall(call, owner, _retain(call, 1), True, ".backward()", keyword(call, "inputs"))
    if method == "manual_backward" and args:
        return BackwardCall(call, args[0], _retain(call, None), True, "manual_backward(...)")
    if method == "step":
        owner_kinds = kinds(owner)
        if SCALER in owner_kinds and args:
            return StepCall(call, args[0], None, f"{dotted(owner) or 'scaler'}.step(...)")
        if OPTIMIZER in owner_kinds:
            closure = keyword(call, "closure") or (args[0] if args else None)
            return StepCall(call, owner, closure, f"{dotted(owner) or 'optimizer'}.step()")
        return None
    if method in ZERO_GRAD_METHODS:
        if args and OPTIMIZER in kinds(args[0]):
            # `strategy.zero_grad(optimizer)` (ludwig's distributed strategies): a helper
            # clearing the optimizer it is handed, as `scaler.step(optimizer)` steps it.
            return ZeroGradCall(call, args[0], f"{dotted(owner) or '...'}.zero_grad(...)")
        return ZeroGradCall(call, owner, f"{dotted(owner) or '...'}.{method}()")
    return None


def _looks_like_tensor_expr(expr: cst.BaseExpression) -> bool:
    """``scaler.scale(loss)``, ``(a + b)``, ``loss.mean()``, ``losses[0]``: a tensor, not a
    wrapper object. An item looked up by name (``optim_wrapper["disc"]``, mmengine's
    wrappers by model part) may be either: the values decide (see recognise)."""
    if type(expr) is cst.Subscript:
        return not (len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index
                    and type(expr.slice[0].slice.value) in STRING_LITERALS)
    return type(expr) in (cst.Call, cst.BinaryOperation, cst.UnaryOperation)


# ----- facts recorded by the provenance pass -----
@dataclass
class Backward:
    call: cst.Call
    spelling: str
    value: frozenset
    retain: bool
    writes_grad: bool
    freed_hits: dict  # origin -> the earlier backward call that freed it
    stepped_hits: dict  # origin -> the step call that modified its saved parameters
    loop: tuple | None
    roots: frozenset  # sites whose value this backward was called on
    read: frozenset = frozenset()  # the variables its target reads (`loss` in `loss.mean().backward()`)
    loops: tuple = ()  # every loop around it, outermost first (``loop`` is the last)


@dataclass
class CarriedState:
    """A forward call consuming a value its own previous execution produced."""

    call: cst.Call
    origin: Origin
    freed_by: cst.CSTNode | None
    traversed_by: cst.CSTNode | None
    path: str | None
    loop: tuple | None
    argument: cst.BaseExpression
    loops: tuple = ()
    carried_value: frozenset = frozenset()  # every origin the state brings along


@dataclass
class Accumulation:
    stmt: cst.CSTNode
    target: cst.BaseExpression
    path: str
    added: frozenset
    site: int
    loop: tuple | None
    outlives_iteration: bool  # of ``loop``: not re-created since the iteration began
    no_grad: bool
    kind: str = "add"  # add | append
    loops: tuple = ()  # every enclosing loop key, outermost first (``loop`` is the last)
    outlived: tuple = ()  # the keys of ``loops`` whose iterations the accumulator outlives
    sources: frozenset = frozenset()  # the variables the added value was read from


@dataclass
class HyperparameterWrite:
    stmt: cst.CSTNode
    target: cst.CSTNode
    value: frozenset
    loop: tuple | None
    key: str | None = None


__all__ = [
    "BackwardCall", "StepCall", "ZeroGradCall", "recognise", "Backward", "CarriedState",
    "Accumulation", "HyperparameterWrite", "MODULE", "is_true",
]
