"""GL001: detach the generator output in the discriminator loss (the clear GAN shape only). Unsafe.

The shape, all in one block: ``fake = G(z)`` (the graph the finding names),
then statements up to the earlier backward in which ``fake`` appears only
as the sole argument of a discriminator call ``D(fake)``, then a step, and
after it the generator loss through the same ``D(fake)``. Each ``D(fake)``
before the earlier backward becomes ``D(fake.detach())``, so the
discriminator loss no longer frees the generator's graph. Two losses of one
forward, stale tensors and helper-method GANs have no single right repair:
no fix is offered and the message says what to do.
"""

from __future__ import annotations

import re

import libcst

from graphlint.finding import Finding
from graphlint.fix.document import Document, is_call_to
from graphlint.fix.edits import UNSAFE, Fix

_FREED = re.compile(r"graph built at line (?P<built>\d+), which the backward at line (?P<earlier>\d+) already freed")
_BACKWARDS = ("backward", "manual_backward")


def fix(finding: Finding, document: Document) -> Fix | None:
    match = _FREED.search(finding.message)
    if match is None:
        return None
    build = _single_statement(document, int(match.group("built")))
    earlier = _single_statement(document, int(match.group("earlier")))
    later = _single_statement(document, finding.line)
    if build is None or earlier is None or later is None:
        return None
    block = document.parent(build)
    if document.parent(earlier) is not block or document.parent(later) is not block:
        return None
    body = list(block.body)
    built_at, earlier_at, later_at = body.index(build), body.index(earlier), body.index(later)
    if not built_at < earlier_at < later_at:
        return None
    assign = build.body[0]
    if not isinstance(assign, libcst.Assign) or len(assign.targets) != 1 or not isinstance(assign.value, libcst.Call):
        return None
    fake = assign.targets[0].target
    if not isinstance(fake, (libcst.Name, libcst.Attribute)):
        return None
    generator = document.code(assign.value.func).strip()

    discriminator_uses = _uses(fake, body[built_at + 1 : earlier_at + 1])
    generator_uses = _uses(fake, body[earlier_at + 1 : later_at])
    if not discriminator_uses or not generator_uses:
        return None
    discriminators = {_sole_argument_callee(use, document) for use in discriminator_uses + generator_uses}
    if len(discriminators) != 1 or None in discriminators or generator in discriminators:
        return None
    if not _steps(body[earlier_at + 1 : later_at]):
        return None
    edits = []
    for use in discriminator_uses:
        edits.extend(document.append_to(use.args[0].value, ".detach()"))
    (name,) = discriminators
    return Fix(
        f"Detach the generator output in the discriminator loss: `{name}({document.appended(fake, '.detach()')})`",
        UNSAFE,
        tuple(edits),
    )


def _single_statement(document: Document, row: int):
    lines = [line for line in document.statement_lines_at(row) if len(line.body) == 1]
    return lines[0] if len(lines) == 1 and document.statement_line(lines[0]) is lines[0] else None


def _uses(target, statements) -> list[libcst.Call] | None:
    """The calls taking ``target`` as their only argument; None when it is used any other way."""
    calls = []
    for statement in statements:
        sole = _sole_args(statement)
        for node, parent in _walk_with_parents(statement):
            if not node.deep_equals(target):
                continue
            if isinstance(parent, libcst.Attribute) and parent.attr is node:
                continue  # `x.fake` names an attribute, not the value
            if not (isinstance(parent, libcst.Arg) and parent in sole):
                return None
            calls.append(sole[parent])
    return calls


def _sole_args(statement) -> dict:
    return {
        node.args[0]: node
        for node, _ in _walk_with_parents(statement)
        if isinstance(node, libcst.Call)
        and len(node.args) == 1
        and node.args[0].keyword is None
        and not node.args[0].star
    }


def _sole_argument_callee(call: libcst.Call, document: Document) -> str | None:
    return document.code(call.func).strip() if isinstance(call.func, (libcst.Name, libcst.Attribute)) else None


def _steps(statements) -> bool:
    return any(is_call_to(node, "step") for statement in statements for node, _ in _walk_with_parents(statement))


def _walk_with_parents(root):
    stack = [(root, None)]
    while stack:
        node, parent = stack.pop()
        yield node, parent
        stack.extend((child, node) for child in node.children)
