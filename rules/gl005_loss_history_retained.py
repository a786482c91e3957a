"""GL005 loss-history-retained

## What it does
Finds a value that carries an autograd graph accumulated into something
that outlives the loop iteration (`total += loss`, `running = running +
loss`, `losses.append(loss)`, `stats[k] += loss`, `self.total_loss += loss`)
in a loop that runs a forward or a backward every iteration, where the
accumulator is not itself the objective backwarded afterwards.

## Why is this bad?
Each accumulated loss keeps its whole graph (and the activations it saved)
alive, so memory grows with every iteration until the process runs out of
memory: the PyTorch FAQ's "don't accumulate history across your training
loop".

## Example
```python
total = 0
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    total += loss          # GL005
```

## Fix
Accumulate a graph-free value: `total += loss.detach()` and call `.item()`
only when logging (`.item()` in a hot loop forces a device sync), or
`total += loss.item()` when the accumulator is a Python number.

Summing per-time-step or per-episode losses before one backward (BPTT,
REINFORCE) is the objective and is not reported. Neither is a sum reset in a
loop whose optimizer step runs under a test (gradient accumulation: the sum
holds one step's micro-batches); a sum reset only when it is logged while the
optimizer steps every iteration is reported (`if i % log_interval == 0:
total_loss = 0` bounds nothing). Reported at the accumulating statement.
"""

from __future__ import annotations

from typing import Iterator

from graphlint.model import syntax as cst

from graphlint.model import Diagnostic, ModuleModel

CODE = "GL005"
NAME = "loss-history-retained"
SUMMARY = "A loss with its graph is accumulated across iterations and kept alive."


def check(model: ModuleModel) -> Iterator[Diagnostic]:
    facts = model.facts
    index = _Index(model)
    reported = set()
    for acc in facts.accumulations:
        if acc.stmt in reported or acc.no_grad:
            continue
        # The accumulating loop: its iterations outlived by the accumulator, running a
        # forward or a backward (else nothing new is retained), no reset bounding it.
        if acc.site in facts.backwarded_sites:
            continue  # the accumulator is the objective (BPTT over time steps, REINFORCE)
        if acc.site in facts.returned_sites and acc.loop not in facts.step_loops:
            # Outputs collected step by step and returned: the caller's objective. (Not
            # when the loop steps an optimizer: a module's `fit` returning its loss sum.)
            continue
        # A leaf (a parameter, an input given requires_grad) kept in a list holds no graph.
        graph = [o for o in acc.added if model.origin_is_graph(o, certain=True) and not model.sites[o[0]].leaf]
        if not graph or _beside_an_objective(index, acc) or _derivatives_kept_differentiable(index, acc):
            continue
        if _built_before_every_loop(model, acc, graph):
            continue
        if _backwarded_by_a_method(model, acc) or _sibling_of_the_backwarded_part(model, index, acc):
            continue  # (a list one hook fills and another sums and backwards: meta-losses)
        if acc.loop in facts.active_loops:
            unpacked = all(_shared_by_several_values(model.sites[o[0]]) for o in graph)
            if not acc.outlives_iteration or _bounded_by_reset(facts, acc, unpacked=unpacked):
                continue
        elif not _retained_over_enclosing_loop(model, acc, graph):
            continue
        reported.add(acc.stmt)
        line = model.site_line(model.nearest([o[0] for o in graph], model.line(acc.stmt)))
        name = model.code(acc.target)
        yield model.diagnostic(
            acc.stmt,
            f"'{name}' accumulates a value that carries the autograd graph built at line {line} "
            f"across iterations, keeping every iteration's graph alive; accumulate a graph-free "
            f"value (.detach(), and .item() only when logging, since .item() in a hot loop forces "
            f"a device sync)",
        )


class _Index:
    """What the checks below ask of every accumulation, gathered once per file."""

    def __init__(self, model: ModuleModel) -> None:
        facts = model.facts
        self.by_path: dict[str, list] = {}
        # Loop -> paths of sums kept across its iterations that a backward takes.
        self.objective_loops: dict[tuple, set[str]] = {}
        # What graph-free sums read (`total_loss += loss.item()` reads `loss.item`).
        self.read_as_numbers: set[str] = set()
        for acc in facts.accumulations:
            self.by_path.setdefault(acc.path, []).append(acc)
            if acc.outlives_iteration and acc.site in facts.backwarded_sites:
                self.objective_loops.setdefault(acc.loop, set()).add(acc.path)
            if not model.carries_graph(acc.added):
                self.read_as_numbers |= acc.sources
        self.step_loops = facts.step_loops
        # Variables bound to derivatives taken with `create_graph`.
        self.differentiable = {
            target for site in facts.differentiable_grad_sites for target in model.sites[site].targets
        }


def _built_before_every_loop(model, acc, graph) -> bool:
    """Every graph the accumulation adds was built outside all the loops whose iterations
    the accumulator outlives (torchdyn's multiple-shooting solver stores the rows of a
    solution computed before its loop, taking a gradient of each row in the loop): those
    iterations add nodes on one graph, and retain none of their own."""
    outlived = set(acc.outlived)
    return bool(outlived) and all(outlived.isdisjoint(model.sites[origin[0]].loops) for origin in graph)


def _retained_over_enclosing_loop(model, acc, graph) -> bool:
    """An inner loop that runs no forward (``for k, v in loss_dict.items()``) adding
    each value to an accumulator that outlives the training loop around it.

    Only for values with a node of their own (``loss_dict = model(x)``, a dict a
    followed helper returns beside the loss): values unpacked from one unseen call
    (``loss, sample_size, log = criterion(...)``) hold only that call's node, so the
    ints logged beside a loss would look like it.
    """
    enclosing = [loop for loop in acc.loops[:-1] if loop in model.facts.active_loops]
    if not enclosing or enclosing[-1] not in acc.outlived:
        return False
    if all(_shared_by_several_values(model.sites[o[0]]) for o in graph):
        return False
    # (Any reset in the enclosing loop bounds a value summed over an inner loop.)
    return not _bounded_by_reset(model.facts, acc, enclosing[-1], unpacked=True)


def _sibling_of_the_backwarded_part(model, index: _Index, acc) -> bool:
    """``loss, sample_size, log = criterion(model, sample); loss.backward(); n += sample_size``:
    a part unpacked from one unseen call beside the part the code backwards.

    Such a callee gives every part the call's node (and its inputs' graphs), so a count
    or a detached metric (YOLO's ``loss_items``) looks like the loss. The backward says
    which part is the loss; a loss function's other parts are for logging, and when
    every node the sibling may hold is one that backward walked, it is taken for a
    number. A model's method returns tensors as often (`model.create_bpr_loss(...)`
    hands back loss components), so its sibling is taken for a number only when the
    code keeps the loss itself as one (flair: ``loss, n = model.forward_loss(batch)``,
    ``total_loss += loss.item()``, ``total_n += n``): code that cuts the loss before
    summing it would cut its components too. Not silenced after ``retain_graph=True``
    (the whole graph stays alive, and a sibling kept in a history keeps all of it).
    Sums of sums (``batch_n += n`` per chunk, then ``total_n += batch_n``) are traced
    back to the parts they add.
    """
    facts = model.facts
    freed_from = facts.freeing_backward_paths
    sources, graph_sites = _what_feeds(model, index, acc)
    if not sources or sources & freed_from:
        return False
    if not graph_sites or not graph_sites <= facts.backwarded_sites:
        return False
    if any(type(model.sites[s].stmt) is cst.Return for s in graph_sites):
        return False  # a callee of this file, followed: its parts are known apart
    return any(
        site.targets & freed_from
        and sources <= site.targets
        # A caller's part handed back by a helper is the part the helper's target was.
        and not {site.part_of.get(source, source) for source in sources} & freed_from
        and (site.opaque_parts or _kept_as_a_number(index, site.targets & freed_from))
        for site in (model.sites[s] for s in graph_sites)
    )


def _what_feeds(model, index: _Index, acc, depth: int = 3) -> tuple[frozenset, frozenset]:
    """The variables an accumulation adds and the graph sites they hold, looking through
    the accumulators it adds (``batch_n += n`` then ``total_n += batch_n``: ``n``, and
    the call that bound it, not the statement ``batch_n += n``)."""
    sources, sites, through = set(), set(), set()
    pending = [(acc, 0)]
    while pending:
        current, level = pending.pop()
        sites.update(o[0] for o in current.added if o[0] >= 0 and model.origin_is_graph(o))
        for source in current.sources:
            feeders = [f for f in index.by_path.get(source, ()) if f is not current] if level < depth else []
            if not feeders:
                sources.add(source)
            for feeder in feeders:
                if feeder.site not in through:
                    through.add(feeder.site)
                    pending.append((feeder, level + 1))
    return frozenset(sources), frozenset(sites - through)


def _kept_as_a_number(index: _Index, loss_paths) -> bool:
    """Whether the code sums the backwarded part itself graph-free (``loss.item()``,
    read as the path ``loss.item``)."""
    return any(source.startswith(path + ".") for source in index.read_as_numbers for path in loss_paths)


def _beside_an_objective(index: _Index, acc) -> bool:
    """A sum built in a loop that also builds the objective a backward takes, and
    steps no optimizer (TRPO's `mean_loss += ...; mean_kl += kl` over tasks, both
    returned; the caller differentiates the first and hands the second to a
    Hessian-vector product): the loop computes objectives, one call's worth, not a
    training history. (An accumulation-window loop steps, so it is not this; nor is
    `loss /= k` before a backward, bound afresh in every iteration.)"""
    if acc.loop in index.step_loops:
        return False
    return bool(index.objective_loops.get(acc.loop, set()) - {acc.path})


def _derivatives_kept_differentiable(index: _Index, acc) -> bool:
    """``rows.append(d_i)`` of ``d_i, = torch.autograd.grad(y, x, v_i, create_graph=True)``:
    each value read is a derivative taken to be differentiated again (Jacobian and
    Hessian rows, a PINN's residual terms), so the list is the computation, not a
    history. (A loss that adds such a term, `loss + penalty`, still reads the loss.)"""
    return bool(acc.sources) and all(
        any(source == target or source.startswith(target + ".") for target in index.differentiable)
        for source in acc.sources
    )


def _backwarded_by_a_method(model, acc) -> bool:
    """``self.meta_losses[i] = loss_i`` in one method, ``sum(self.meta_losses).backward()``
    in another of the class: the accumulator is the objective, backwarded when the
    caller (often a base class in another file) calls that method."""
    target = acc.target
    if type(target) is cst.Subscript:
        target = target.value
    if type(target) is not cst.Attribute or type(target.value) is not cst.Name or target.value.value != "self":
        return False
    func = model.function_at(model.line(acc.stmt))
    scope = model.program.scopes.get(func)
    cls = scope.cls if scope is not None else None
    return cls is not None and target.attr.value in model.program.backwarded_attributes(cls)


def _shared_by_several_values(site) -> bool:
    """A node that several values share: an unpacking (``a, b = f()``, ``for a, b in``)
    or a helper's ``return a, b`` (an inlined forward's ``return {...}`` is one value)."""
    if len(site.targets) > 1:
        return True
    return type(site.stmt) is cst.Return and type(site.stmt.value) is cst.Tuple


def _bounded_by_reset(facts, acc, accumulating_loop=None, *, unpacked: bool) -> bool:
    """Whether a re-assignment of the accumulator (or of its dict or object) bounds it.

    A reset in the accumulating loop bounds it when it runs every iteration, or
    when the loop's optimizer step runs under a test too (the sum of one
    accumulated step's micro-batches) or is not in sight (a hand-written update
    may close the window); a log window over steps taken every iteration bounds
    nothing, unless the value is ``unpacked``, one part of a call's tuple
    (``loss, acc = model(x)``: the analysis cannot tell the graph-free metric
    from the loss). A reset by an enclosing loop whose own iterations run the
    optimizer step while the accumulating loop runs none bounds it too: the
    list holds one step's micro-batches, not a history. An epoch loop whose
    steps run in a nested batch loop does not bound a validation sum it
    re-creates (``total = 0.0`` in a helper it calls).
    """
    accumulating = acc.loop if accumulating_loop is None else accumulating_loop
    roots = _path_and_roots(acc.path)
    for loop in acc.loops:
        if roots.isdisjoint(facts.reset_paths.get(loop, ())):
            continue
        if loop == accumulating:
            every_iteration = not roots.isdisjoint(facts.every_iteration_resets.get(loop, ()))
            steps_every_iteration = loop in facts.stepping_loops and loop not in facts.conditional_step_loops
            if every_iteration or not steps_every_iteration or unpacked:
                return True
            continue
        if loop in facts.stepping_loops and accumulating not in facts.step_loops:
            return True
    return False


def _path_and_roots(path: str) -> set[str]:
    """``d['k'].x`` -> {``d['k'].x``, ``d['k']``, ``d``}: rebuilding ``d`` resets its items."""
    found = {path}
    for index, char in enumerate(path):
        if char in ".[" and index:
            found.add(path[:index])
    return found
