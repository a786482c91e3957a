"""GL003: put zero_grad where it belongs. Both fixes are unsafe (they change training).

(b) gradients applied by two steps: insert ``<opt>.zero_grad()`` right after
the optimizer's step (the finding names the step's line and the optimizer), or
for a step with a closure, before the closure's backward;
a bare ``opt.zero_grad`` without parentheses in the same function gets its
parentheses instead. (a) gradients cleared before the step: move the
zero_grad to just before the backward, when zero_grad, backward and every
step of that optimizer in the function sit in one block (with a step under
a counter such as ``(i + 1) % k == 0`` the fix depends on intent: none is
offered).
"""

from __future__ import annotations

import re

import libcst

from graphlint.finding import Finding
from graphlint.fix.document import Document, is_call_to
from graphlint.fix.edits import UNSAFE, Edit, Fix

_MISSING = re.compile(
    r"applied by the step at line (?P<line>\d+).*call (?P<optimizer>\S+)\.zero_grad\(\) once per step"
)
_CLEARED = re.compile(
    r"clears the gradients of the backward at line (?P<line>\d+) before (?P<optimizer>\S+)\.step\(\) applies them"
)
_BACKWARDS = ("backward", "manual_backward")


def fix(finding: Finding, document: Document) -> Fix | None:
    missing = _MISSING.search(finding.message)
    if missing is not None:
        return _insert_zero_grad(int(missing.group("line")), missing.group("optimizer"), finding, document)
    cleared = _CLEARED.search(finding.message)
    if cleared is not None:
        return _move_zero_grad(finding, int(cleared.group("line")), cleared.group("optimizer"), document)
    return None


# -- (b) ---------------------------------------------------------------------------
def _insert_zero_grad(step_line: int, optimizer: str, finding: Finding, document: Document) -> Fix | None:
    steps = [
        (call, receiver)
        for line in document.statement_lines_at(step_line)
        for call in _calls(line)
        if (receiver := _step_receiver(call, document)) is not None and _same_optimizer(receiver, optimizer)
    ]
    if len(steps) != 1:
        return None
    call, receiver = steps[0]
    if call.args and isinstance(call.func, libcst.Attribute) and document.code(call.func.value).strip() == receiver:
        # `optimizer.step(closure)`: the closure runs once per evaluation (several per
        # LBFGS step), so it clears the gradients itself, before its backward.
        backward = document.statement_lines_at(finding.line)
        if len(backward) != 1:
            return None
        code = f"{receiver}.zero_grad()"
        return Fix(f"Insert `{code}` before the closure's backward", UNSAFE, (document.insert_before(backward[0], code),))
    statement = document.statement_line(call)
    if statement is None or len(statement.body) != 1:
        return None
    bare = _bare_zero_grad(statement, receiver, document)
    if bare is not None:
        end = document.end(bare)
        return Fix(
            f"Call `{receiver}.zero_grad()` (it is written without parentheses)", UNSAFE, (Edit(end, end, "()"),)
        )
    following = _next_statement(statement, document)
    if following is not None and _is_zero_grad_of(following, receiver, document):
        return None
    code = f"{receiver}.zero_grad()"
    return Fix(f"Insert `{code}` after the step", UNSAFE, (document.insert_after(statement, code),))


def _bare_zero_grad(statement, receiver: str, document: Document):
    """``opt.zero_grad`` written as a statement without the call, in the step's function."""
    scope = document.scope_of(statement)
    for node in document.walk(scope):
        if (
            isinstance(node, libcst.Expr)
            and isinstance(node.value, libcst.Attribute)
            and node.value.attr.value == "zero_grad"
            and document.code(node.value.value).strip() == receiver
        ):
            return node.value
    return None


def _next_statement(statement, document: Document):
    block = document.parent(statement)
    body = list(getattr(block, "body", ()))
    index = body.index(statement) if statement in body else -1
    return body[index + 1] if 0 <= index < len(body) - 1 else None


def _is_zero_grad_of(statement, receiver: str, document: Document) -> bool:
    if not isinstance(statement, libcst.SimpleStatementLine):
        return False
    return any(
        is_call_to(call, "zero_grad") and document.code(call.func.value).strip() == receiver
        for call in _calls(statement)
    )


# -- (a) ---------------------------------------------------------------------------
def _move_zero_grad(finding: Finding, backward_line: int, optimizer: str, document: Document) -> Fix | None:
    zero_grads = [c for c in document.nodes_at(finding.line, finding.col, libcst.Call) if is_call_to(c, "zero_grad")]
    if len(zero_grads) != 1:
        return None
    zero_grad = zero_grads[0]
    zero_statement = document.statement_line(zero_grad)
    backwards = [
        line for line in document.statement_lines_at(backward_line) if any(_is_backward(call) for call in _calls(line))
    ]
    if zero_statement is None or len(zero_statement.body) != 1 or len(backwards) != 1:
        return None
    backward_statement = backwards[0]
    block = document.parent(zero_statement)
    if document.parent(backward_statement) is not block:
        return None
    receivers = {optimizer, document.code(zero_grad.func.value).strip()}
    steps = [
        node
        for node in document.walk(document.scope_of(zero_statement))
        if isinstance(node, libcst.Call)
        and (receiver := _step_receiver(node, document)) is not None
        and any(_same_optimizer(receiver, name) for name in receivers)
    ]
    if not steps or any(document.parent(document.statement_line(step) or step) is not block for step in steps):
        return None  # a step under a condition (accumulation) or elsewhere: the right place depends on intent
    body = list(block.body)
    if body.index(zero_statement) == body.index(backward_statement) - 1:
        return None
    (start, end) = document.whole_lines(zero_statement)
    moved = document.text[document.offset(start) : document.offset(end)]
    moved = moved.replace("\r\n", "\n").replace("\r", "\n")
    row = document.start(backward_statement)[0]
    return Fix(
        "Move the zero_grad before the backward",
        UNSAFE,
        (Edit(start, end, ""), Edit((row, 1), (row, 1), moved)),
    )


# -- helpers -----------------------------------------------------------------------
def _calls(node):
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, libcst.Call):
            yield current
        stack.extend(current.children)


def _is_backward(call: libcst.Call) -> bool:
    return isinstance(call.func, libcst.Attribute) and call.func.attr.value in _BACKWARDS


def _step_receiver(call: libcst.Call, document: Document) -> str | None:
    """``opt`` for ``opt.step()`` and for ``scaler.step(opt)``."""
    if not is_call_to(call, "step"):
        return None
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    receiver = document.code(call.func.value).strip()
    if positional and "scaler" in receiver.lower():
        return document.code(positional[0].value).strip()
    return receiver


def _same_optimizer(receiver: str, named: str) -> bool:
    """The message names the optimizer as the loop sees it (``model.optimizer_G`` for ``self.optimizer_G``)."""
    if receiver == named:
        return True
    return receiver.rsplit(".", 1)[-1] == named.rsplit(".", 1)[-1] and "." in receiver + named
