"""What shape a recurrent state has, read off the code that builds it.

A shape is ``TENSOR``, ``NONE``, a tuple of shapes, or ``None`` when the
code does not say. Sources: tensor factories (``torch.zeros``,
``weight.new_zeros``), tuple literals, helpers of the file (``init_hidden``)
through their returns, and the outputs of ``torch.nn`` recurrent modules
(``nn.LSTM`` returns ``(output, (h, c))``) or of modules defined in the file
through their ``forward``.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst

from graphlint.fix.document import Document, function_defs

TENSOR = "tensor"
NONE = "none"

_FACTORIES = {
    "zeros",
    "ones",
    "empty",
    "full",
    "rand",
    "randn",
    "randint",
    "tensor",
    "as_tensor",
    "zeros_like",
    "ones_like",
    "empty_like",
    "full_like",
    "rand_like",
    "randn_like",
    "new_zeros",
    "new_ones",
    "new_empty",
    "new_full",
    "new_tensor",
}
# What calling each torch.nn recurrent module returns.
_MODULE_OUTPUTS = {
    "LSTM": (TENSOR, (TENSOR, TENSOR)),
    "GRU": (TENSOR, TENSOR),
    "RNN": (TENSOR, TENSOR),
    "LSTMCell": (TENSOR, TENSOR),
    "GRUCell": TENSOR,
    "RNNCell": TENSOR,
}
_DEPTH = 6


@dataclass(frozen=True)
class MaybeNone:
    """A state that starts as None (``h = None``) and is a ``shape`` afterwards."""

    shape: object


class Shapes:
    def __init__(self, document: Document) -> None:
        self.document = document

    # -- a state by name -----------------------------------------------------------
    def of_target(self, target: libcst.BaseExpression, scope: libcst.CSTNode, depth: int = 0):
        """The one shape every assignment of ``target`` in ``scope`` agrees on (NONE allowed besides it)."""
        if depth > _DEPTH:
            return None
        known = set()
        for value_shape in self._assigned_shapes(target, scope, depth):
            if value_shape is not None:
                known.add(value_shape)
        optional = NONE in known
        known.discard(NONE)
        if len(known) != 1:
            return None
        (shape,) = known
        return MaybeNone(shape) if optional else shape

    def _assigned_shapes(self, target, scope, depth):
        for node in self.document.walk(scope):
            if isinstance(node, libcst.Assign):
                for assign_target in node.targets:
                    path = _path_to(target, assign_target.target)
                    if path is not None:
                        yield _select(self.of_expr(node.value, depth + 1, node), path)
            elif isinstance(node, (libcst.AnnAssign,)) and node.value is not None:
                path = _path_to(target, node.target)
                if path is not None:
                    yield _select(self.of_expr(node.value, depth + 1, node), path)

    # -- an expression -------------------------------------------------------------
    def of_expr(self, value: libcst.BaseExpression, depth: int = 0, where: libcst.CSTNode | None = None):
        if depth > _DEPTH:
            return None
        if isinstance(value, libcst.Name) and value.value == "None":
            return NONE
        if isinstance(value, libcst.Tuple):
            parts = []
            for element in value.elements:
                if not isinstance(element, libcst.Element):
                    return None
                parts.append(self.of_expr(element.value, depth + 1, where))
            return tuple(parts)
        if isinstance(value, libcst.Call):
            name = _callee_name(value.func)
            if name in _FACTORIES:
                return TENSOR
            if isinstance(value.func, libcst.Attribute) and name in (
                "detach",
                "clone",
                "to",
                "cuda",
                "cpu",
                "contiguous",
            ):
                return TENSOR if not isinstance(value.func.value, libcst.Tuple) else None
            module_output = self._module_output(value.func, depth)
            if module_output is not None:
                return module_output
            return self._returned(name, depth)
        return None

    def _returned(self, function_name: str | None, depth: int):
        """The shape every return of the file's function ``function_name`` agrees on."""
        if not function_name:
            return None
        definitions = function_defs(self.document, function_name)
        if len(definitions) != 1:
            return None
        shapes = set()
        for node in self.document.walk(definitions[0].body):
            if isinstance(node, libcst.Return):
                if node.value is None:
                    return None
                shape = self.of_expr(node.value, depth + 1, node)
                if shape is None and isinstance(node.value, (libcst.Name, libcst.Attribute)):
                    shape = self.of_target(node.value, definitions[0], depth + 1)
                shapes.add(shape)
        if len(shapes) != 1 or None in shapes:
            return None
        return shapes.pop()

    def _module_output(self, callee: libcst.BaseExpression, depth: int):
        """What calling ``callee`` returns when it names a recurrent torch module or a module of this file."""
        if not isinstance(callee, (libcst.Name, libcst.Attribute)):
            return None
        outputs = set()
        for node in self.document.walk():
            if isinstance(node, libcst.Assign) and isinstance(node.value, libcst.Call):
                if any(t.target.deep_equals(callee) for t in node.targets):
                    class_name = _callee_name(node.value.func)
                    if class_name in _MODULE_OUTPUTS:
                        outputs.add(_MODULE_OUTPUTS[class_name])
                    elif class_name:
                        outputs.add(self._forward_output(class_name, depth))
        if not outputs and isinstance(callee, libcst.Name) and self._is_parameter_only(callee.value):
            # `model` is a parameter (`def train(model, ...)`): when the file defines exactly
            # one module with a forward, that is the model it trains.
            outputs.add(self._only_forward_output(depth))
        if len(outputs) != 1:
            return None
        return outputs.pop()

    def _is_parameter_only(self, name: str) -> bool:
        """A parameter of some function of the file, and not a function or class of it."""
        parameter = False
        for node in self.document.walk():
            if isinstance(node, (libcst.FunctionDef, libcst.ClassDef)) and node.name.value == name:
                return False
            if isinstance(node, libcst.Param) and node.name.value == name:
                parameter = True
        return parameter

    def _only_forward_output(self, depth: int):
        classes = [
            node.name.value
            for node in self.document.walk()
            if isinstance(node, libcst.ClassDef)
            and any(isinstance(n, libcst.FunctionDef) and n.name.value == "forward" for n in node.body.body)
        ]
        return self._forward_output(classes[0], depth) if len(classes) == 1 else None

    def _forward_output(self, class_name: str, depth: int):
        classes = [n for n in self.document.walk() if isinstance(n, libcst.ClassDef) and n.name.value == class_name]
        if len(classes) != 1:
            return None
        forwards = [n for n in classes[0].body.body if isinstance(n, libcst.FunctionDef) and n.name.value == "forward"]
        if len(forwards) != 1:
            return None
        shapes = set()
        for node in self.document.walk(forwards[0].body):
            if isinstance(node, libcst.Return) and node.value is not None:
                shapes.add(self._returned_value(node.value, forwards[0], depth + 1))
        return shapes.pop() if len(shapes) == 1 else None

    def _returned_value(self, value, function, depth):
        if isinstance(value, libcst.Tuple):
            parts = []
            for element in value.elements:
                if not isinstance(element, libcst.Element):
                    return None
                parts.append(self._returned_value(element.value, function, depth + 1))
            return tuple(parts)
        shape = self.of_expr(value, depth, function)
        if shape is None and isinstance(value, (libcst.Name, libcst.Attribute)):
            shape = self.of_target(value, function, depth + 1)
        return shape


def _callee_name(func: libcst.BaseExpression) -> str | None:
    if isinstance(func, libcst.Name):
        return func.value
    if isinstance(func, libcst.Attribute):
        return func.attr.value
    return None


def _path_to(target, assigned) -> tuple[int, ...] | None:
    """Where ``target`` sits in an assignment target: () for itself, (1, 0) inside ``out, (h, c)``."""
    if assigned.deep_equals(target):
        return ()
    if isinstance(assigned, (libcst.Tuple, libcst.List)):
        for index, element in enumerate(assigned.elements):
            if isinstance(element, libcst.StarredElement):
                return None
            inner = _path_to(target, element.value)
            if inner is not None:
                return (index,) + inner
    return None


def _select(shape, path: tuple[int, ...]):
    for index in path:
        if not isinstance(shape, tuple) or index >= len(shape):
            return None
        shape = shape[index]
    return shape


def is_all_tensors(shape) -> bool:
    if shape == TENSOR:
        return True
    return isinstance(shape, tuple) and bool(shape) and all(is_all_tensors(part) for part in shape)
