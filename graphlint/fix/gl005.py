"""GL005: accumulate a graph-free value.

``total += loss`` becomes ``total += loss.item()`` when the accumulator is a
Python number that is never used as a tensor (``total.item()``), so it
stays one, else ``total += loss.detach()``;
``losses.append(loss)`` becomes ``losses.append(loss.detach())``;
``running = running + loss`` detaches the operand that is not the
accumulator. The fix is safe, except where the accumulated value comes from
the enclosing function's parameters (an ``AverageMeter.update(val)``): other
callers may pass numbers, on which ``.detach()`` fails, so it is unsafe there.
"""

from __future__ import annotations

import libcst

from graphlint.finding import Finding
from graphlint.fix.document import Document
from graphlint.fix.edits import SAFE, UNSAFE, Fix
from graphlint.model.names import receiver_in_place, written_in_place

_APPENDERS = ("append", "add", "extend")
_NUMBER_FACTORIES = ("float", "int")


def fix(finding: Finding, document: Document) -> Fix | None:
    statement = _statement_at(finding, document)
    if statement is None:
        return None
    accumulator, value = _accumulator_and_value(statement)
    if value is None or _already_cut(value) or _feeds_computation(accumulator, statement, document):
        return None
    if isinstance(value, _NO_TENSOR_DISPLAYS) or _builds_a_container(value) or _names_a_container(value, statement, document):
        # `stats.append((loss, part))`, `params += [{...}]`: a tuple, list, dict or
        # string has no `.detach()`; which of its items to cut is the author's call.
        return None
    if isinstance(statement, libcst.Expr) or (isinstance(statement, libcst.Assign) and statement.value is value):
        # losses.append(loss), losses[i] = loss: the container stays one of tensors
        method = "detach"
    else:
        method = "item" if _holds_a_number(accumulator, statement, document) else "detach"
    applicability = UNSAFE if _uses_parameters(value, statement, document) else SAFE
    return Fix(
        f"Accumulate `{document.appended(value, f'.{method}()')}` instead of the graph-carrying value",
        applicability,
        tuple(document.append_to(value, f".{method}()")),
    )


def _statement_at(finding: Finding, document: Document):
    for kind in (libcst.AugAssign, libcst.Assign, libcst.Expr):
        nodes = document.nodes_at(finding.line, finding.col, kind)
        if nodes:
            return nodes[0]
    return None


def _accumulator_and_value(statement) -> tuple[libcst.BaseExpression | None, libcst.BaseExpression | None]:
    if isinstance(statement, libcst.AugAssign) and isinstance(statement.operator, libcst.AddAssign):
        return statement.target, statement.value
    if isinstance(statement, libcst.Assign) and len(statement.targets) == 1:
        target = statement.targets[0].target
        value = statement.value
        if isinstance(value, libcst.BinaryOperation) and isinstance(value.operator, libcst.Add):
            if target.deep_equals(value.left):
                return target, value.right
            if target.deep_equals(value.right):
                return target, value.left
            # d[k] = d.get(k, 0) + loss: the accumulator is read through a call
            return target, value.right
        if isinstance(target, libcst.Subscript):
            return target, value  # history[epoch] = loss: a slot per iteration
        return None, None
    if isinstance(statement, libcst.Expr):
        call = statement.value
        if (
            isinstance(call, libcst.Call)
            and isinstance(call.func, libcst.Attribute)
            and call.func.attr.value in _APPENDERS
            and len(call.args) == 1
            and not call.args[0].star
            and call.func.attr.value != "extend"
        ):
            return call.func.value, call.args[0].value
        method, operand = written_in_place(call)
        if method == "add_":  # `smooth.mul_(0.98).add_(loss, alpha=0.02)`, `smooth.lerp_(loss, w)`
            return receiver_in_place(call.func), operand
    return None, None


_COMBINERS = ("stack", "cat", "concat", "hstack", "vstack", "sum", "mean", "backward")


def _feeds_computation(accumulator, statement, document: Document) -> bool:
    """In a module's ``forward``, per-step values combined (``torch.stack(outputs)``) or returned are its output.

    Detaching them would cut training, whatever the finding says: no fix.
    """
    function = document.enclosing(statement, libcst.FunctionDef)
    if accumulator is None or function is None or function.name.value != "forward":
        return False  # outside a module's forward, collected losses and predictions are history
    scope = function
    for node in document.walk(scope):
        if isinstance(node, libcst.Return) and node.value is not None:
            if any(n.deep_equals(accumulator) for n in document.walk(node.value)):
                return True
        if isinstance(node, libcst.Call):
            func = node.func
            name = func.attr.value if isinstance(func, libcst.Attribute) else getattr(func, "value", None)
            if name not in _COMBINERS:
                continue
            operands = [arg.value for arg in node.args]
            if isinstance(node.func, libcst.Attribute):
                operands.append(node.func.value)
            if any(n.deep_equals(accumulator) for operand in operands for n in document.walk(operand)):
                return True
    return False


# Calls returning a container, or a copy of a value of any type (`copy.copy(stats)`).
_CONTAINER_CALLS = frozenset({"dict", "list", "tuple", "set", "OrderedDict", "defaultdict", "copy", "deepcopy"})


def _builds_a_container(value: libcst.BaseExpression) -> bool:
    if not isinstance(value, libcst.Call):
        return False
    func = value.func
    name = func.attr.value if isinstance(func, libcst.Attribute) else func.value if isinstance(func, libcst.Name) else ""
    return name in _CONTAINER_CALLS


def _names_a_container(value: libcst.BaseExpression, statement, document: Document) -> bool:
    """A name some assignment of its scope binds to a container (`losses = {"mse": ...}`)."""
    if not isinstance(value, libcst.Name):
        return False
    for node in document.walk(_scope_for(value, statement, document)):
        if isinstance(node, libcst.Assign) and any(t.target.deep_equals(value) for t in node.targets):
            if isinstance(node.value, _NO_TENSOR_DISPLAYS) or _builds_a_container(node.value):
                return True
    return False


_NO_TENSOR_DISPLAYS = (
    libcst.List, libcst.Tuple, libcst.Dict, libcst.Set, libcst.ListComp, libcst.SetComp, libcst.DictComp,
    libcst.GeneratorExp, libcst.SimpleString, libcst.FormattedString, libcst.ConcatenatedString,
)


def _already_cut(value: libcst.BaseExpression) -> bool:
    if isinstance(value, libcst.Call):
        func = value.func
        if isinstance(func, libcst.Attribute) and func.attr.value in ("detach", "item", "tolist", "numpy"):
            return True
        if isinstance(func, libcst.Name) and func.value in ("float", "int", "bool"):
            return True
    return False


def _holds_a_number(accumulator, statement, document: Document) -> bool:
    """Every assignment of the accumulator (or of the dict it indexes) we can see sets a number."""
    if accumulator is None:
        return False
    container = isinstance(accumulator, libcst.Subscript)
    target = accumulator.value if container else accumulator
    scope = _scope_for(target, statement, document)
    values = []
    for node in document.walk(scope):
        if isinstance(node, libcst.Assign):
            for assign_target in node.targets:
                if assign_target.target.deep_equals(target):
                    values.append(node.value)
        elif isinstance(node, libcst.AnnAssign) and node.value is not None and node.target.deep_equals(target):
            values.append(node.value)
    if not values or _used_as_tensor(target, container, scope, document):
        return False
    if container:
        return all(_number_container(value) for value in values)
    return all(_number(value) for value in values)


def _used_as_tensor(target, container: bool, scope, document: Document) -> bool:
    """``total.item()`` or ``stats[k].cpu()`` later: the accumulator must stay a tensor."""
    for node in document.walk(scope):
        if isinstance(node, libcst.Attribute):
            base = node.value
            if container and isinstance(base, libcst.Subscript):
                base = base.value
            if base.deep_equals(target):
                return True
    return False


def _scope_for(target, statement, document: Document):
    """Where the accumulator is assigned: the class for ``self.x``, else the function, else the module."""
    if isinstance(target, libcst.Attribute) and isinstance(target.value, libcst.Name) and target.value.value == "self":
        return document.enclosing(statement, libcst.ClassDef) or document.module
    scope = document.scope_of(statement)
    return scope


def _number(value: libcst.BaseExpression) -> bool:
    if isinstance(value, (libcst.Integer, libcst.Float)):
        return True
    if isinstance(value, libcst.UnaryOperation):
        return _number(value.expression)
    if isinstance(value, libcst.Call) and isinstance(value.func, libcst.Name):
        return value.func.value in _NUMBER_FACTORIES
    return False


def _number_container(value: libcst.BaseExpression) -> bool:
    """``defaultdict(float)``, ``{"a": 0.0, ...}``, ``dict.fromkeys(keys, 0)``."""
    if isinstance(value, libcst.Dict):
        return bool(value.elements) and all(
            isinstance(element, libcst.DictElement) and _number(element.value) for element in value.elements
        )
    if isinstance(value, libcst.DictComp):
        return _number(value.value)
    if isinstance(value, libcst.Call):
        name = value.func.attr.value if isinstance(value.func, libcst.Attribute) else getattr(value.func, "value", "")
        if name == "defaultdict" and value.args:
            factory = value.args[0].value
            return isinstance(factory, libcst.Name) and factory.value in _NUMBER_FACTORIES
        if name == "fromkeys" and len(value.args) == 2:
            return _number(value.args[1].value)
    return False


def _uses_parameters(value, statement, document: Document) -> bool:
    function = document.enclosing(statement, libcst.FunctionDef)
    if function is None:
        return False
    parameters = {param.name.value for param in function.params.params + function.params.kwonly_params}
    parameters |= {param.name.value for param in function.params.posonly_params}
    parameters.discard("self")
    used = {node.value for node in document.walk(value) if isinstance(node, libcst.Name)}
    if not used & parameters:
        return False
    # A parameter rebound in the function before use (loss = criterion(...)) is a local value.
    rebound = set()
    for node in document.walk(function.body):
        if isinstance(node, libcst.AssignTarget) and isinstance(node.target, libcst.Name):
            rebound.add(node.target.value)
    return bool((used & parameters) - rebound)
