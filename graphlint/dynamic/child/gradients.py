"""GL003 bookkeeping: which backward's gradients a zero_grad or a step met.

RULES.md: a backward belongs to the optimizer whose step first follows it.
- (a) A flagged zero_grad clears gradients of a backward that no step has
  followed yet, and the next step of an optimizer over those parameters comes
  before (after another optimizer's step) any new backward into them: the
  gradients were discarded unapplied. (A discriminator's zero_grad discarding
  what the generator's backward wrote, after the generator's step, is not.)
- (b) A step applied a parameter's gradient; a backward then added to it while
  it was still there (no zero_grad, the values say so), and the next step of an
  optimizer over that parameter applied the sum again. Or, with no backward in
  between, a second step applied the very same gradient again (a GradScaler
  step in the AMP branch, then the plain step after it).
Clears are seen by value (a gradient that is None or all zeros), so every
spelling (``zero_grad``, ``set_to_none``, ``p.grad = None``) counts.
"""

from __future__ import annotations

from .graphs import has_grad


def _finite(tensor) -> bool:
    grad = getattr(tensor, "grad", None)
    try:
        return grad is None or bool(grad.isfinite().all())
    except Exception:
        return True


class GradientLedger:
    def __init__(self, probe) -> None:
        self.probe = probe
        self.unresolved: list = []
        self.applied: dict = {}
        self.pending: dict = {}
        self.steps: list = []
        self.snapshots: dict = {}
        self.candidates: list = []
        self.cut_short: set = set()
        self.autograd_grads: dict = {}  # parameter id -> the .grad object the last backward left
        self.written_by: dict = {}  # parameter id -> the last backward that left it a gradient
        self.reassigned: set = set()  # findings whose step met gradients assigned by hand

    def backward(self, event, leaves: dict) -> None:
        event.extra["leaves"] = leaves
        self.candidates = [
            c for c in self.candidates if not (c["other_step"] and c["hit"] & set(leaves))
        ]
        for pid, tensor in leaves.items():
            if pid in self.applied or pid in self.pending:
                if has_grad(tensor):
                    if pid in self.applied:
                        self.pending[pid] = (tensor, event, self.applied[pid][1])
                else:
                    self.applied.pop(pid, None)
                    self.pending.pop(pid, None)
        if self.steps:
            event.extra["owner"] = self.steps[-1][0]  # a closure run by the step itself
        else:
            self.unresolved.append(event)

    def backward_done(self, event) -> None:
        """Which parameters now hold gradients (and whether finite), right after a backward."""
        leaves = event.extra.get("leaves")
        if leaves is None:
            return
        event.extra["written"] = {pid: _finite(t) for pid, t in leaves.items() if has_grad(t)}
        for pid, tensor in leaves.items():
            self.autograd_grads[pid] = tensor.grad  # the gradient object autograd left there
            if has_grad(tensor):
                self.written_by[pid] = event

    def before_clear(self, sid: int) -> None:
        snapshot = {}
        for event in self.unresolved:
            for pid, tensor in event.extra["leaves"].items():
                if pid not in snapshot and has_grad(tensor):
                    snapshot[pid] = (tensor, _finite(tensor))
        self.snapshots[sid] = snapshot

    def after_clear(self, sid: int) -> None:
        snapshot = self.snapshots.pop(sid, {})
        cleared = {pid for pid, (tensor, _) in snapshot.items() if not has_grad(tensor)}
        if not cleared:
            return
        if not all(snapshot[pid][1] for pid in cleared):
            # Dropping inf/nan gradients (an overflow guard skipping the step) is the
            # intended use of a zero_grad before the step, not lost work.
            for pid in cleared:
                self.applied.pop(pid, None)
                self.pending.pop(pid, None)
            self.unresolved = [e for e in self.unresolved if not (cleared & set(e.extra["leaves"]))]
            return
        probe = self.probe
        site = probe.plan.sites[sid]
        indexes = [i for i in site.findings if probe.plan.targets[i].code == "GL003"]
        clear = probe.event("zero_grad")
        for event in self.unresolved:
            hit = cleared & set(event.extra["leaves"])
            if hit and indexes:
                self.candidates.append(
                    {"indexes": indexes, "clear": clear, "backward": event, "hit": hit, "other_step": False}
                )
        for pid in cleared:
            self.applied.pop(pid, None)
            self.pending.pop(pid, None)

    @staticmethod
    def parameters_of(optimizer) -> dict:
        params = {}
        for group in getattr(optimizer, "param_groups", []):
            for param in group.get("params", []):
                params[id(param)] = param
        return params

    def step_begin(self, event, optimizer) -> None:
        probe = self.probe
        params = self.parameters_of(optimizer)
        event.extra["params"] = len(params)
        stale = {}
        for pid in [pid for pid in self.pending if pid in params]:
            tensor, backward, step = self.pending.pop(pid)
            if has_grad(tensor):
                stale.setdefault(backward.seq, (backward, step))
        for backward, step in stale.values():
            for index in probe.targets_at(backward.lines, "GL003"):
                probe.confirm(
                    index,
                    f"gradients applied by the step at {probe.where(step, index)} were still there, "
                    f"with no zero_grad between, when the backward at {probe.where(backward, index)} "
                    f"added to them; the step at {probe.where(event, index)} applied them again",
                )
        for backward, step in self._applied_again(params).values():
            for index in probe.targets_at(backward.lines, "GL003"):
                probe.confirm(
                    index,
                    f"the step at {probe.where(step, index)} applied the gradients of the backward at "
                    f"{probe.where(backward, index)}; with no zero_grad and no backward between, "
                    f"the step at {probe.where(event, index)} applied them again",
                )
        self.resolve(event, optimizer, params)
        self.steps.append((optimizer, event, params))

    def _applied_again(self, params: dict) -> dict:
        """Backward seq -> (backward, step) for gradients of ``params`` that an earlier
        step applied and that nothing has touched since: no backward added to them
        (they would be pending) and no clear (they would be gone)."""
        found = {}
        for pid, param in params.items():
            if pid not in self.applied or pid in self.pending or not has_grad(param):
                continue
            step = self.applied[pid][1]
            backward = self.written_by.get(pid)
            if backward is not None and backward.seq < step.seq:
                found.setdefault(backward.seq, (backward, step))
        return found

    def resolve(self, event, optimizer, params: dict | None = None) -> None:
        """A step of ``optimizer`` begins: every backward since the last step belongs to it."""
        probe = self.probe
        params = self.parameters_of(optimizer) if params is None else params
        remaining = []
        for candidate in self.candidates:
            indexes, clear = candidate["indexes"], candidate["clear"]
            backward, hit = candidate["backward"], candidate["hit"]
            if not (hit & set(params)):
                # Another optimizer's step: from now on, a new backward into the cleared
                # parameters means they were cleared for it (the GAN discriminator case).
                candidate["other_step"] = True
                remaining.append(candidate)
                continue
            # The zero_grad's finding, and one reported at the backward whose gradients were lost.
            concerned = list(indexes) + [i for i in probe.targets_at(backward.lines, "GL003") if i not in indexes]
            if self._cut_short(backward, clear):
                self.cut_short.update(concerned)
                continue
            if self._assigned_by_hand(hit, params):
                # p.grad = combined (gradient surgery): the cleared gradients may live on in
                # what was assigned; nothing says they were lost.
                self.reassigned.update(concerned)
                continue
            for index in concerned:
                probe.confirm(
                    index,
                    f"the zero_grad at {probe.where(clear, index)} cleared the gradients of the backward at "
                    f"{probe.where(backward, index)} before the step at {probe.where(event, index)} applied them",
                )
        self.candidates = remaining
        self._lost_before_step(event, params)
        for backward in self.unresolved:
            backward.extra["owner"] = optimizer
        self.unresolved = []

    def _lost_before_step(self, step, params: dict) -> None:
        """A finding at a backward: every gradient it wrote into this optimizer's
        parameters is gone (None or zero) when the step that owns it begins."""
        probe = self.probe
        for backward in self.unresolved:
            written = backward.extra.get("written") or {}
            mine = [pid for pid in written if pid in params]
            if not mine or not all(written[pid] for pid in mine):
                continue  # nothing of ours, or inf/nan gradients an overflow guard may drop
            if any(has_grad(params[pid]) for pid in mine):
                continue
            for index in probe.targets_at(backward.lines, "GL003"):
                probe.confirm(
                    index,
                    f"the gradients written by the backward at {probe.where(backward, index)} were cleared "
                    f"before the step at {probe.where(step, index)} applied them",
                )

    def step_end(self, optimizer) -> None:
        for position in range(len(self.steps) - 1, -1, -1):
            if self.steps[position][0] is optimizer:
                _, event, params = self.steps.pop(position)
                break
        else:
            return
        for pid, param in params.items():
            if has_grad(param):
                self.applied[pid] = (param, event)
            else:
                self.applied.pop(pid, None)

    def _assigned_by_hand(self, pids: set, params: dict) -> bool:
        for pid in pids:
            param = params.get(pid)
            grad = getattr(param, "grad", None)
            if grad is not None and grad is not self.autograd_grads.get(pid):
                return True
        return False

    def _cut_short(self, backward, clear) -> bool:
        """The backward's loop was stopped by us before the clear: real code might differ."""
        activations = self.probe.activations
        return any(
            activations[s].truncated and s not in clear.serials for s in backward.serials if s in activations
        )
