"""GL004: cut the graph in the value assigned to an optimizer hyperparameter.

``g["lr"] = expr`` becomes ``g["lr"] = float(expr)``; a tuple value
(``betas``) gets ``float(...)`` around each element that is not a plain
number; ``g.update(lr=expr)`` wraps each keyword value. The value is a
scalar tensor (a hyperparameter), so ``float`` gives the number the
optimizer expected: safe.
"""

from __future__ import annotations

import libcst

from graphlint.finding import Finding
from graphlint.fix.document import Document
from graphlint.fix.edits import SAFE, Fix


def fix(finding: Finding, document: Document) -> Fix | None:
    values = _assigned_values(finding, document)
    if not values:
        return None
    edits = []
    for value in values:
        for part in _parts(value):
            if _is_number(part) or _already_cut(part):
                continue
            edits.extend(document.wrap_in(part, "float"))
    if not edits:
        return None
    return Fix("Assign a number: wrap the graph-carrying value in `float(...)`", SAFE, tuple(edits))


def _assigned_values(finding: Finding, document: Document) -> list[libcst.BaseExpression]:
    for assign in document.nodes_at(finding.line, finding.col, libcst.Assign):
        if len(assign.targets) == 1 and isinstance(assign.targets[0].target, libcst.Subscript):
            return [assign.value]
    for expr in document.nodes_at(finding.line, finding.col, libcst.Expr):
        call = expr.value
        if (
            isinstance(call, libcst.Call)
            and isinstance(call.func, libcst.Attribute)
            and call.func.attr.value == "update"
            and call.args
            and all(arg.keyword is not None for arg in call.args)
        ):
            return [arg.value for arg in call.args]
    return []


def _parts(value: libcst.BaseExpression) -> list[libcst.BaseExpression]:
    if isinstance(value, (libcst.Tuple, libcst.List)):
        if any(not isinstance(element, libcst.Element) for element in value.elements):
            return []  # a starred element: no clear shape
        return [element.value for element in value.elements]
    return [value]


def _is_number(value: libcst.BaseExpression) -> bool:
    if isinstance(value, (libcst.Integer, libcst.Float)):
        return True
    return isinstance(value, libcst.UnaryOperation) and _is_number(value.expression)


def _already_cut(value: libcst.BaseExpression) -> bool:
    if isinstance(value, libcst.Call):
        func = value.func
        if isinstance(func, libcst.Name) and func.value in ("float", "int"):
            return True
        if isinstance(func, libcst.Attribute) and func.attr.value == "item":
            return True
    return False
