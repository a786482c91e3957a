"""What the order analysis knows about the tests of a training loop.

gradorder.py decides some tests per path instead of taking both branches:
- periodic guards (`if (i + 1) % k == 0:`), by the loop counter's residue;
- None-tests of names set to None somewhere (`if params is None:`);
- flags: a parameter or a local only tested, whose value a binding alone
  changes (`if ok:` ... `if not ok:`);
- tests of a helper's parameters bound to literals at the call
  (`train_step(..., do_backward=False)`).
This module recognises those tests, and which of them decide anything at all
(deciding_tests): a test whose outcome changes no event is left undecided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from graphlint.model import syntax as cst

from graphlint.model.branches import immediate_post_dominators, region
from graphlint.model.names import bound_arguments, bound_names, dotted, positional
from graphlint.model.walk import children

if TYPE_CHECKING:
    from graphlint.model.gradorder import EventGraph


_LITERALS = {"True": True, "False": False, "None": None}


def plain_assignments(stmt) -> tuple:
    """(name, is None) for each plain name an assignment statement binds."""
    if type(stmt) is not cst.Assign:
        return ()
    is_none = type(stmt.value) is cst.Name and stmt.value.value == "None"
    return tuple(
        (target.target.value, is_none)
        for target in stmt.targets
        if type(target.target) is cst.Name
    )


def null_test(test: cst.BaseExpression):
    """(name, negated) for `name is None` (False) / `name is not None` (True)."""
    for negated in (False, True):
        tested = none_side(test, not negated)
        if type(tested) is cst.Name:
            return tested.value, negated
    return None


def not_a_tensor_side(test: cst.BaseExpression, label: bool) -> cst.BaseExpression | None:
    """The value tested by ``isinstance(v, torch.Tensor)`` / ``torch.is_tensor(v)`` (or
    their negation) when the branch ``label`` is the one where it is no tensor."""
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return not_a_tensor_side(test.expression, not label)
    if label or type(test) is not cst.Call:
        return None
    name = dotted(test.func) or ""
    args = [arg.value for arg in test.args if arg.keyword is None and not arg.star]
    if name in ("torch.is_tensor", "is_tensor") and len(args) == 1:
        tested = args[0]
    elif name == "isinstance" and len(args) == 2 and (dotted(args[1]) or "").split(".")[-1] == "Tensor":
        tested = args[0]
    else:
        return None
    return tested if type(tested) in (cst.Name, cst.Attribute) else None


def none_side(test: cst.BaseExpression, label: bool) -> cst.BaseExpression | None:
    """The expression tested against None when the branch ``label`` of ``test`` is the
    one where it is None (``h is None`` taken, ``h is not None`` not taken)."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    comparison = test.comparisons[0]
    if not (type(comparison.comparator) is cst.Name and comparison.comparator.value == "None"):
        return None
    operator = type(comparison.operator)
    if (operator is cst.Is and label) or (operator is cst.IsNot and not label):
        return test.left if type(test.left) in (cst.Name, cst.Attribute) else None
    return None


def no_graph_side(test: cst.BaseExpression, label: bool) -> cst.BaseExpression | None:
    """The value the branch ``label`` of ``test`` knows to hold no graph: None there, or no tensor."""
    return none_side(test, label) or not_a_tensor_side(test, label)


# Where reading a name can neither change its value nor let anything else change
# the object it holds: tests, comparisons, boolean operators, formatting.
_INERT_READERS = (
    cst.If, cst.While, cst.IfExp, cst.UnaryOperation, cst.BooleanOperation, cst.Comparison,
    cst.ComparisonTarget, cst.FormattedStringExpression,
)


def tested_locals(body) -> frozenset[str]:
    """Locals that only `name = value` binds and that are read only where nothing can
    change the object they hold (`ok = finite(norm)` ... `if not ok:` ... `if ok:`).

    Between two of its assignments such a name holds one value, so its truth is the
    same at every test. A name also used as a receiver (`done.append(x)`), handed to
    a call, aliased (`other = done`) or bound any other way is left out: its object
    could change in between. So is any name a nested function or lambda mentions.
    """
    plain: set[str] = set()
    spoiled: set[str] = set()
    stack = [(node, None, False) for node in body]
    while stack:
        node, parent, nested = stack.pop()
        kind = type(node)
        if kind is cst.Name:
            if nested or not (type(parent) in _INERT_READERS or type(parent) is cst.AssignTarget):
                spoiled.add(node.value)
            continue
        if kind is cst.Assign:
            for target in node.targets:
                if type(target.target) is cst.Name:
                    plain.add(target.target.value)
        elif kind is cst.AssignTarget and type(node.target) is not cst.Name:
            spoiled.update(bound_names(node.target))
        nested = nested or kind in (cst.FunctionDef, cst.ClassDef, cst.Lambda)
        stack.extend((child, node, nested) for child in children(node))
    return frozenset(plain - spoiled)


def flag_test(test: cst.BaseExpression) -> tuple[str, str, int] | None:
    """(key, kind, status its True branch means) for `name` / `not name` (kind
    "truth") and `name is None` / `name is not None` (kind "none"). Also "truth"
    tests of an attribute or of a comparison with a literal (`if args.sparse:`,
    `if config.ACCUMULATION_STEPS > 1:`), keyed by their text: constant when
    their roots are (see flag_roots)."""
    negated = False
    while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        negated, test = not negated, test.expression
    composite = None if type(test) is cst.Name else _composite_key(test)
    if type(test) is cst.Name and test.value not in _LITERALS:
        name, kind, if_true = test.value, "truth", 2
    elif composite is not None:
        name, kind, if_true = composite, "truth", 2
    else:
        null = null_test(test)
        if null is None:
            return None
        name, kind, if_true = null[0], "none", 2 if null[1] else 1
    return name, kind, (3 - if_true) if negated else if_true


_COMPARISONS = {
    cst.Equal: "==", cst.NotEqual: "!=", cst.LessThan: "<", cst.GreaterThan: ">",
    cst.LessThanEqual: "<=", cst.GreaterThanEqual: ">=",
}


def _composite_key(test: cst.BaseExpression) -> str | None:
    """`args.sparse` -> "args.sparse"; `cfg.steps > 1` -> "cfg.steps > 1"; else None."""
    if type(test) is cst.Attribute:
        return dotted(test)
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    operator = _COMPARISONS.get(type(test.comparisons[0].operator))
    left, right = _operand_text(test.left), _operand_text(test.comparisons[0].comparator)
    if operator is None or left is None or right is None:
        return None
    if not (_is_path(test.left) or _is_path(test.comparisons[0].comparator)):
        return None
    return f"{left} {operator} {right}"


def _operand_text(expr: cst.BaseExpression) -> str | None:
    if type(expr) in (cst.Integer, cst.Float, cst.SimpleString):
        return expr.value
    if type(expr) is cst.UnaryOperation and type(expr.operator) is cst.Minus and type(expr.expression) in (cst.Integer, cst.Float):
        return "-" + expr.expression.value
    return dotted(expr)


def _is_path(expr: cst.BaseExpression) -> bool:
    return type(expr) in (cst.Name, cst.Attribute) and dotted(expr) is not None and not (
        type(expr) is cst.Name and expr.value in _LITERALS
    )


def flag_roots(test: cst.BaseExpression) -> tuple[frozenset[str], frozenset[str]]:
    """(root names, attribute paths) a composite flag test reads: its value is
    constant when no root is re-bound and no path assigned in between."""
    while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        test = test.expression
    operands = [test] if type(test) is cst.Attribute else [test.left, test.comparisons[0].comparator]
    paths = {dotted(op) for op in operands if _is_path(op)}
    return frozenset(path.partition(".")[0] for path in paths), frozenset(p for p in paths if "." in p)


def null_tests(test: cst.BaseExpression) -> list:
    if type(test) is cst.BooleanOperation:
        return null_tests(test.left) + null_tests(test.right)
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return null_tests(test.expression)
    found = null_test(test)
    return [found] if found else []


def literal_arguments(func, params: list[str], call: cst.Call) -> dict:
    """Helper parameters bound to True/False/None at this call (or by their default)."""
    values: dict = {}
    if type(func) is cst.FunctionDef:
        for param in list(func.params.params) + list(func.params.kwonly_params):
            default = param.default
            if type(default) is cst.Name and default.value in _LITERALS:
                values[param.name.value] = _LITERALS[default.value]
    passed = bound_arguments(params, call)
    if passed is None:
        return {}  # *args / **kwargs: which parameter gets what is unknown
    for name, value in passed.items():
        if type(value) is cst.Name and value.value in _LITERALS:
            values[name] = _LITERALS[value.value]
        else:
            values.pop(name, None)
    return values


def periodic_arguments(params: list[str], call: cst.Call, code) -> dict[str, cst.BaseExpression]:
    """Helper parameters bound to a periodic test at this call
    (``backward_and_maybe_step(loss, opt, update_grad=(i + 1) % k == 0)``)."""
    passed = bound_arguments(params, call) or {}
    return {name: value for name, value in passed.items() if periodic(value, code) is not None}


def decide(test: cst.BaseExpression, constants: dict):
    """True/False when a test only reads parameters bound to literals, else None."""
    if not constants:
        return None
    if type(test) is cst.Name and test.value in constants:
        return bool(constants[test.value])
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        inner = decide(test.expression, constants)
        return None if inner is None else not inner
    if (
        type(test) is cst.Comparison
        and len(test.comparisons) == 1
        and type(test.left) is cst.Name
        and test.left.value in constants
        and type(test.comparisons[0].comparator) is cst.Name
        and test.comparisons[0].comparator.value == "None"
    ):
        operator = test.comparisons[0].operator
        if type(operator) is cst.Is:
            return constants[test.left.value] is None
        if type(operator) is cst.IsNot:
            return constants[test.left.value] is not None
    return None


def counter_binding(stmt: cst.For) -> tuple:
    """(counter name, start) for `for i in range(a, ...)` / `for i, x in enumerate(xs, a)`."""
    iterable = stmt.iter
    if not (type(iterable) is cst.Call and type(iterable.func) is cst.Name):
        return ()
    args = positional(iterable)
    target = stmt.target
    if (
        iterable.func.value == "enumerate"
        and type(target) in (cst.Tuple, cst.List)
        and target.elements
    ):
        name = target.elements[0].value
        start_expr = args[1] if len(args) > 1 else None
        for arg in iterable.args:
            if arg.keyword is not None and arg.keyword.value == "start":
                start_expr = arg.value
    elif iterable.func.value == "range" and type(target) is cst.Name:
        name = target
        start_expr = args[0] if len(args) > 1 else None
    else:
        return ()
    if type(name) is not cst.Name:
        return ()
    if start_expr is None:
        return (name.value, 0)
    if type(start_expr) is cst.Integer:
        return (name.value, int(start_expr.value))
    return ()  # an unknown start: the residue is not known


# ----- which tests matter -----
def deciding_tests(graph: EventGraph, code) -> set[int]:
    """The tests worth deciding per path: those whose outcome changes which events
    or counter increments run, or how a later such test goes (it assigns a name
    that test reads: `if labels is not None: labels = f(labels)` decides nothing
    unless some test of `labels` governs an event). A test that decides nothing
    is left undecided, like any unknown condition: tracking its counter,
    None-test or flag would only multiply the states (transformers' Trainer: an
    evaluation loop's `step % eval_accumulation_steps`, a cache-emptying period,
    `labels is None` before a loss).
    """
    nodes = graph.nodes
    reads: dict[int, set[str]] = {}
    for node in nodes:
        if node.test is None:
            continue
        names = {name for name, _ in null_tests(node.test)}
        names.update(atom.key[0] for atom in atoms(node.test, code))
        flag = flag_test(node.test)
        if flag is not None:
            names.add(flag[0])
        if names:
            reads[node.id] = names
    if not reads:
        return set()
    successors = [[succ for succ, _ in node.succ] for node in nodes]
    ipdom = immediate_post_dominators(successors)
    deciding: set[int] = set()
    assigns: dict[int, set[str]] = {}  # test -> names its region assigns (undecided tests only)
    for test in reads:
        inside = region(test, successors, ipdom)
        if inside is None:
            deciding.add(test)  # a branch that never ends: what it decides is unknown
            continue
        assigned: set[str] = set()
        for member in inside:
            if nodes[member].events or nodes[member].increments:
                deciding.add(test)
                break
            assigned.update(name for name, _ in nodes[member].assigns)
        else:
            assigns[test] = assigned
    # A test that assigns a name a deciding test reads decides too, transitively.
    changed = True
    while changed:
        relevant = set().union(*(reads[test] for test in deciding))
        changed = False
        for test, assigned in list(assigns.items()):
            if assigned & relevant:
                deciding.add(test)
                del assigns[test]
                changed = True
    return deciding


# ----- periodic guards -----
@dataclass(frozen=True)
class Periodic:
    """`(counter + offset) % modulus == 0` (equal) or `!= 0` (not equal)."""

    key: tuple[str, str]  # (counter, modulus) as source text
    offset: int
    equal: bool


def periodic(test: cst.BaseExpression, code) -> Periodic | None:
    """The periodic atom a test is, if it is one."""
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        inner = _modulo(test.expression, code)
        return Periodic(inner[0], inner[1], True) if inner else None
    if type(test) is cst.BinaryOperation:
        inner = _modulo(test, code)
        return Periodic(inner[0], inner[1], False) if inner else None
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        comparison = test.comparisons[0]
        inner = _modulo(test.left, code)
        if inner is None:
            return None
        operator = comparison.operator
        equal = type(operator) is cst.Equal
        if not (equal or type(operator) is cst.NotEqual):
            return None
        key, offset = inner
        right = comparison.comparator
        if type(right) is cst.Integer and right.value == "0":
            return Periodic(key, offset, equal)
        if (
            type(right) is cst.BinaryOperation
            and type(right.operator) is cst.Subtract
            and code(right.left) == key[1]
            and type(right.right) is cst.Integer
        ):
            return Periodic(key, offset + int(right.right.value), equal)
    return None


def reset_counters(ifs) -> dict[str, cst.BaseExpression]:
    """Counter -> its bound ``k``, for each `if micro == k:` (or `>=`) among ``ifs``
    whose block resets the counter (`micro = 0`): counted up to ``k`` and started
    again, it fires every ``k`` increments, as `micro % k == 0` does."""
    found = {}
    for stmt in ifs:
        bound = _counted_up_to(stmt.test)
        if bound is None or type(stmt.body) is not cst.IndentedBlock:
            continue
        counter, limit = bound
        if any(
            type(small) is cst.Assign
            and len(small.targets) == 1
            and dotted(small.targets[0].target) == counter
            and type(small.value) is cst.Integer
            and small.value.value == "0"
            for line in stmt.body.body if type(line) is cst.SimpleStatementLine
            for small in line.body
        ):
            found[counter] = limit
    return found


def as_modular(test: cst.BaseExpression, counters: dict[str, cst.BaseExpression]) -> cst.BaseExpression | None:
    """`micro % k == 0` for a test of a reset counter (see reset_counters) reaching its
    bound, or standing at its start (`if micro == 0:`, a window's first micro-batch);
    None for any other test (`if epoch == 5:` fires once)."""
    bound = _counted_up_to(test)
    at_start = (
        type(test) is cst.Comparison and len(test.comparisons) == 1
        and type(test.comparisons[0].operator) is cst.Equal
        and type(test.comparisons[0].comparator) is cst.Integer and test.comparisons[0].comparator.value == "0"
    )
    counter = dotted(test.left) if bound is not None or at_start else None
    if counter not in counters:
        return None
    return cst.Comparison(
        left=cst.BinaryOperation(left=test.left, operator=cst.Modulo(), right=counters[counter]),
        comparisons=[cst.ComparisonTarget(operator=cst.Equal(), comparator=cst.Integer("0"))],
    )


def _counted_up_to(test: cst.BaseExpression) -> tuple[str, cst.BaseExpression] | None:
    """(counter, bound) of `counter == bound` / `counter >= bound`."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    comparison = test.comparisons[0]
    counter = dotted(test.left)
    if counter is None or type(comparison.operator) not in (cst.Equal, cst.GreaterThanEqual):
        return None
    if type(comparison.comparator) is cst.Integer and comparison.comparator.value == "0":
        return None
    return counter, comparison.comparator


def _modulo(expr, code):
    if not (
        type(expr) is cst.BinaryOperation and type(expr.operator) is cst.Modulo
    ):
        return None
    name, offset = _offset_counter(expr.left)
    if name is None:
        return None
    return (name, code(expr.right)), offset


def _offset_counter(expr: cst.BaseExpression) -> tuple[str | None, int]:
    """`step`, `step + 1`, `i - 2`: the counter's dotted name and the integer added to it."""
    offset = 0
    if (
        type(expr) is cst.BinaryOperation
        and type(expr.operator) in (cst.Add, cst.Subtract)
        and type(expr.right) is cst.Integer
    ):
        offset = int(expr.right.value) * (1 if type(expr.operator) is cst.Add else -1)
        expr = expr.left
    return dotted(expr), offset


def counter_reaches(test: cst.BaseExpression, counters) -> bool:
    """`step == len(loader) - 1`, `(step + 1) == len(loader)`: one of ``counters`` (a
    loop's counter, which only grows) equal to a bound, true on one iteration at most:
    the flush of the last, partial accumulation window. A conjunction holds at most
    when one of its parts does (`len(loader) <= k and (i + 1) == len(loader)`)."""
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
        return counter_reaches(test.left, counters) or counter_reaches(test.right, counters)
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return False
    if type(test.comparisons[0].operator) is not cst.Equal:
        return False
    return any(_offset_counter(side)[0] in counters for side in (test.left, test.comparisons[0].comparator))


def atoms(test: cst.BaseExpression, code) -> list[Periodic]:
    """The periodic atoms of a test built with `and` / `or` / `not`."""
    if type(test) is cst.BooleanOperation:
        return atoms(test.left, code) + atoms(test.right, code)
    found = periodic(test, code)
    if found is not None:
        return [found]
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return atoms(test.expression, code)
    return []
