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

from graphlint.model import syntax as cst

from graphlint.model.names import bound_arguments
from graphlint.model.program import Program, attribute_assignments
from graphlint.model.relevance import Spelled
from graphlint.model.walk import children


def in_file_callers(program: Program, spelled: dict[cst.CSTNode, Spelled]) -> dict[cst.CSTNode, list[tuple[cst.CSTNode, bool, bool]]]:
    """Function node -> (calling scope node, the call sits in a no-grad block, the call
    names it only by its method name) for each use of it in the file that may call it
    (``spelled``: relevance.spell_scopes, whose ``uses`` say where each call sits). By
    name: wide, never missing a caller."""
    by_method: dict[str, list[cst.CSTNode]] = {}
    for info in program.classes.values():
        for name, method in info.methods.items():
            by_method.setdefault(name, []).append(method)
    calls: dict[cst.CSTNode, list[tuple[cst.CSTNode, bool, bool]]] = {}
    for node, scope in program.scopes.items():
        for name, owner, quiet in spelled[node].uses:
            by_name = False
            if owner == "self" and scope.cls is not None:
                found = program.method(scope.cls, name)
                callees = [found[1]] if found is not None else []
            elif owner is None:
                callees = [program.functions[name]] if name in program.functions else []
            else:
                # `trainer.fit(...)`, a callback handed over: any method of that name.
                callees, by_name = by_method.get(name, []), True
            for callee in callees:
                if callee is not node:
                    calls.setdefault(callee, []).append((node, quiet, by_name))
    return calls


def only_called_without_grad(
    program: Program, calls: dict[cst.CSTNode, list[tuple[cst.CSTNode, bool, bool]]]
) -> frozenset[cst.CSTNode]:
    """The function nodes every in-file call of which runs without gradients, one call at
    least naming it for sure (``calls``: in_file_callers). `gmm.fit(samples)` under
    `no_grad()` may call any method named `fit`, or none of the file's: alone, it does
    not make a trainer's `fit` (and what it calls) run without gradients."""
    quiet = {node for node, scope in program.scopes.items() if scope.no_grad}
    changed = True
    while changed:
        changed = False
        for callee, sites in calls.items():
            if (
                callee not in quiet
                and all(inside or caller in quiet for caller, inside, _ in sites)
                and not all(by_name for _, _, by_name in sites)
            ):
                quiet.add(callee)
                changed = True
    return frozenset(quiet)


def run_by_the_module_alone(program: Program, spelled: dict[cst.CSTNode, Spelled]) -> frozenset[cst.CSTNode]:
    """Functions without parameters that only the module body uses, and only by calling them.

    A script's ``if __name__ == "__main__": main()``: the module's analysis runs
    ``main`` in the state the module body leaves, which is everything main's own
    entry analysis would assume and more (main reads the module's globals, and
    has no parameter an entry analysis would have to leave unknown). Analysing
    main again as an entry point of its own is the same work twice.
    """
    module = program.module
    candidates = {
        name for name, func in program.functions.items()
        if not program.scopes[func].params and func.asynchronous is None
        and not any(name in s.words for node, s in spelled.items() if node is not module)
    }
    if not candidates:
        return frozenset()
    called, referenced = set(), set()
    stack = list(program.scopes[module].body)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.FunctionDef or kind is cst.ClassDef:
            continue
        if kind is cst.Call and type(node.func) is cst.Name and node.func.value in candidates and not node.args:
            called.add(node.func.value)
            continue
        if kind is cst.Name and node.value in candidates:
            referenced.add(node.value)
        stack.extend(children(node))
    return frozenset(program.functions[name] for name in called - referenced)


def parameter_classes(program: Program, spelled: dict[cst.CSTNode, Spelled]) -> dict[tuple[str, str], str]:
    """Parameters that every in-file call of their function binds to an instance of
    one class of the file, as (scope key, parameter) -> class name.

    `run_epoch(batches, model, SimpleLossCompute(gen, criterion, opt))`: analysed as
    an entry point of its own, `loss_compute(out, y, n)` would be an unknown call
    passing the output's graph on; every caller hands a `SimpleLossCompute`, whose
    `__call__` the analysis can run. Only functions that call a parameter (or a
    method of it) are looked at, and only when the function is never used but by
    calls of its name with plain arguments.

    Likewise the parameters a class's `__init__` keeps on the instance, with the
    attributes that keep them: `Trainer(model, Criterion())` storing
    `self.criterion = criterion` makes `self.criterion(model, sample)` a call the
    analysis can run, as if `__init__` had built the `Criterion()` itself.
    """
    # name called -> (callee scope, parameters looked at, the parameters a call binds)
    candidates: dict[str, tuple] = {}
    for name, func in program.functions.items():
        scope = program.scopes[func]
        used = {use_name for use_name, owner, _ in spelled[func].uses if owner is None}
        used |= {owner for owner, _ in spelled[func].called_methods}
        params = [param for param in scope.params if param in used]
        if params:
            candidates[name] = (scope, params, scope.params)
    # (scope key, parameter) -> (class name, attribute) of each attribute keeping it
    kept: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for name, info in program.classes.items():
        init = info.methods.get("__init__")
        if init is None or info.is_record or name in candidates:
            continue
        scope = program.scopes[init]
        attributes = _kept_on_self(scope)
        if attributes:
            candidates[name] = (scope, list(attributes), scope.params[1:])
            kept.update(((scope.key, param), [(name, path) for path in paths]) for param, paths in attributes.items())
    if not candidates:
        return {}
    found: dict[tuple[str, str], str | None] = {}
    for node, scope in program.scopes.items():
        if not (spelled[node].words & candidates.keys()):
            continue
        for call, function in _calls_of(scope, candidates):
            callee_scope, params, signature = candidates[function]
            bound = (bound_arguments(signature, call) if call is not None else None) or {}
            for param in params:
                cls = _class_built_or_held(program, scope, bound.get(param))
                key = (callee_scope.key, param)
                found[key] = cls if found.get(key, cls) == cls else None
    classes = {key: cls for key, cls in found.items() if cls is not None}
    for key, cls in list(classes.items()):
        classes.update((attribute, cls) for attribute in kept.get(key, ()))
    return classes


def _kept_on_self(scope) -> dict[str, list[str]]:
    """The parameters an `__init__` stores on the instance (`self.criterion =
    criterion`, `self.model, self.loss = model, loss`), with the attribute paths;
    a parameter the body re-binds is left out."""
    kept: dict[str, list[str]] = {}
    params = set(scope.params[1:]) - scope.assigned
    for path, value in attribute_assignments(scope.body):
        if type(value) is cst.Name and value.value in params:
            kept.setdefault(value.value, []).append(path)
    return kept


def _calls_of(scope, candidates: dict):
    """(call, function name) for each call of a candidate in the scope's own code, and
    (None, function name) where a candidate is named other than as a callee."""
    stack = list(scope.body)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.FunctionDef or kind is cst.ClassDef:
            continue
        if kind is cst.Call and type(node.func) is cst.Name and node.func.value in candidates:
            yield node, node.func.value
            stack.extend(arg.value for arg in node.args)
            continue
        if kind is cst.Name and node.value in candidates:
            yield None, node.value  # handed on (`partial(run_epoch, ...)`): called unseen
        stack.extend(children(node))


def _class_built_or_held(program: Program, scope, expr: cst.BaseExpression | None) -> str | None:
    """The class of the file an argument builds (`Model(...)`) or a name of the caller holds."""
    if type(expr) is cst.Call and type(expr.func) is cst.Name and expr.func.value in program.classes:
        return expr.func.value
    if type(expr) is cst.Name:
        cls = program.class_of_instance(program.kinds(scope, expr.value))
        return cls.name if cls is not None else None
    return None
