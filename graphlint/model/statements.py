"""What the CFG builder reads off statements, syntactically.

Loop counters and the tests that single out a loop's first iteration
(``if t == 0:``), constant tests (``if True:``), and the names and statement
ids a block binds, reads or holds.
"""

from __future__ import annotations

from graphlint.model import syntax as cst

from graphlint.model.names import bound_names, dotted
from graphlint.model.walk import children


def zero_based_counter(stmt: cst.For | cst.While) -> str | None:
    """The name counting a ``for`` loop's iterations from 0 (``for t in range(n)``,
    ``for i, batch in enumerate(loader)``), if any."""
    if type(stmt) is not cst.For or type(stmt.iter) is not cst.Call:
        return None
    call, target = stmt.iter, stmt.target
    func = call.func.value if type(call.func) is cst.Name else None
    positional = [arg for arg in call.args if arg.keyword is None and arg.star == ""]
    if func == "range" and type(target) is cst.Name and positional:
        starts_at_zero = len(positional) == 1 or _is_zero(positional[0].value)
        return target.value if starts_at_zero and len(positional) == len(call.args) else None
    if func == "enumerate" and type(target) is cst.Tuple and target.elements:
        start = [arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "start"]
        start += [arg.value for arg in positional[1:]]
        index = target.elements[0].value
        if type(index) is cst.Name and all(_is_zero(value) for value in start):
            return index.value
    return None


def constant_test(test: cst.BaseExpression) -> bool | None:
    """``if True:``, ``if 0:``: a branch that always or never runs."""
    if type(test) is cst.Name and test.value in ("True", "False"):
        return test.value == "True"
    if type(test) is cst.Integer:
        return test.value != "0"
    return None


def _is_zero(expr: cst.BaseExpression) -> bool:
    return type(expr) is cst.Integer and expr.value == "0"


def first_iteration_test(test: cst.BaseExpression, known: dict[str, bool]) -> bool | None:
    """The test's value when it only compares a counter of ``known`` with 0 (None otherwise)."""
    if not known:
        return None
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        inner = test.expression
        if type(inner) is cst.Name and inner.value in known:
            return known[inner.value]
        value = first_iteration_test(inner, known)
        return None if value is None else not value
    if type(test) is cst.Name and test.value in known:
        return not known[test.value]  # a counter is truthy after the first iteration
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    left, (target,) = test.left, test.comparisons
    right, operator = target.comparator, type(target.operator)
    if type(left) is cst.Name and left.value in known and type(right) is cst.Integer:
        first, number = known[left.value], int(right.value)
    elif type(right) is cst.Name and right.value in known and type(left) is cst.Integer:
        first, number = known[right.value], int(left.value)
        operator = _MIRRORED.get(operator, operator)
    else:
        return None
    # On the first iteration the counter is 0; on later ones it is 1 or more.
    if first:
        return _COMPARE[operator](0, number) if operator in _COMPARE else None
    outcomes = {_COMPARE[operator](value, number) for value in (1, max(number, 1), number + 1)} if operator in _COMPARE else set()
    return outcomes.pop() if len(outcomes) == 1 else None


_COMPARE = {
    cst.Equal: lambda a, b: a == b,
    cst.NotEqual: lambda a, b: a != b,
    cst.LessThan: lambda a, b: a < b,
    cst.LessThanEqual: lambda a, b: a <= b,
    cst.GreaterThan: lambda a, b: a > b,
    cst.GreaterThanEqual: lambda a, b: a >= b,
}
_MIRRORED = {
    cst.LessThan: cst.GreaterThan,
    cst.GreaterThan: cst.LessThan,
    cst.LessThanEqual: cst.GreaterThanEqual,
    cst.GreaterThanEqual: cst.LessThanEqual,
}


def tests_first_iteration(body: cst.BaseSuite, counter: str) -> bool:
    """Whether an ``if`` in the loop body (outside nested definitions) tests ``counter`` against 0."""
    known = {counter: True}
    stack = list(body.body)
    while stack:
        node = stack.pop()
        if type(node) is cst.If and first_iteration_test(node.test, known) is not None:
            return True
        if isinstance(node, cst.BaseCompoundStatement) and type(node) not in (cst.FunctionDef, cst.ClassDef):
            stack.extend(_inner_statements(node))
    return False


def _inner_statements(stmt: cst.BaseCompoundStatement) -> list:
    inner = []
    suites = [stmt.body] if hasattr(stmt, "body") else []
    for name in ("orelse", "finalbody"):
        child = getattr(stmt, name, None)
        if type(child) is cst.If:
            inner.append(child)  # elif
        elif child is not None:
            suites.append(child.body)
    suites += [part.body for part in getattr(stmt, "handlers", ()) or getattr(stmt, "cases", ())]
    return inner + [statement for suite in suites for statement in suite.body]


def statement_ids(body) -> frozenset[int]:
    """Ids of every statement (small ones and compound headers) in ``body``, nested
    definitions excluded: the statements a site can be named after."""
    found: set[int] = set()
    stack = list(body)
    while stack:
        node = stack.pop()
        if type(node) is cst.SimpleStatementLine:
            found.update(id(small) for small in node.body)
            continue
        if type(node) in (cst.Else, cst.Finally):
            stack.extend(node.body.body)
            continue
        found.add(id(node))
        if type(node) in (cst.FunctionDef, cst.ClassDef) or not isinstance(node, cst.BaseCompoundStatement):
            continue
        stack.extend(_inner_statements(node))
    return frozenset(found)


def binds(stmt: cst.BaseSmallStatement) -> set[str]:
    if type(stmt) is cst.Assign:
        return set().union(*(bound_names(target.target) for target in stmt.targets))
    if type(stmt) in (cst.AnnAssign, cst.AugAssign):
        return bound_names(stmt.target)
    if type(stmt) in (cst.Import, cst.ImportFrom) and not isinstance(stmt.names, cst.ImportStar):
        return {
            alias.asname.name.value if alias.asname is not None else (dotted(alias.name) or "").split(".")[0]
            for alias in stmt.names
            if alias.asname is None or type(alias.asname.name) is cst.Name
        }
    return set()


# Nodes binding their ``target`` (``x = ...``, ``for x in ...``, ``(x := ...)``). A
# comprehension's variables are its own; naming them as the scope's locals keeps
# them apart from module globals of the same name.
_TARGET_BINDERS = frozenset({cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.CompFor, cst.For, cst.NamedExpr})


def assigned_names(body, imports: bool = False) -> set[str]:
    """Every name the statements of ``body`` bind (nested definitions' own bodies and
    names declared ``global``/``nonlocal`` excluded); with ``imports``, imported names too."""
    names: set[str] = set()
    declared: set[str] = set()
    stack = list(body)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.FunctionDef or kind is cst.ClassDef:
            names.add(node.name.value)
            continue
        if kind is cst.Lambda:
            continue
        if kind in _TARGET_BINDERS:
            names |= bound_names(node.target)
        elif kind is cst.WithItem:
            if node.asname is not None:
                names |= bound_names(node.asname.name)
        elif kind is cst.ExceptHandler or kind is cst.ExceptStarHandler:
            if node.name is not None:
                names |= bound_names(node.name.name)
        elif kind is cst.Global or kind is cst.Nonlocal:
            declared.update(item.name.value for item in node.names)
        elif kind is cst.Import or kind is cst.ImportFrom:
            if imports:
                names |= binds(node)
        stack.extend(children(node))
    return names - declared


def assigned_paths(body) -> frozenset[str]:
    """Attribute paths the statements assign (`self.step = ...`, `args.lr *= 0.5`), nested scopes left out."""
    found: set[str] = set()
    stack = list(body)
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            continue
        if kind is cst.AssignTarget or kind is cst.AugAssign or kind is cst.AnnAssign:
            targets = [node.target]
            while targets:
                target = targets.pop()
                if type(target) in (cst.Tuple, cst.List):
                    targets.extend(element.value for element in target.elements)
                elif type(target) is cst.StarredElement:
                    targets.append(target.value)
                elif type(target) is cst.Attribute and dotted(target) is not None:
                    found.add(dotted(target))
        stack.extend(children(node))
    return frozenset(found)


def read_names(root: cst.CSTNode) -> set[str]:
    """The variables an expression or statement reads (``a.b`` reads ``a``, not ``b``)."""
    found: set[str] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if type(node) is cst.Name:
            found.add(node.value)
        elif type(node) is cst.Attribute:
            stack.append(node.value)
            continue
        stack.extend(children(node))
    return found


def calls_something(expr: cst.CSTNode) -> bool:
    """Whether ``expr`` holds a call anywhere (a lambda's body included)."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if type(node) is cst.Call:
            return True
        stack.extend(children(node))
    return False


def test_names(test: cst.BaseExpression) -> set[str] | None:
    """The names a test reads, or None when it calls something (a call may vary)."""
    return None if calls_something(test) else read_names(test)


def names_read(statements) -> set[str]:
    """Every name that appears in ``statements`` (a wide read set)."""
    found: set[str] = set()
    stack = list(statements)
    while stack:
        node = stack.pop()
        if type(node) is cst.Name:
            found.add(node.value)
        elif type(node) not in (cst.FunctionDef, cst.ClassDef):
            stack.extend(children(node))
    return found
