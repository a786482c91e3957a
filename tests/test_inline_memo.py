"""Remembered helper solves must not change findings.

The interpreter remembers each helper solved at a call (provenance.Interpreter.inline_key)
and, for the recording pass, the fixpoint states of that solve. Both exist to save
time: with them, without the states, or with nothing remembered at all, every
fixture must give exactly the same findings.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from graphlint.checker import check_source
from graphlint.model import provenance

FIXTURES = sorted(
    path for path in Path(__file__).parent.parent.joinpath("fixtures").rglob("*.py") if not path.name.endswith(".fixed.py")
)
_unique = itertools.count()


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(p.parent.parent)))
def test_remembering_solved_helpers_changes_no_finding(path: Path, monkeypatch) -> None:
    source = path.read_bytes()
    remembered = check_source(source, str(path))
    with monkeypatch.context() as patch:
        # Outcomes still remembered, fixpoint states dropped at once: the
        # recording pass solves every helper again.
        patch.setattr(provenance, "_MAX_REMEMBERED_STATES", 0)
        assert check_source(source, str(path)) == remembered
    # Nothing remembered: every key (a call position, then a state) is new.
    monkeypatch.setattr(provenance.Interpreter, "inline_key", lambda *args: (next(_unique), ()))
    assert check_source(source, str(path)) == remembered


def test_the_recording_pass_reuses_a_remembered_fixpoint(monkeypatch) -> None:
    # A helper called in a loop: solved during the caller's fixpoint, then only
    # recorded (its fixpoint not computed again) in the caller's recording pass.
    source = (
        "import torch\n"
        "def step(model, x, opt):\n"
        "    opt.zero_grad()\n"
        "    loss = model(x).sum()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    return loss\n"
        "def train(model, data, opt):\n"
        "    total = 0\n"
        "    for x in data:\n"
        "        total += step(model, x, opt)\n"
    ).encode()
    fixpoints = []
    original = provenance.Interpreter.fixpoint

    def counting(self, frame, entry):
        fixpoints.append((frame.scope.key, self.recording))
        return original(self, frame, entry)

    monkeypatch.setattr(provenance.Interpreter, "fixpoint", counting)
    findings = check_source(source, "memo.py")
    assert [f.code for f in findings] == ["GL005"]
    assert ("step", True) not in fixpoints  # never solved again while recording
    assert ("step", False) in fixpoints
