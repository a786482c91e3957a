"""Turn what the probe saw into one verdict per finding (RULES.md, last section).

The verdict may never be wrong in the dangerous direction. "confirmed" is
only ever set by the probe on direct evidence. "not reproduced" needs the
flagged lines to have run in at least two complete iterations, every line of
the loop that touches gradients to have run, the probe to have seen the torch
machinery it checks (a backward, a step, an optimizer), and no doubt left;
anything else is inconclusive with the reason.
"""

from __future__ import annotations

import re

from . import graphs
from .probes import _grew

MIN_ITERATIONS = 2

# Messages of custom (non-torch) autograd engines that refuse a second backward.
ENGINE_REFUSALS = re.compile(
    r"more than once|second time|already been freed|already backprop|backward.{0,20}twice", re.IGNORECASE
)


class RunEnd:
    """How the user's code ended: cleanly, or why not."""

    def __init__(self, clean: bool, reason: str | None = None, exception: dict | None = None) -> None:
        self.clean = clean
        self.reason = reason
        self.exception = exception or {}


def judge(probe, run: RunEnd, drive_reasons: dict) -> dict:
    _confirm_engine_refusals(probe, run)
    verdicts = {}
    for index in probe.plan.targets:
        status, evidence, iterations = _verdict(probe, index, run, drive_reasons)
        verdicts[index] = {"status": status, "evidence": evidence, "iterations": iterations}
    return verdicts


def _confirm_engine_refusals(probe, run: RunEnd) -> None:
    """A custom engine's "cannot backpropagate twice" raised at the flagged line."""
    exception = run.exception
    if not exception or not ENGINE_REFUSALS.search(exception.get("message", "")):
        return
    lines = exception.get("lines", [])
    text = f'{exception["type"]} "{exception["message"][:90]}"'
    for index in probe.targets_at(lines, "GL001"):
        probe.confirm(index, f"{text} raised at line {exception.get('line')}")
    failed = [act for act in probe.activations.values() if act.failed and act.starts]
    for index, target in probe.plan.targets.items():
        if target.code != "GL002":
            continue
        for act in failed:
            if act.lid not in target.loops:
                continue
            current = act.starts[-1]
            seqs = [seq for seq, _, _ in probe.hits[index] if seq >= act.starts[0]]
            if any(seq >= current for seq in seqs) and any(seq < current for seq in seqs):
                probe.confirm(
                    index,
                    f"{text} raised at line {exception.get('line')} in iteration {act.iteration} of the loop at "
                    f"line {probe.plan.loops[act.lid].line}, after line {target.line} ran with state carried "
                    f"from iteration {act.iteration - 1}",
                )
                break


def completed_iterations(probe, index: int, run: RunEnd) -> int:
    """The most complete iterations of one loop run (any loop running at the hits:
    lexically around the line or in a caller) that went through the flagged line."""
    per_loop: dict = {}
    for running in probe.hit_loops[index]:
        for serial, iteration in running:
            per_loop.setdefault(serial, set()).add(iteration)
    best = 0
    for serial, iterations in per_loop.items():
        act = probe.activations[serial]
        done = {
            i for i in iterations
            if i < act.iteration or (i == act.iteration and act.closed and not act.failed)
        }
        best = max(best, len(done))
    if best == 0:
        calls: dict = {}
        for _, context, iteration in probe.hits[index]:
            if context is not None and context[0] == "call":
                calls.setdefault(context, set()).add(iteration)
        for iterations in calls.values():
            done = iterations if run.clean else iterations - {max(iterations)}
            best = max(best, len(done))
    return best


def _verdict(probe, index: int, run: RunEnd, drive_reasons: dict):
    target = probe.plan.targets[index]
    line = target.line
    if index in probe.confirmed:
        evidence, iteration = probe.confirmed[index]
        return "confirmed", evidence, iteration
    if target.problem:
        return "inconclusive", target.problem, 0
    hits = probe.hits[index]
    completed = completed_iterations(probe, index, run)
    if not hits:
        reason = drive_reasons.get(target.function)
        if reason is None:
            reason = f"line {line} never ran" + (f" ({run.reason})" if run.reason else "")
        return "inconclusive", reason, 0
    if completed < MIN_ITERATIONS:
        if target.context_loop is None and target.function is None:
            reason = f"line {line} is not in a loop and ran once"
        else:
            reason = f"line {line} ran in only {completed} complete iteration(s)"
        if run.reason:
            reason += f"; {run.reason}"
        return "inconclusive", reason, completed
    if probe.errors:
        return "inconclusive", f"internal probe error: {probe.errors[0]}", completed
    if target.outer_loop is not None:
        marks = probe.plan.loops[target.outer_loop].marks
        missed = [probe.plan.marks[m] for m in marks if m not in probe.marked]
        if missed:
            mark = missed[0]
            return (
                "inconclusive",
                f"line {mark.line} ({mark.text}) of the loop never ran in {completed} iterations, "
                f"so not every path through it was tried",
                completed,
            )
    if probe.notes[index]:
        return "inconclusive", probe.notes[index][0], completed
    check = {
        "GL001": _gl001, "GL002": _gl002, "GL003": _gl003, "GL004": _gl004, "GL005": _gl005,
    }.get(target.code)
    if check is None:
        return "inconclusive", f"graphlint cannot run a check for {target.code}", completed
    status, detail = check(probe, index, run)
    if status == "not reproduced":
        detail = f"ran {completed} iterations through line {line}; {detail}"
        if probe.driving_used.get(index):
            detail += f" (driven with stand-ins: {probe.driving_used[index]})"
    return status, detail, completed


def _gl001(probe, index, run):
    if probe.backward_hits[index] < MIN_ITERATIONS:
        return "inconclusive", (
            f"no torch backward ran at line {probe.plan.targets[index].line} in two iterations "
            f"(the probes see torch autograd only)"
        )
    return "not reproduced", "no backward there reached a graph that an earlier backward had freed"


def _gl002(probe, index, run):
    sizes = probe.forward_sizes[index]
    if not all(complete for _, _, complete, _ in sizes):
        return "inconclusive", "the call's graph was too large to walk"
    if not any(tensors for _, _, _, tensors in sizes):
        return "inconclusive", "the line never produced a tensor the probe could follow"
    if probe.backward_count == 0:
        return "inconclusive", (
            "no torch backward ran, so no state could outlive one (the probes see torch autograd only)"
        )
    return "not reproduced", "the call's result never reached a graph backwarded in an earlier iteration"


def _gl003(probe, index, run):
    if index in probe.gradients.cut_short:
        return "inconclusive", "the only cleared gradients were left over by a loop that graphlint cut short"
    if index in probe.gradients.reassigned:
        return "inconclusive", (
            "gradients were cleared before the step, but the step met gradients assigned by hand, "
            "which may carry the cleared ones"
        )
    if probe.step_count < MIN_ITERATIONS or probe.backward_count < MIN_ITERATIONS:
        return "inconclusive", (
            f"saw {probe.backward_count} torch backward(s) and {probe.step_count} torch optimizer step(s); "
            f"need two of each"
        )
    return "not reproduced", "no zero_grad cleared gradients before their step and no step applied them twice"


def _gl004(probe, index, run):
    return "not reproduced", "no optimizer hyperparameter held a tensor with grad_fn"


def _gl005(probe, index, run):
    history = probe.accumulations[index]
    site = probe.plan.sites[probe.plan.targets[index].sid]
    name = site.accumulator or "the accumulator"
    if not history:
        return "inconclusive", f"could not observe {name}"
    foreign = sorted({kind for o in history for kind in o["foreign"]})
    if foreign:
        return "inconclusive", f"{name} holds {', '.join(foreign)} objects the probe cannot look into"
    if not all(o["complete"] for o in history):
        return "inconclusive", f"the graph held by {name} was too large to walk"
    chains = _growth_chains(history)
    traversed = set(probe.traversed)
    chained = None
    # (b) Growth with no backward at all while it grew (an evaluation loop): a leak
    # unless a backward uses it later, which only the end of the run can tell.
    for chain in chains:
        if len(chain) < 3 or chain[-1]["backwards"] != chain[0]["backwards"]:
            continue
        if chain[-1]["root_ids"] & traversed:
            continue  # the objective, backwarded after the loop (BPTT, REINFORCE)
        if _one_chain(chain[-1]):
            chained = chained or chain  # a forward's per-layer outputs: kept alive by the newest anyway
            continue
        sizes = " -> ".join(str(len(o["nodes"])) for o in chain[-4:])
        if not run.clean:
            return "inconclusive", (
                f"{name} grew ({sizes} nodes), but the run ended before it could be told apart from an "
                f"objective backwarded later"
            )
        evidence = (
            f"after line {site.line}, {name} kept the graph of every iteration "
            f"({sizes} nodes over iterations {chain[0]['iteration']}-{chain[-1]['iteration']}) "
            f"and no backward ever used it"
        )
        if probe.driving_used.get(index):
            evidence += f" (driven with stand-ins: {probe.driving_used[index]})"
        return "confirmed", evidence
    grown = [chain for chain in chains if len(chain) >= 2]
    if grown and all(chain[-1]["root_ids"] & traversed for chain in grown):
        return "not reproduced", f"{name} grew within an iteration and was then backwarded as the objective"
    if grown and not probe.step_count and any(c[-1]["backwards"] - c[0]["backwards"] >= 2 for c in grown):
        return "inconclusive", (
            f"{name} kept graphs across backwards, and with no torch optimizer step there is no telling a "
            f"leak from a sum reset at each (hand-written) update"
        )
    if chained is not None:
        sizes = " -> ".join(str(len(o["nodes"])) for o in chained[-4:])
        return "inconclusive", (
            f"{name} grew ({sizes} nodes) with no backward, but each graph it holds is part of the graph of "
            f"the newest one (each iteration built on the last, like a forward's layers): it keeps alive "
            f"nothing that value does not"
        )
    if len(grown) >= 2:
        return "not reproduced", f"{name} grew only until it was reset, never past an optimizer step"
    if grown:
        return "inconclusive", f"{name} grew and was reset only once; another cycle was needed to be sure"
    return "not reproduced", f"{name} held no graph that outlived its iteration"


def _one_chain(observation: dict) -> bool:
    """Whether the accumulator holds several graphs, all inside the graph of its newest
    value (``results.append(out)`` after ``out = layer(out)``): it keeps alive only what
    that value keeps alive anyway. An evaluation loop's losses are separate graphs."""
    roots = observation["roots"]
    if len(observation["root_ids"]) < 2:
        return False  # one sum: what was added cannot be told apart
    newest = graphs.walk([roots[-1]])
    return newest.complete and observation["root_ids"] <= set(newest.nodes)


def _growth_chains(history: list) -> list:
    """The observations split where the accumulator stopped holding what it held."""
    chains: list = []
    for observation in history:
        if chains and _grew(chains[-1][-1], observation):
            chains[-1].append(observation)
        else:
            chains.append([observation])
    return chains
