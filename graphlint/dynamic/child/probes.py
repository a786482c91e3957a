"""The probe object the instrumented code calls, and the events it records.

One ``Probe`` lives in the child for the file being confirmed. The rewritten
module calls it (``loop_enter``/``tick``, ``before``/``after``, ``forward``,
``mark``, ``scope_enter``); the torch patches (patches.py) call
``backward_begin``/``backward_error`` and the optimizer step hooks. Each
observation that proves a finding is streamed out at once through ``emit``,
so a later crash or time-out cannot lose it.

A probe must never change what the user's code does: every method swallows
its own errors (recording them) and only ever raises ``Stop``, which ends the
run on purpose.
"""

from __future__ import annotations

import sys
import weakref

from . import graphs
from .gradients import GradientLedger

TRAINING_LOOP_CAP = 3  # iterations of a training loop that holds no flagged line


class Stop(BaseException):
    """Ends the user's code on purpose (budget, time limit, everything confirmed)."""


class Activation:
    """One run of one loop: its iterations and why it stopped."""

    def __init__(self, probe: "Probe", lid: int, serial: int, previous) -> None:
        self.probe = probe
        self.lid = lid
        self.serial = serial
        self.previous = previous
        self.iteration = 0
        self.starts: list = []
        self.seen_hits = dict(probe.hit_counts)
        self.seen_autograd = probe.autograd_events
        self.flagged: dict = {}
        self.training_iterations = 0
        self.closed = False
        self.failed = False
        self.truncated = False

    def tick(self) -> bool:
        probe = self.probe
        if probe.stop_reason is not None:
            raise Stop(probe.stop_reason)
        try:
            if self.iteration:
                self._account()
            if self._enough():
                self.truncated = True
                return True
            self.iteration += 1
            probe.seq += 1
            self.starts.append(probe.seq)
            probe.ticks += 1
        except Exception as error:  # never let a probe bug change the user's loop
            probe.internal_error(error)
            return False
        if probe.ticks > probe.tick_budget:
            probe.request_stop(f"the loops ran more than {probe.tick_budget} iterations in all")
            raise Stop(probe.stop_reason)
        return False

    def _account(self) -> None:
        probe = self.probe
        for index, count in probe.hit_counts.items():
            if count != self.seen_hits.get(index, 0):
                self.flagged[index] = self.flagged.get(index, 0) + 1
        self.seen_hits = dict(probe.hit_counts)
        if probe.autograd_events != self.seen_autograd:
            self.training_iterations += 1
            self.seen_autograd = probe.autograd_events

    def _enough(self) -> bool:
        """Whether to stop this loop before its next iteration.

        Only loops whose iterations run backwards or steps (training loops) are
        cut short: a loop inside a forward (time steps, layers) must run in full,
        or the shapes it builds would differ from the real run.
        """
        probe = self.probe
        loop = probe.plan.loops[self.lid]
        watched = set(loop.targets) | set(self.flagged)
        if not self.training_iterations:
            return False  # only the global iteration budget and the time limit end these
        if watched:
            if self.iteration >= probe.loop_cap:
                return True
            for index in watched:
                if index not in probe.confirmed and self.flagged.get(index, 0) < probe.iterations:
                    return False
            if probe.step_count and probe.gradients.unresolved:
                # Stopping between a backward and the step that applies it would leave
                # gradients behind that the real loop never leaves: wait for the step.
                return False
            return all(mark in probe.marked for mark in loop.marks)
        return self.training_iterations >= TRAINING_LOOP_CAP

    def fail(self) -> None:
        self.failed = True

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            if self.iteration and not self.failed and not self.truncated:
                self._account()
            probe = self.probe
            if probe.active.get(self.lid) is self:
                if self.previous is None:
                    del probe.active[self.lid]
                else:
                    probe.active[self.lid] = self.previous
        except Exception as error:
            self.probe.internal_error(error)


class Event:
    """A backward or a step, with where and when it happened."""

    __slots__ = ("seq", "kind", "lines", "labels", "serials", "extra")

    def __init__(self, seq: int, kind: str, lines: list, labels: dict, serials: frozenset) -> None:
        self.seq = seq
        self.kind = kind
        self.lines = lines
        self.labels = labels
        self.serials = serials
        self.extra: dict = {}

    @property
    def line(self):
        return self.lines[0] if self.lines else None


class Traversal:
    """What we know about one graph node: who traversed it first, who freed it."""

    __slots__ = ("node", "first", "freed_by")

    def __init__(self, node, first: Event) -> None:
        self.node = node
        self.first = first
        self.freed_by = None


UNREADABLE = object()


class Probe:
    UNREADABLE = UNREADABLE

    def __init__(self, plan, filename: str, emit, iterations: int = 3, loop_cap: int = 16,
                 tick_budget: int = 10_000_000) -> None:
        self.plan = plan
        self.filename = filename
        self.emit = emit
        self.iterations = iterations
        self.loop_cap = loop_cap
        self.tick_budget = tick_budget
        self.seq = 0
        self.ticks = 0
        self.stop_reason = None
        self.stop_clean = False
        self.active: dict = {}
        self.activations: dict = {}
        self.scope_calls: dict = {}
        self.scope_start: dict = {}
        self.marked: set = set()
        self.hit_counts = {index: 0 for index in plan.targets}
        self.hits = {index: [] for index in plan.targets}
        # per hit: (activation serial, iteration) of every loop running at the time
        self.hit_loops = {index: [] for index in plan.targets}
        self.confirmed: dict = {}
        self.notes = {index: [] for index in plan.targets}
        self.errors: list = []
        self.autograd_events = 0
        self.traversed: dict = {}
        self.backward_hits = {index: 0 for index in plan.targets}
        self.backward_count = 0
        self.backward_seen = 0  # every backward and autograd.grad
        self.backward_events: list = []
        self.step_events: list = []
        self.step_count = 0
        self.optimizers: list = []
        self.gradients = GradientLedger(self)
        self.forward_sizes = {index: [] for index in plan.targets}
        self.accumulations = {index: [] for index in plan.targets}
        self.hyper_snapshots: dict = {}
        self.driving = None  # set to a description while stand-ins drive a function
        self.driving_used: dict = {}  # finding index -> stand-ins description

    # -- bookkeeping -----------------------------------------------------------------

    def internal_error(self, error: BaseException) -> None:
        if len(self.errors) < 20:
            self.errors.append(f"{type(error).__name__}: {error}")

    def request_stop(self, reason: str, clean: bool = False) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            self.stop_clean = clean

    def user_lines(self) -> list:
        """Lines of the user's file on the current call stack, innermost first."""
        lines = []
        frame = sys._getframe(1)
        while frame is not None and len(lines) < 12:
            if frame.f_code.co_filename == self.filename:
                lines.append(frame.f_lineno)
            frame = frame.f_back
        return lines

    def labels(self) -> dict:
        """Iteration numbers of every running loop and flagged function."""
        labels = {("loop", lid): act.iteration for lid, act in self.active.items()}
        for fid, calls in self.scope_calls.items():
            labels[("call", fid)] = calls
        return labels

    def serials(self) -> frozenset:
        return frozenset(act.serial for act in self.active.values())

    def event(self, kind: str) -> Event:
        self.seq += 1
        return Event(self.seq, kind, self.user_lines(), self.labels(), self.serials())

    def iteration_of(self, index: int, labels: dict | None = None):
        """The finding's iteration number (of its own loop or function) in ``labels``."""
        target = self.plan.targets[index]
        labels = self.labels() if labels is None else labels
        if target.context_loop is not None:
            return labels.get(("loop", target.context_loop))
        if target.function is not None:
            return labels.get(("call", target.function))
        return None

    def iteration_start(self, index: int) -> int:
        """The sequence number at which the finding's current iteration began."""
        target = self.plan.targets[index]
        if target.context_loop is not None:
            act = self.active.get(target.context_loop)
            if act is not None and act.starts:
                return act.starts[-1]
            return self.seq
        if target.function is not None:
            return self.scope_start.get(target.function, self.seq)
        return 0

    def where(self, event: Event, index: int) -> str:
        """``line N, iteration k`` of an event, naming the line of the finding's
        statement when the event happened there (inside a helper or at its call)."""
        line = event.line
        target = self.plan.targets[index]
        if target.sid is not None:
            site = self.plan.sites[target.sid]
            line = next((n for n in event.lines if site.line <= n <= site.end_line), line)
        text = f"line {line}" if line is not None else "code outside this file"
        iteration = self.iteration_of(index, event.labels)
        return f"{text}, iteration {iteration}" if iteration else text

    def targets_at(self, lines: list, code: str):
        for index, target in self.plan.targets.items():
            if target.code != code or target.sid is None:
                continue
            site = self.plan.sites[target.sid]
            if any(site.line <= line <= site.end_line for line in lines):
                yield index

    def confirm(self, index: int, evidence: str) -> None:
        if index in self.confirmed:
            return
        if self.driving:
            evidence = f"{evidence} (driven with stand-ins: {self.driving})"
        iteration = self.iteration_of(index) or 0
        self.confirmed[index] = (evidence, iteration)
        try:
            self.emit({"type": "confirmed", "index": index, "evidence": evidence, "iterations": iteration})
        except Exception as error:
            self.internal_error(error)
        if all(i in self.confirmed or t.sid is None for i, t in self.plan.targets.items()):
            self.request_stop("every finding is confirmed", clean=True)

    # -- calls from the instrumented code ------------------------------------------

    def loop_enter(self, lid: int) -> Activation:
        serial = len(self.activations) + 1
        act = Activation(self, lid, serial, self.active.get(lid))
        self.activations[serial] = act
        self.active[lid] = act
        return act

    def scope_enter(self, fid: int) -> None:
        self.seq += 1
        self.scope_calls[fid] = self.scope_calls.get(fid, 0) + 1
        self.scope_start[fid] = self.seq

    def mark(self, mid: int) -> None:
        self.marked.add(mid)

    def before(self, sid: int) -> None:
        if self.stop_reason is not None:
            raise Stop(self.stop_reason)
        try:
            site = self.plan.sites[sid]
            self.seq += 1
            running = tuple((act.serial, act.iteration) for act in self.active.values())
            for index in site.findings:
                self.hit_counts[index] += 1
                self.hits[index].append(self._hit_key(index))
                self.hit_loops[index].append(running)
            if "GL003" in site.codes:
                self.gradients.before_clear(sid)
            if "GL004" in site.codes:
                self.hyper_snapshots[sid] = self._hyperparameters()
        except Exception as error:
            self.internal_error(error)

    def after(self, sid: int, value=UNREADABLE) -> None:
        try:
            site = self.plan.sites[sid]
            if "GL002" in site.codes and value is not self.UNREADABLE:
                self._check_forward(site, value)
            if "GL003" in site.codes:
                self.gradients.after_clear(sid)
            if "GL004" in site.codes:
                self._check_hyperparameters(site, value)
            if "GL005" in site.codes:
                self._observe_accumulator(site, value)
        except Exception as error:
            self.internal_error(error)

    def forward(self, sid: int, value):
        try:
            self._check_forward(self.plan.sites[sid], value)
        except Exception as error:
            self.internal_error(error)
        return value

    def _hit_key(self, index: int) -> tuple:
        target = self.plan.targets[index]
        if target.context_loop is not None:
            act = self.active.get(target.context_loop)
            if act is None:
                return (self.seq, None, 0)
            return (self.seq, ("loop", act.serial), act.iteration)
        if target.function is not None:
            return (self.seq, ("call", target.function), self.scope_calls.get(target.function, 0))
        return (self.seq, ("module",), 1)

    # -- autograd events (called by patches.py) -----------------------------------

    def remember(self, nodes: dict, event: Event, frees: bool) -> None:
        for key, node in nodes.items():
            record = self.traversed.get(key)
            if record is None:
                record = self.traversed[key] = Traversal(node, event)
            if frees and record.freed_by is None:
                record.freed_by = event

    def backward_begin(self, roots: list, retain: bool, kind: str, inputs) -> Event:
        """Record a backward (``kind`` "backward") or autograd.grad (``kind`` "grad").

        ``inputs`` restricts what runs: autograd.grad's inputs, backward's ``inputs=``.
        """
        event = self.event(kind)
        self.autograd_events += 1
        self.backward_seen += 1
        if len(self.backward_events) < 10_000:
            self.backward_events.append(event)
        walk = graphs.walk([t.grad_fn for t in roots if getattr(t, "grad_fn", None) is not None])
        input_tensors = graphs.tensors_in(inputs).tensors if inputs is not None else None
        executed = walk.nodes if input_tensors is None else graphs.needed(walk, input_tensors)
        event.extra["complete"] = walk.complete
        event.extra["nodes"] = len(executed)
        freed, retained = [], []
        for key in executed:
            record = self.traversed.get(key)
            if record is not None:
                (freed if record.freed_by is not None else retained).append(record)
        event.extra["retained"] = retained
        event.extra["freed"] = freed
        for index in self.targets_at(event.lines, "GL001"):
            self.backward_hits[index] += 1
            if not walk.complete:
                self._note(index, f"the graph at line {event.line} was too large to walk")
        if kind != "grad":
            self.backward_count += 1
            if input_tensors is not None:
                leaves = {id(t): t for t in input_tensors if t.grad_fn is None}
            else:
                leaves = walk.leaves
            self.gradients.backward(event, leaves)
        self.remember(executed, event, frees=not retain)
        return event

    def _note(self, index: int, note: str) -> None:
        if note not in self.notes[index]:
            self.notes[index].append(note)

    def backward_end(self, event: Event, error: BaseException | None) -> None:
        """After the backward ran (or raised): confirm GL001 findings at its line."""
        if error is None and event.kind != "grad":
            self.gradients.backward_done(event)
        freed = event.extra.get("freed") or []
        message = str(error) if error is not None else ""
        freed_error = "backward through the graph a second time" in message or "already been freed" in message
        inplace_error = "modified by an inplace operation" in message
        for index in self.targets_at(event.lines, "GL001"):
            # "modified by an inplace operation" is GL001 only when a step ran between the
            # earlier (retained) backward and this one: the step modified what it saved.
            last_step = self.step_events[-1].seq if self.step_events else -1
            after_step = inplace_error and any(r.first.seq < last_step for r in event.extra.get("retained") or [])
            if error is not None and (freed_error or after_step):
                self.confirm(index, f'{type(error).__name__} "{_headline(message)}" at {self.where(event, index)}')
            elif freed:
                first = min(freed, key=lambda r: r.freed_by.seq).freed_by
                raised = "" if error is not None else ", and torch raised nothing"
                self.confirm(
                    index,
                    f"the {self._spelling(event.kind)} at {self.where(event, index)} reached {len(freed)} graph "
                    f"node(s) already freed by the backward at {self.where(first, index)}{raised}",
                )

    @staticmethod
    def _spelling(kind: str) -> str:
        return {"grad": "torch.autograd.grad"}.get(kind, "backward")

    def step_begin(self, optimizer) -> None:
        event = self.event("step")
        self.autograd_events += 1
        self.step_count += 1
        if len(self.step_events) < 10_000:
            self.step_events.append(event)
        self.gradients.step_begin(event, optimizer)

    def scaler_step(self, optimizer) -> None:
        """GradScaler.step(opt) is a step of opt, even when it refuses to call opt.step()."""
        self.gradients.resolve(self.event("step"), optimizer)

    def step_end(self, optimizer) -> None:
        self.gradients.step_end(optimizer)

    def track_optimizer(self, optimizer) -> None:
        try:
            self.optimizers.append(weakref.ref(optimizer))
        except TypeError:
            pass

    def live_optimizers(self) -> list:
        return [opt for opt in (ref() for ref in self.optimizers) if opt is not None]

    # -- GL002: a forward call fed with state from an earlier iteration ------------

    def _check_forward(self, site, value) -> None:
        indexes = [i for i in site.findings if self.plan.targets[i].code == "GL002" and i not in self.confirmed]
        if not indexes:
            return
        walk, contents, _ = graphs.walk_value(value)
        for index in indexes:
            start = self.iteration_start(index)
            iteration = self.iteration_of(index)
            self.forward_sizes[index].append((iteration, len(walk.nodes), walk.complete, bool(contents.tensors)))
            consumed = [
                self.traversed[k] for k in walk.nodes if k in self.traversed and self.traversed[k].first.seq < start
            ]
            if consumed:
                first = min(consumed, key=lambda r: r.first.seq).first
                self.confirm(
                    index,
                    f"line {site.line} in iteration {iteration} produced a graph reaching "
                    f"{len(consumed)} node(s) already backwarded at {self.where(first, index)}: "
                    f"state carried from an earlier iteration was not detached{self._growth(index)}",
                )

    def _growth(self, index: int) -> str:
        sizes = []
        for iteration, size, _, _ in self.forward_sizes[index]:
            if sizes and sizes[-1][0] == iteration:
                sizes[-1] = (iteration, max(size, sizes[-1][1]))
            else:
                sizes.append((iteration, size))
        if len(sizes) >= 2 and sizes[-1][1] > sizes[0][1]:
            return " (graph " + " -> ".join(str(s) for _, s in sizes[-4:]) + " nodes)"
        return ""

    # -- GL004: hyperparameters holding a graph -------------------------------------

    def _hyperparameters(self) -> dict:
        values = {}
        for opt in self.live_optimizers():
            for g, group in enumerate(getattr(opt, "param_groups", [])):
                for key, value in group.items():
                    if key != "params":
                        values[(id(opt), "param_groups", g, key)] = (opt, value)
            for key, value in getattr(opt, "defaults", {}).items():
                values[(id(opt), "defaults", None, key)] = (opt, value)
        return values

    def _check_hyperparameters(self, site, value) -> None:
        indexes = [i for i in site.findings if self.plan.targets[i].code == "GL004"]
        if not indexes:
            return
        at = f"line {site.line}"
        # What the statement wrote, read back: any optimizer, torch's or not.
        if value is not self.UNREADABLE:
            for tensor in graphs.tensors_in(value).tensors:
                if tensor.grad_fn is not None:
                    self._confirm_hyperparameter(indexes, at, site.accumulator or "the assigned value", tensor)
                    return
        before = self.hyper_snapshots.pop(site.sid, {})
        for key, (opt, held) in self._hyperparameters().items():
            old = before.get(key)
            if old is not None and old[1] is held:
                continue  # set elsewhere, not by this statement
            for tensor in graphs.tensors_in(held).tensors:
                if tensor.grad_fn is not None:
                    _, where, g, name = key
                    slot = f"param_groups[{g}][{name!r}]" if where == "param_groups" else f"defaults[{name!r}]"
                    self._confirm_hyperparameter(indexes, at, f"optimizer.{slot}", tensor)
                    return
        if value is self.UNREADABLE and not self.live_optimizers():
            for index in indexes:
                self._note(index, "no torch optimizer existed when the line ran, and what it wrote could not be read")

    def _confirm_hyperparameter(self, indexes: list, at: str, slot: str, tensor) -> None:
        size = len(graphs.walk([tensor.grad_fn], limit=100_000).nodes)
        for index in indexes:
            iteration = self.iteration_of(index)
            self.confirm(
                index,
                f"after {at}{_in_iteration(iteration)}, {slot} holds a tensor with "
                f"grad_fn={graphs.node_name(tensor.grad_fn)} ({size} graph node(s))",
            )

    # -- GL005: an accumulator that keeps every iteration's graph --------------------

    def _observe_accumulator(self, site, value) -> None:
        indexes = [i for i in site.findings if self.plan.targets[i].code == "GL005"]
        if not indexes:
            return
        if value is self.UNREADABLE:
            for index in indexes:
                if site.accumulator is None:
                    note = f"line {site.line} accumulates into nothing the probe can observe"
                else:
                    note = f"could not read the accumulator {site.accumulator} after line {site.line}"
                if note not in self.notes[index]:
                    self.notes[index].append(note)
            return
        walk, contents, roots = graphs.walk_value(value)
        consumed = [self.traversed[k] for k in walk.nodes if k in self.traversed]
        for index in indexes:
            key = self._hit_key(index)
            observation = {
                "context": key[1],
                "iteration": key[2],
                "nodes": set(walk.nodes),
                "roots": roots,  # keeps the roots alive, so their ids stay unique
                "root_ids": {id(r) for r in roots},
                "complete": walk.complete and contents.complete,
                "foreign": sorted(contents.foreign),
                "seq": self.seq,
                "backwards": self.backward_seen,
                "steps": self.step_count,
            }
            history = self.accumulations[index]
            history.append(observation)
            if len(history) > 64:
                del history[0]
            if not consumed:
                continue
            # Kept across a step: an earlier observation, made before an optimizer step, is
            # still inside this one, which has grown since. A sum reset at each step (an
            # accumulation window) never qualifies; without torch steps we cannot tell.
            for earlier in reversed(history[:-1]):
                if earlier["steps"] < observation["steps"] and _grew(earlier, observation):
                    between = next(e for e in self.step_events if e.seq > earlier["seq"])
                    self.confirm(
                        index,
                        f"after line {site.line}{_in_iteration(key[2])}, {site.accumulator} still holds the "
                        f"graph it held before the step at {self.where(between, index)} and keeps growing "
                        f"({len(earlier['nodes'])} -> {len(observation['nodes'])} graph nodes)",
                    )
                    break


def _in_iteration(iteration) -> str:
    return f" in iteration {iteration}" if iteration else ""


def _headline(message: str) -> str:
    """The first sentence of a torch error, which is the part that names the problem."""
    text = message.strip().splitlines()[0] if message.strip() else ""
    for stop in (" (", ". "):
        if stop in text:
            text = text[: text.index(stop)]
    return text if len(text) <= 100 else text[:97] + "..."


def _grew(old: dict, new: dict) -> bool:
    return len(new["nodes"]) > len(old["nodes"]) and old["root_ids"] <= new["nodes"] and bool(old["root_ids"])
