"""Functions of a file that only ever run with gradients disabled.

Every function is analysed as an entry point of its own, as if anything could
call it with gradients on. When the file itself calls a function, and every
one of those calls runs under ``torch.no_grad()`` / ``inference_mode()`` (a
``with`` block, a decorated caller, or a caller that is itself only called
that way), the function is analysed as its callers run it: with no graph.
A feature-stacking helper whose only caller is ``@torch.inference_mode()``
collects no history. A function the file never calls keeps the wide view.
"""

from __future__ import annotations

import libcst as cst

from graphlint.model.cfg import grad_mode_of_with
from graphlint.model.program import Program
from graphlint.model.walk import children


def only_called_without_grad(program: Program) -> frozenset[cst.CSTNode]:
    """The function nodes every in-file call of which runs without gradients."""
    by_method: dict[str, list[cst.CSTNode]] = {}
    for info in program.classes.values():
        for name, method in info.methods.items():
            by_method.setdefault(name, []).append(method)
    # callee node -> [(calling scope node, the call sits in a no-grad block)]
    calls: dict[cst.CSTNode, list[tuple[cst.CSTNode, bool]]] = {}
    for node, scope in program.scopes.items():
        for name, owner, quiet in _uses(scope.body):
            if owner == "self" and scope.cls is not None:
                found = program.method(scope.cls, name)
                callees = [found[1]] if found is not None else []
            elif owner is None:
                callees = [program.functions[name]] if name in program.functions else []
            else:
                # `trainer.fit(...)`, a callback handed over: any method of that name.
                callees = by_method.get(name, [])
            for callee in callees:
                if callee is not node:
                    calls.setdefault(callee, []).append((node, quiet))
    quiet = {node for node, scope in program.scopes.items() if scope.no_grad}
    changed = True
    while changed:
        changed = False
        for callee, sites in calls.items():
            if callee not in quiet and all(inside or caller in quiet for caller, inside in sites):
                quiet.add(callee)
                changed = True
    return frozenset(quiet)


def _uses(body) -> list[tuple[str, str | None, bool]]:
    """(name, owner, in a no-grad block) for each use of a name that may run a function
    of the file: ``f(...)``, ``self.f(...)``, ``obj.f(...)`` and a bare ``f`` or
    ``self.f`` handed on (a callback runs where its receiver decides: never quiet).
    Owner: None for a plain name, "self", or "?" for any other object."""
    found = []
    stack = [(stmt, False) for stmt in body]
    while stack:
        node, quiet = stack.pop()
        if type(node) in (cst.FunctionDef, cst.ClassDef):
            continue
        if type(node) is cst.With:
            quiet = grad_mode_of_with(node, quiet)
        elif type(node) is cst.Call:
            func = node.func
            if type(func) is cst.Name:
                found.append((func.value, None, quiet))
            elif type(func) is cst.Attribute:
                found.append((func.attr.value, "self" if _is_self(func.value) else "?", quiet))
                stack.append((func.value, quiet))
            else:
                stack.append((func, quiet))
            stack.extend((child, quiet) for child in children(node) if child is not func)
            continue
        elif type(node) is cst.Name:
            found.append((node.value, None, False))
        elif type(node) is cst.Attribute:
            found.append((node.attr.value, "self" if _is_self(node.value) else "?", False))
        stack.extend((child, quiet) for child in children(node))
    return found


def _is_self(expr: cst.BaseExpression) -> bool:
    return type(expr) is cst.Name and expr.value == "self"
