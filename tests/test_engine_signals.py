"""A killed run leaves no worker behind: SIGTERM on the main process skips the pool's shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent.parent / "fixtures"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; PR_SET_PDEATHSIG is Linux's")


def _children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_workers_die_with_a_killed_run(tmp_path):
    source = (FIXTURES / "GL005" / "total_reset_per_epoch.py").read_text()
    for index in range(400):  # enough work to outlast the start-up by far
        (tmp_path / f"copy_{index:03d}.py").write_text(source + f"\n# {index}\n")
    run = subprocess.Popen(
        [sys.executable, "-m", "graphlint", "check", "--isolated", "--no-cache", "--jobs", "2", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(workers) < 2 and run.poll() is None:
            workers = _children(run.pid)
            time.sleep(0.05)
        if run.poll() is not None:
            pytest.skip("the run finished before its workers could be seen")
        assert workers, "no worker process started"
        os.kill(run.pid, signal.SIGTERM)
        run.wait(timeout=30)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_alive(pid) for pid in workers):
            time.sleep(0.05)
        assert not [pid for pid in workers if _alive(pid)], "workers outlived the killed run"
    finally:
        if run.poll() is None:
            run.kill()
        for pid in workers | _children(run.pid):  # orphans, if the test failed
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
