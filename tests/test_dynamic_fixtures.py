"""--confirm over the fixtures: every runnable positive is confirmed, no wrong finding is.

One confirm() call runs every fixture (the ``# expect:`` findings of the
positives and wrong findings injected into the clean files), so torch is
imported once per worker for the whole module.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import statistics
from pathlib import Path

import pytest

from graphlint.dynamic import ConfirmOptions, confirm
from test_dynamic_markers import clean_files, expected_findings, injected_findings, positive_files

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="--confirm needs torch")

POSITIVES = [f for path in positive_files() for f in expected_findings(path)]
INJECTED = [f for path in clean_files() for f in injected_findings(path)]
# (Autofixed positives coming back "not reproduced" is tests/test_fix_confirm.py's.)

# Positives the dynamic checker cannot drive, and why (they stay inconclusive;
# if one starts being confirmed, take it off the list).
UNDRIVABLE = {
    "GL001/two_losses_one_forward_loss_dict.py": "the model returns a dict of losses looked up in a dict of "
                                                  "weights; stand-ins cannot guess the keys",
    "GL002/noop_detach_loop_variable.py": "the loop hard-codes 4 classes and a batch of 2 in its states; "
                                          "the stand-in model's outputs have other shapes",
    "GL004/lr_from_the_loss_of_an_abstract_method.py": "the base class's loss raises NotImplementedError; the "
                                                       "stand-ins drive the base class, not the subclass",
    "GL005/ema_shadow_updated_outside_no_grad.py": "the accumulating line sits in a loop over the parameters "
                                                   "inside the batch loop; the probe follows the innermost loop, "
                                                   "whose every run starts the entry's chain anew to its eyes",
}
# A wrong finding may honestly stay inconclusive (never confirmed) for these reasons;
# the aggregate test below keeps that rare.
HONEST_REASONS = re.compile(
    r"no torch backward|never produced a tensor"  # a hand-written autograd engine: probes see torch only
    r"|torch optimizer step"  # a hand-written optimizer (d2l's sgd)
    r"|only \d complete iteration"  # the line sits in a branch taken once (`if step == 2:`)
    r"|of the loop never ran"  # a branch of the loop never taken, so not every path was tried
    r"|^line \d+ never ran$"  # a line in a branch that never runs (`if True:` ... `elif`)
    r"|import failed|missing data"
    r"|shapes cannot be multiplied"  # a stand-in's output meets a real layer of another width
    r"|iteration over a 0-d tensor"  # a stand-in loss unpacked into parts (`loss, n, log = criterion(...)`)
    r"|objects the probe cannot look into"  # an accumulator of non-tensors (hook handles)
    r"|gradients assigned by hand"  # the step applies a gradient the code rebuilt (DP-SGD, pruning masks)
)
NOT_REPRODUCED_FLOOR = 0.85


def _key(finding) -> str:
    return f"{Path(finding.path).parent.name}/{Path(finding.path).name}:{finding.line}:{finding.code}"


@pytest.fixture(scope="module")
def verdicts():
    runs = []
    confirmed = confirm(POSITIVES + INJECTED, {}, ConfirmOptions(timeout=60, on_file_done=runs.append))
    return {_key(f): f.confirmation for f in confirmed}, runs


def _missing_modules(path: Path) -> set:
    missing = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        for name in names:
            root = name.split(".")[0]
            if importlib.util.find_spec(root) is None:
                missing.add(root)
    return missing


@pytest.mark.parametrize("finding", POSITIVES, ids=_key)
def test_positive_fixture_is_confirmed(finding, verdicts):
    verdict = verdicts[0][_key(finding)]
    path = Path(finding.path)
    short = f"{path.parent.name}/{path.name}"
    if path.name.endswith("_needs_data.py"):
        assert verdict.status == "inconclusive", verdict
        assert "missing data" in verdict.evidence, verdict
        return
    if short in UNDRIVABLE:
        assert verdict.status == "inconclusive", f"{short} is confirmed now: take it off UNDRIVABLE"
        return
    missing = _missing_modules(path)
    if verdict.status == "inconclusive" and missing and (
        "import failed" in verdict.evidence or "never ran" in verdict.evidence
    ):
        pytest.skip(f"needs {', '.join(sorted(missing))}: {verdict.evidence}")
    assert verdict.status == "confirmed", verdict
    assert re.search(r"line \d+", verdict.evidence), verdict


@pytest.mark.parametrize("finding", INJECTED, ids=_key)
def test_wrong_finding_in_clean_fixture_is_not_reproduced(finding, verdicts):
    verdict = verdicts[0][_key(finding)]
    assert verdict.status != "confirmed", verdict  # the dangerous direction, never allowed
    if verdict.status == "inconclusive":
        assert HONEST_REASONS.search(verdict.evidence), verdict
        return
    assert verdict.status == "not reproduced", verdict
    assert verdict.iterations >= 2, verdict


def test_most_wrong_findings_are_not_reproduced(verdicts):
    statuses = [verdicts[0][_key(f)].status for f in INJECTED]
    assert len(statuses) >= 50
    assert statuses.count("not reproduced") / len(statuses) >= NOT_REPRODUCED_FLOOR


def _uncalled_function_of(path: Path, line: int) -> str | None:
    """The top-level function or class holding ``line`` if nothing in the file calls it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.lineno <= line <= node.end_lineno:
            used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
            return None if node.name in used else node.name
    return None


LIBRARY = [
    f for f in POSITIVES
    if _uncalled_function_of(Path(f.path), f.line) and not f.path.endswith("_needs_data.py")
    and f"{Path(f.path).parent.name}/{Path(f.path).name}" not in UNDRIVABLE
]


def test_there_are_library_style_fixtures():
    assert len(LIBRARY) >= 2


@pytest.mark.parametrize("finding", LIBRARY, ids=_key)
def test_library_style_fixture_is_driven_by_stand_ins(finding, verdicts):
    verdict = verdicts[0][_key(finding)]
    if verdict.status == "inconclusive" and _missing_modules(Path(finding.path)):
        pytest.skip(verdict.evidence)
    assert verdict.status == "confirmed", verdict
    assert "driven with stand-ins" in verdict.evidence, verdict


def test_confirming_a_file_costs_little_beyond_importing_torch(verdicts):
    runs = verdicts[1]
    assert len(runs) >= 10
    median = statistics.median(run.seconds for run in runs)
    assert median < 2.0, f"median per-file time {median:.2f} s"
