"""GL001 backward-through-freed-graph

## What it does
Finds a backward whose graph shares non-leaf nodes with a graph that an
earlier backward already freed, with no recomputation of that forward in
between: the same loss backwarded twice, two losses of one forward
backwarded separately, a loss (or a target, or a preprocessed input) whose
graph is built once before a loop and backwarded in every iteration, a GAN
generator output backwarded through the discriminator loss without
`.detach()` and then again for the generator loss, a stale tensor from an
earlier iteration, and `a.backward(retain_graph=True); opt.step();
b.backward()` on one forward.

## Why is this bad?
A backward frees the buffers its graph saved. The second backward raises
`RuntimeError: Trying to backward through the graph a second time`, or,
through add-only operations, silently sends gradients through the old graph
again. After `opt.step()` modified the parameters in place, a retained
graph raises "modified by an inplace operation".

## Example
```python
loss = criterion(model(x), y)   # built once
for step in range(100):
    optimizer.zero_grad()
    loss.backward()             # GL001 from the second iteration on
    optimizer.step()
```

## Fix
Recompute the forward for every backward (move it into the loop), detach
what must not be backwarded twice (`D(fake.detach())` in the discriminator
step), or sum the losses and call backward once. `retain_graph=True` is only
right when the graph is really needed twice and nothing changed in between.

Reported at the later backward call.
"""

from __future__ import annotations

from typing import Iterator

from graphlint.model import Diagnostic, ModuleModel

CODE = "GL001"
NAME = "backward-through-freed-graph"
SUMMARY = "Backward through a graph that an earlier backward already freed."


def check(model: ModuleModel) -> Iterator[Diagnostic]:
    yield from ()
