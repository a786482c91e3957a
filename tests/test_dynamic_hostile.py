"""Hostile code under --confirm: inconclusive with a reason, on time, nothing left running.

Every file in tests/hostile/ does something a script should not (loops
forever, hoards memory, os._exit, SystemExit, KeyboardInterrupt, forks and
escapes its session, segfaults, floods its output, reads stdin) before a
training loop with a real GL003 bug. They run in one confirm() call together
with an ordinary positive, whose verdict must not be disturbed.
"""

from __future__ import annotations

import importlib.util
import os
import re
import time
from pathlib import Path

import pytest

from graphlint.dynamic import ConfirmOptions, confirm
from test_dynamic_markers import HOSTILE, expected_findings

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="--confirm needs torch")

TIMEOUT = 6.0
# The reason each hostile file must come back with.
REASONS = {
    "loops_forever.py": r"more than \d+ iterations|time limit",
    "hangs_with_alarm_blocked.py": r"time limit of 6 s reached",
    "allocates_without_bound.py": r"memory limit reached|time limit",
    "allocates_tensors_without_bound.py": r"memory limit reached|time limit",
    "calls_os_exit.py": r"os\._exit\(3\)",
    "raises_system_exit.py": r"sys\.exit\(4\)",
    "raises_keyboard_interrupt.py": r"KeyboardInterrupt",
    "forks_and_waits.py": r"time limit",
    "segfaults.py": r"segmentation fault \(SIGSEGV\)",
    "floods_output.py": r"time limit|more than \d+ iterations",
    "reads_stdin.py": r"read stdin",
}

ORDINARY = '''
import torch
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    loss = model(torch.randn(3, 4)).pow(2).mean()
    loss.backward()  # expect: GL003
    opt.step()
'''


def _children_of(pid: int) -> list:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    if int(stat.read().rsplit(b")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    ordinary = folder / "ordinary.py"
    ordinary.write_text(ORDINARY)
    files = sorted(HOSTILE.glob("*.py")) + [ordinary]
    findings = [f for path in files for f in expected_findings(path)]
    runs = {}
    os.environ["GRAPHLINT_HOSTILE_DIR"] = str(folder)
    try:
        started = time.monotonic()
        confirmed = confirm(findings, {}, ConfirmOptions(
            timeout=TIMEOUT, memory_mb=512, workers=2,
            on_file_done=lambda run: runs.__setitem__(Path(run.path).name, run),
        ))
        elapsed = time.monotonic() - started
    finally:
        del os.environ["GRAPHLINT_HOSTILE_DIR"]
    return {Path(f.path).name: f.confirmation for f in confirmed}, runs, folder, elapsed


def test_every_hostile_fixture_has_an_expected_reason():
    assert sorted(p.name for p in HOSTILE.glob("*.py")) == sorted(REASONS)


@pytest.mark.parametrize("name", sorted(REASONS))
def test_hostile_code_is_inconclusive_with_a_reason(name, hostile_run):
    verdicts, runs, _, _ = hostile_run
    verdict = verdicts[name]
    assert verdict.status == "inconclusive", verdict
    assert re.search(REASONS[name], verdict.evidence), verdict.evidence
    assert runs[name].seconds <= TIMEOUT + 2.0


def test_other_files_are_not_disturbed(hostile_run):
    verdicts = hostile_run[0]
    assert verdicts["ordinary.py"].status == "confirmed", verdicts["ordinary.py"]


def test_no_process_is_left_running(hostile_run):
    folder = hostile_run[2]
    pids = [int(p.read_text()) for p in folder.glob("fork-*.pid")]
    assert pids, "the fork fixture did not record its children"
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in pids if _alive(pid)]
    assert not [pid for pid in _children_of(os.getpid()) if _alive(pid)]


def test_flooded_output_is_captured_in_bounded_size(hostile_run):
    run = hostile_run[1]["floods_output.py"]
    assert "graphlint" in run.stdout and "bytes not shown" in run.stdout
    assert len(run.stdout) < 64 * 1024 and len(run.stderr) < 64 * 1024


def test_hostile_files_run_in_parallel_within_the_time_limits(hostile_run):
    # Eleven files, four of which use their whole 6 s, on two workers.
    assert hostile_run[3] < 60
