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

from graphlint.model.program import Program
from graphlint.model.relevance import Spelled


def only_called_without_grad(program: Program, spelled: dict[cst.CSTNode, Spelled]) -> frozenset[cst.CSTNode]:
    """The function nodes every in-file call of which runs without gradients
    (``spelled``: relevance.spell_scopes, whose ``uses`` say where each call sits)."""
    by_method: dict[str, list[cst.CSTNode]] = {}
    for info in program.classes.values():
        for name, method in info.methods.items():
            by_method.setdefault(name, []).append(method)
    # callee node -> [(calling scope node, the call sits in a no-grad block)]
    calls: dict[cst.CSTNode, list[tuple[cst.CSTNode, bool]]] = {}
    for node, scope in program.scopes.items():
        for name, owner, quiet in spelled[node].uses:
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
