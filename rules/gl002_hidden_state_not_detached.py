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
    document = None
    for call, fact in reported_carries(model).items():
        state = model.code(fact.argument)
        forward_line = model.site_line(fact.origin[0])
        how = _how_carried(model, fact)
        if document is None:
            from graphlint.fix.document import Document  # only files with a finding pay for it

            document = Document.parse(model.source) or False
        yield model.diagnostic(
            call,
            f"hidden state '{state}' carries the graph of the forward at line {forward_line} "
            f"into the next iteration ({how}); detach it before this call "
            f"({_detach_hint(model, call, state, document)})",
        )


def _how_carried(model: ModuleModel, fact) -> str:
    if fact.freed_by is not None:
        return f"freed by the backward at line {model.line(fact.freed_by)}"
    walker = fact.traversed_by
    if any(backward.call is walker and backward.retain for backward in model.facts.backwards):
        return "kept alive by retain_graph=True, so every backward walks all earlier batches"
    # Not known to be freed (a graph reached through a container element, say):
    # name the backward that walks it, and claim no retain_graph the code does not spell.
    return f"walked again by the backward at line {model.line(walker)}, and by every later one"


def reported_carries(model: ModuleModel, *, deliberate: bool = False) -> dict:
    """The carried-state facts GL002 reports, one per consuming call; with ``deliberate``,
    also those it leaves as deliberate (GL001 defers to all of these)."""
    found: dict = {}
    loops_of, enclosing_of = {}, {}
    for backward in model.facts.backwards:
        loops_of.setdefault(backward.call, set()).add(backward.loop)
        enclosing_of.setdefault(backward.call, set()).update(backward.loops)
    for fact in model.facts.carried:
        if not deliberate and fact.freed_by is None and _cut_somewhere(model, fact):
            # Only retained, and the loop does cut this state (every k steps): deliberate TBPTT.
            continue
        around = set(fact.loops or ((fact.loop,) if fact.loop else ()))
        walker = fact.freed_by or fact.traversed_by
        backward_loops = loops_of.get(walker, set()) & around
        if not backward_loops and deliberate:
            # A loop around the backward's own carries the state (a script's epoch loop
            # handing a helper's hidden state back to it): GL002 reports the carry inside
            # the helper, where its forward consumes the state; GL001 defers to it here too.
            backward_loops = enclosing_of.get(walker, set()) & around
        if not backward_loops:
            # The backward runs outside the loop carrying the state (a model's layer loop
            # run again after a backward): it frees or walks nothing between iterations.
            continue
        if all(model.of_an_unknown_iteration(fact.origin, loop) for loop in backward_loops):
            # The state's graph is labelled only "some earlier execution" of a site in a
            # loop nested in the backward's (a layer loop of a forward run twice per
            # step): this step's own layers as much as the freed step's.
            continue
        found.setdefault(fact.call, fact)
    return found


def _cut_somewhere(model: ModuleModel, fact) -> bool:
    """Whether the loop that carries the state from one iteration to the next also cuts
    it somewhere (every k steps). A cut only in a loop around it (a reset per epoch)
    leaves the graph growing over every batch of the epoch: not a truncation."""
    if fact.path is None:
        return False
    for loop in (fact.loop,) if fact.loop else fact.loops:
        for path in model.facts.cut_paths.get(loop, ()):
            if path == fact.path or path.startswith(fact.path + ".") or path.startswith(fact.path + "[") or fact.path.startswith(path):
                return True
    return False


def _detach_hint(model: ModuleModel, call, state: str, document) -> str:
    """The cut the fix would insert, in the state's shape; else a tensor's cut for a plain name."""
    import libcst

    from graphlint.fix.gl002 import detaching_statement

    # The fixer's document is libcst's tree: its call is the one spanning the same text.
    span = model.span(call)
    fixed_call = next((
        node for node in (document.nodes_at(span.line, span.col, libcst.Call) if document else ())
        if document.end(node) == (span.end_line, span.end_col)
    ), None)
    code = detaching_statement(fixed_call, state, document) if fixed_call is not None else None
    if code is not None:
        return code
    if state.isidentifier() or state.replace(".", "").replace("_", "").isalnum():
        return f"{state} = {state}.detach(), or detach each of its tensors if it holds several"
    return "detach every tensor of the state"
