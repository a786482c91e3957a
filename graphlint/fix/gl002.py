"""GL002: cut the carried state right before the forward that consumes it.

The cut takes the state's shape: ``h = h.detach()`` for a tensor,
``hidden = tuple(s.detach() for s in hidden)`` for an ``(h, c)`` tuple,
indexing for nested tuples, ``h = h.detach() if h is not None else None``
for a state that starts as None, ``h, c = h.detach(), c.detach()`` when the
forward takes the tuple spelled out. A repackage helper defined in the file
(``repackage_hidden``, ``detach_hidden``) is reused: it handles every
shape. When the shape cannot be read off the code, or the forward is not
in a loop of its own function (a module's ``forward`` that keeps
``self.hidden``: cutting there could break BPTT inside one window), no fix
is offered. Safe: the cut removes exactly the carried graph.
"""

from __future__ import annotations

import re

import libcst

from graphlint.finding import Finding
from graphlint.fix.document import Document
from graphlint.fix.edits import SAFE, Fix
from graphlint.fix.shapes import TENSOR, MaybeNone, Shapes, is_all_tensors

_STATE = re.compile(r"hidden state '(?P<state>[^']+)'")
_HELPER_NAME = re.compile(r"repackage|detach", re.IGNORECASE)


def fix(finding: Finding, document: Document) -> Fix | None:
    match = _STATE.search(finding.message)
    calls = document.nodes_at(finding.line, finding.col, libcst.Call)
    if match is None or not calls:
        return None
    call = calls[0]
    state = _state_argument(call, match.group("state"), document)
    statement = document.statement_line(call)
    if state is None or statement is None or not document.in_loop(statement):
        return None
    code = _cut(state, statement, document)
    if code is None:
        return None
    where = _insertion_point(statement, document)
    helper = _repackage_helper(statement, document)
    if helper is not None and document.code(call.func).strip() == helper:
        return None  # the "consuming" call is the detaching helper itself
    if document.previous_statement_code(where) == code or _cut_earlier(state, where, document):
        return None  # already cut or re-created in this iteration: nothing to add
    return Fix(f"Detach the carried state before this forward: `{code}`", SAFE, (document.insert_before(where, code),))


def detaching_statement(call: libcst.Call, state_code: str, document: Document) -> str | None:
    """The statement that cuts the state ``state_code`` passed to ``call``, written for
    the state's shape (GL002's message shows it); None when the shape is unknown."""
    state = _state_argument(call, state_code, document)
    statement = document.statement_line(call)
    if state is None or statement is None:
        return None
    return _cut(state, statement, document)


def _cut_earlier(state, where, document: Document) -> bool:
    """An earlier statement of the same block re-creates the state or cuts it with a detaching helper."""
    block = document.parent(where)
    body = list(getattr(block, "body", ()))
    if where not in body:
        return False
    helper = _repackage_helper(where, document)
    shapes = Shapes(document)
    for earlier in body[: body.index(where)]:
        if not isinstance(earlier, libcst.SimpleStatementLine):
            continue
        for small in earlier.body:
            if not isinstance(small, libcst.Assign) or not any(t.target.deep_equals(state) for t in small.targets):
                continue
            value = small.value
            if shapes.of_expr(value) is not None:
                return True  # torch.zeros(...), (h0, c0), None, x.detach()
            if isinstance(value, libcst.Call) and helper is not None and document.code(value.func).strip() == helper:
                return True
    return False


def _insertion_point(statement, document: Document):
    """Before the statement, or before the inner loop holding it when the backward runs in an outer loop.

    Carrying the state across the time steps of an inner loop is BPTT; the cut
    belongs in the loop that runs the backward, before the inner loop starts.
    """
    child = statement
    innermost = True
    for ancestor in document.ancestors(statement):
        if isinstance(ancestor, (libcst.FunctionDef, libcst.ClassDef)):
            break
        if isinstance(ancestor, (libcst.For, libcst.While)):
            if _runs_backward(ancestor.body):
                return statement if innermost else child
            innermost = False
        if isinstance(ancestor, libcst.BaseStatement) and isinstance(
            document.parent(ancestor), (libcst.IndentedBlock, libcst.Module)
        ):
            child = ancestor
    return statement


def _runs_backward(body) -> bool:
    return any(
        isinstance(node, libcst.Call)
        and isinstance(node.func, libcst.Attribute)
        and node.func.attr.value in ("backward", "manual_backward")
        for node in _walk(body)
    )


def _state_argument(call: libcst.Call, state: str, document: Document) -> libcst.BaseExpression | None:
    """The argument of the consuming call that is the carried state, as the finding names it."""
    wanted = " ".join(state.split())
    for arg in call.args:
        if not arg.star and " ".join(document.code(arg.value).split()) == wanted:
            return arg.value
    return None


def _cut(state: libcst.BaseExpression, statement, document: Document) -> str | None:
    shapes = Shapes(document)
    if isinstance(state, libcst.Tuple):
        names = []
        for element in state.elements:
            if not isinstance(element, libcst.Element) or not _assignable(element.value):
                return None
            shape = shapes.of_target(element.value, _scope(element.value, statement, document))
            if shape not in (TENSOR, None):  # each part of a state passed as a tuple is a tensor
                return None
            names.append(document.code(element.value))
        return f"{', '.join(names)} = {', '.join(name + '.detach()' for name in names)}"
    if not isinstance(state, (libcst.Name, libcst.Attribute)):
        return None
    name = document.code(state)
    helper = _repackage_helper(statement, document)
    if helper is not None:
        return f"{name} = {helper}({name})"
    shape = shapes.of_target(state, _scope(state, statement, document))
    if shape == TENSOR:
        return f"{name} = {name}.detach()"
    if isinstance(shape, MaybeNone) and shape.shape == TENSOR:
        return f"{name} = {name}.detach() if {name} is not None else None"
    if isinstance(shape, tuple) and is_all_tensors(shape):
        if all(part == TENSOR for part in shape):
            return f"{name} = tuple(s.detach() for s in {name})"
        return f"{name} = {_rebuild(name, shape)}"
    return None


def _assignable(part: libcst.BaseExpression) -> bool:
    """A name, or an attribute of `self`: `memory.h = ...` fails on a namedtuple (or a
    frozen dataclass) holding the state, which the fix cannot tell apart."""
    if isinstance(part, libcst.Name):
        return True
    return isinstance(part, libcst.Attribute) and isinstance(part.value, libcst.Name) and part.value.value == "self"


def _rebuild(expr: str, shape) -> str:
    if shape == TENSOR:
        return f"{expr}.detach()"
    parts = [_rebuild(f"{expr}[{index}]", part) for index, part in enumerate(shape)]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _scope(target, statement, document: Document):
    """Where the state is assigned: the class for ``self.x``, the function, or the whole module."""
    if isinstance(target, libcst.Attribute) and isinstance(target.value, libcst.Name) and target.value.value == "self":
        return document.enclosing(statement, libcst.ClassDef) or document.module
    return document.enclosing(statement, libcst.FunctionDef) or document.module


def _repackage_helper(statement, document: Document) -> str | None:
    """A function of the file that detaches whatever state it is given, spelled as callable here."""
    found = []
    for node in document.walk():
        if not isinstance(node, libcst.FunctionDef) or not _HELPER_NAME.search(node.name.value):
            continue
        params = [p.name.value for p in node.params.params]
        in_class = document.enclosing(node, libcst.ClassDef)
        if in_class is not None:
            if (
                params[:1] != ["self"]
                or len(params) != 2
                or document.enclosing(statement, libcst.ClassDef) is not in_class
            ):
                continue
            spelled = f"self.{node.name.value}"
        elif len(params) == 1 and document.enclosing(node, libcst.FunctionDef) is None:
            spelled = node.name.value
        else:
            continue
        if _detaches(node):
            found.append(spelled)
    return found[0] if len(found) == 1 else None


def _detaches(function: libcst.FunctionDef) -> bool:
    """Every return cuts: ``x.detach()`` / ``x.data`` / a recursive call over a container."""
    returns = [n for n in _walk(function.body) if isinstance(n, libcst.Return)]
    if not returns:
        return False
    cut = False
    for node in _walk(function.body):
        if (
            isinstance(node, libcst.Call)
            and isinstance(node.func, libcst.Attribute)
            and node.func.attr.value in ("detach", "detach_")
        ):
            cut = True
        if isinstance(node, libcst.Attribute) and node.attr.value == "data":
            cut = True
        if (
            isinstance(node, libcst.Call)
            and isinstance(node.func, libcst.Attribute)
            and node.func.attr.value == "clone"
        ):
            return False
    return cut


def _walk(node):
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)
