"""GL003 gradient-step-order

## What it does
Follows backward (B), zero_grad (Z) and step (S) of each optimizer over
every path through a training loop, including the way back to its start,
and finds:

- (a) gradients cleared before any step applied them: a zero_grad between a
  backward and the step of its optimizer (`B; Z; S`, `Z; S; B`, `S; B; Z`),
  or, with a step guarded by a periodic counter (gradient accumulation), a
  zero_grad that wipes the accumulated gradients on the iterations that skip
  the step. Reported at that zero_grad.
- (b) gradients applied by two steps: a path from a backward through a step
  to the next step of the same optimizer with no zero_grad in between
  (zero_grad missing, called once per epoch outside the batch loop, or only
  in a branch). Reported at the backward.

A backward belongs to the optimizer whose step first follows it.

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

from typing import Iterator

from graphlint.model import Diagnostic, ModuleModel

CODE = "GL003"
NAME = "gradient-step-order"
SUMMARY = "zero_grad/step/backward order clears gradients before a step or applies them twice."


def check(model: ModuleModel) -> Iterator[Diagnostic]:
    reported = set()
    for violation in model.order_violations:
        key = (violation.kind, violation.at)
        if key in reported:
            continue
        reported.add(key)
        yield model.diagnostic(violation.at, _message(model, violation))


def _message(model: ModuleModel, violation) -> str:
    optimizer = violation.optimizer
    if violation.kind == "a":
        zero_grad = model.code(violation.at)
        return (
            f"{zero_grad} clears the gradients of the backward at line "
            f"{model.line(violation.backward)} before {optimizer}.step() applies them; "
            f"call it before the backward (or after the step), under the same condition as the step"
        )
    first = model.line(violation.first_step) if violation.first_step is not None else None
    again = model.line(violation.step)
    applied = f"by the step at line {first} and again by the step at line {again}" if first and first != again else f"by the step at line {again} in more than one iteration"
    return (
        f"the gradients of this backward are applied {applied} with no zero_grad in between, "
        f"so every step also applies all earlier gradients; call {optimizer}.zero_grad() once per step"
    )
