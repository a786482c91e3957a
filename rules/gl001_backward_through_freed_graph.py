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

from dataclasses import dataclass
from typing import Iterator

from graphlint.model import Diagnostic, ModuleModel
from graphlint.rules.gl002_hidden_state_not_detached import reported_carries

CODE = "GL001"
NAME = "backward-through-freed-graph"
SUMMARY = "Backward through a graph that an earlier backward already freed."


def check(model: ModuleModel) -> Iterator[Diagnostic]:
    # Origins that reach a backward through recurrent state are GL002's to report, or
    # to leave alone when the loop cuts that state every few steps on purpose.
    carried = {o for fact in reported_carries(model, deliberate=True).values() for o in fact.carried_value}
    recurrent = _Recurrent({o[0] for o in carried}, carried)
    roots_of, read_of = {}, {}
    for backward in model.facts.backwards:
        roots_of.setdefault(backward.call, set()).update(backward.roots)
        read_of.setdefault(backward.call, set()).update(backward.read)
    reported = set()
    for backward in model.facts.backwards:
        if backward.call in reported:
            continue
        message = _freed_graph(model, backward, recurrent, roots_of, read_of) or _stepped_graph(model, backward, recurrent)
        if message:
            reported.add(backward.call)
            yield model.diagnostic(backward.call, message)


@dataclass(frozen=True)
class _Recurrent:
    """What reaches backwards through recurrent state GL002 reports (or leaves alone)."""

    sites: set  # sites of the carried values
    origins: set  # the carried values themselves

    def reaches(self, model: ModuleModel, backward, origin) -> bool:
        """Whether ``origin`` reaches ``backward`` only through that state: an earlier
        iteration's node of a carried site, or the state's initial value built before
        the loop (`state = model.initial_state(n)`)."""
        if origin[1] and origin[0] in self.sites:
            return True
        return origin in self.origins and backward.loop not in model.sites[origin[0]].loops


def _evidenced(model: ModuleModel, backward, origin, roots) -> bool:
    site = model.sites[origin[0]]
    built_before_loop = backward.loop is not None and backward.loop not in site.loops
    if model.origin_is_graph(origin, certain=built_before_loop, roots=roots) and (
        not built_before_loop or site.strength >= 3 or origin[0] in roots
    ):
        return True
    return built_before_loop and _sole_source_of_the_graph(model, backward, origin)


def _sole_source_of_the_graph(model: ModuleModel, backward, origin) -> bool:
    """Whether ``origin`` is the only place the backwarded value's graph can come from.

    `out = model(x)` of an untyped `model` before the loop is a likely forward, not a
    sure one. But when the loss backwarded in the loop is computed from it and from
    nothing else that could require grad (no leaf, no parameters, no other forward:
    `loss = (out - y).pow(2).mean()`), its first backward working is the evidence:
    the graph is `out`'s, and the next iteration walks it again.
    """
    if model.sites[origin[0]].strength < 2 or model.one_element_of_many(backward.value):
        return False
    for other in backward.value:
        if other[0] == origin[0] or other in model.markers_without_graph:
            continue
        if other[0] < 0:
            return False  # the module's parameters
        site = model.sites[other[0]]
        if site.leaf or other[0] not in backward.roots or site.callee_sets:
            return False  # another source: a leaf, another value, a forward of its own
    return True


def _one_part_backwarded_twice(site, read, read_before) -> bool:
    """For the parts of an unseen function's or loss object's result (`loss_td, states =
    world_model_loss(batch)`, see Site.opaque_parts): whether both backwards read one
    part. Whether the other parts share the loss's graph (a model's output) or not
    (logged numbers, states handed back through `.data`) cannot be told from here.
    True, changing nothing, for any other site."""
    if not site.opaque_parts:
        return True
    return bool(_parts_read(site, read) & _parts_read(site, read_before))


def _parts_read(site, read) -> set[str]:
    found = set()
    for path in read:
        for target in site.targets:
            if path == target or path.startswith((target + "[", target + ".")):
                found.add(site.part_of.get(target, target))
    return found


def _nearest(model, backward, hits: list):
    return model.nearest(hits, model.line(backward.call), site=lambda hit: hit[0][0])


def _freed_graph(model, backward, recurrent: _Recurrent, roots_of, read_of) -> str | None:
    hits = []
    for origin, earlier in backward.freed_hits.items():
        if recurrent.reaches(model, backward, origin):
            continue  # reaches the backward only through recurrent state: GL002's finding
        if model.of_an_unknown_iteration(origin, backward.loop):
            continue
        if not _one_part_backwarded_twice(model.sites[origin[0]], backward.read, read_of.get(earlier, ())):
            continue
        if _evidenced(model, backward, origin, backward.roots | roots_of.get(earlier, set())):
            hits.append((origin, earlier))
    if not hits:
        return None
    origin, earlier = _nearest(model, backward, hits)
    # This very backward, run before (an earlier iteration, or an earlier call of its function).
    freed_by = "this backward already freed when it ran before" if earlier is backward.call else (
        f"the backward at line {model.line(earlier)} already freed"
    )
    return (
        f"backward through the graph built at line {model.site_line(origin[0])}, which {freed_by}; "
        f"recompute the forward before this backward, detach what must not "
        f"be backwarded twice, or sum the losses and call backward once"
    )


def _stepped_graph(model, backward, recurrent: _Recurrent) -> str | None:
    hits = [
        (origin, step)
        for origin, step in backward.stepped_hits.items()
        if not (recurrent.reaches(model, backward, origin) or model.of_an_unknown_iteration(origin, backward.loop))
        and model.origin_is_graph(origin, roots=backward.roots)
    ]
    if not hits:
        return None
    origin, step = _nearest(model, backward, hits)
    return (
        f"backward through the graph built at line {model.site_line(origin[0])} after the step at line "
        f"{model.line(step)} modified in place the parameters it saved (PyTorch raises "
        f"'modified by an inplace operation'); backward before the step or recompute the forward"
    )
