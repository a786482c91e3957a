"""GL003 gradient-step-order

## What it does
Follows backward (B), zero_grad (Z) and step (S) of each optimizer over
every path through a training loop, including the way back to its start,
and finds:

- (a) gradients cleared before any step applied them: a zero_grad that, on
  every path, clears a backward's gradients before a step of its optimizer
  applied them, and then lets that step run without them (`B; Z; S`,
  `Z; S; B`, `S; B; Z`); or a zero_grad that wipes gradients accumulation
  held back from a step: the step is skipped by a periodic counter guard
  (`if (i + 1) % k == 0:`) or runs only after an inner micro-batch loop.
  Reported at that zero_grad.
- (b) gradients applied by two steps: a path from a backward through a step
  to the next step of the same optimizer with no zero_grad in between
  (zero_grad missing, called once per epoch outside the batch loop, or only
  in a branch). Reported at the backward.

A backward belongs to every optimizer of the first run of steps after it
(steps with no backward or zero_grad between them): DCGAN's generator
backward belongs to the generator's optimizer only, and the
discriminator's zero_grad discarding what it wrote into the discriminator is
correct. A zero_grad counts for an optimizer when it is that optimizer's, or
the model's (or `for p in model.parameters(): p.grad = None`) whose
parameters the optimizer was built on. When unsure (a submodule's
zero_grad, an unknown call that receives the optimizer or the model) it is
assumed to clear for (b) and not to clear for (a), so both stay silent. A
batch dropped on purpose (`if not isfinite(loss): zero_grad(); continue`)
is not (a): no step runs before the next backward.

## Why is this bad?
(a) The step applies zero (or only the last micro-batch's) gradients: the
model does not learn, or learns from a fraction of the batch. (b) Gradients
accumulate across steps: every step applies the sum of all earlier
gradients, which behaves like an exploding learning rate.

## Example
```python
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()          # no zero_grad anywhere: GL003 (b) at the backward
```

## Fix
Call `optimizer.zero_grad()` once per step, before the backward that feeds
it (or right after the step). With accumulation, put the zero_grad under
the same condition as the step, after it.
"""

from __future__ import annotations

from collections.abc import Iterator

from graphlint.model import Diagnostic, ModuleModel

CODE = "GL003"
NAME = "gradient-step-order"
SUMMARY = "zero_grad/step/backward order clears gradients before a step or applies them twice."


def check(model: ModuleModel) -> Iterator[Diagnostic]:
    # One finding per (kind, statement). When several paths violate there, the one
    # named never depends on the order the analysis found them in (which follows
    # hash-seeded sets): two distinct steps first, then the earliest lines.
    chosen: dict[tuple, object] = {}
    for violation in model.order_violations:
        key = (violation.kind, violation.at)
        known = chosen.get(key)
        if known is None or _preference(model, violation) < _preference(model, known):
            chosen[key] = violation
    for violation in chosen.values():
        yield model.diagnostic(violation.at, _message(model, violation))


def _preference(model: ModuleModel, violation) -> tuple:
    lines = lambda node: model.line(node) if node is not None else 0
    first, step = lines(violation.first_step), lines(violation.step)
    return (not first or first == step, first, step, lines(violation.backward))


def _message(model: ModuleModel, violation) -> str:
    optimizer = _spelled(model, violation)
    if violation.kind == "a":
        zero_grad = model.code(violation.at)
        return (
            f"{zero_grad} clears the gradients of the backward at line "
            f"{model.line(violation.backward)} before {optimizer}.step() applies them; "
            f"call it before the backward (or after the step), under the same condition as the step"
        )
    first = (
        model.line(violation.first_step) if violation.first_step is not None else None
    )
    again = model.line(violation.step)
    applied = (
        f"by the step at line {first} and again by the step at line {again}"
        if first and first != again
        else f"by the step at line {again} in more than one iteration"
    )
    return (
        f"the gradients of this backward are applied {applied} with no zero_grad in between, "
        f"so every step also applies all earlier gradients; call {optimizer}.zero_grad() once per step"
    )


def _spelled(model: ModuleModel, violation) -> str:
    """The optimizer as the reported code spells it (`self.optim`, inside a helper the
    analysis inlined), not as the caller that the analysis started from names it."""
    step = violation.step
    func = getattr(step, "func", None)
    if func is not None and getattr(func, "attr", None) is not None and func.attr.value == "step" and not step.args:
        return model.code(func.value)
    return violation.optimizer
