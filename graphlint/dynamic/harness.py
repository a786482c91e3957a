"""The parent side of --confirm: a small pool of child processes and their watchdog.

Each worker is one child (``python driver.py``) that imports torch once and
then confirms files one at a time, forking a grandchild per file. The child
lives in its own session; jobs go to it as JSON lines on its stdin and
answers come back on its stdout. If a child stops answering (it should not:
it enforces each file's time limit itself), we kill the running grandchild's
process group and the child's, report the file as inconclusive and start a
fresh child for the files that remain.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

DRIVER = Path(__file__).with_name("driver.py")
# What a file may take beyond its own time limit before we stop trusting the child.
GRACE_SECONDS = 15.0
STDERR_KEEP = 8192


@dataclass
class PoolSettings:
    python: str
    workers: int
    startup_timeout: float
    cwd: str
    env: dict = field(default_factory=dict)


class ChildError(Exception):
    """The child could not be started or stopped answering."""


class Child:
    def __init__(self, settings: PoolSettings) -> None:
        self.settings = settings
        self.messages: queue.Queue = queue.Queue()
        self.stderr = bytearray()
        self.ready: dict = {}
        self.running_pid = None
        try:
            self.process = subprocess.Popen(
                [settings.python, str(DRIVER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=settings.cwd,
                env=settings.env,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as error:
            raise ChildError(f"cannot start {settings.python}: {error.strerror or error}") from None
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        message = self._next(settings.startup_timeout, "starting (importing torch)")
        if message.get("type") == "fatal":
            self.kill()
            raise ChildError(message.get("reason", "the checker process could not start"))
        if message.get("type") != "ready":
            self.kill()
            raise ChildError(f"unexpected first message from the checker process: {message}")
        self.ready = message

    def _read_stdout(self) -> None:
        try:
            for raw in self.process.stdout:
                try:
                    self.messages.put(json.loads(raw))
                except ValueError:
                    continue
        except (OSError, ValueError):  # closed under us by kill()
            pass
        self.messages.put(None)

    def _read_stderr(self) -> None:
        try:
            for raw in self.process.stderr:
                self.stderr += raw
                if len(self.stderr) > STDERR_KEEP:
                    del self.stderr[: len(self.stderr) - STDERR_KEEP]
        except (OSError, ValueError):
            pass

    def _next(self, timeout: float, doing: str) -> dict:
        try:
            message = self.messages.get(timeout=max(timeout, 0.01))
        except queue.Empty:
            self.kill()
            raise ChildError(f"the checker process stopped answering while {doing}") from None
        if message is None:
            self.kill()
            tail = self.stderr.decode("utf-8", "replace").strip().splitlines()
            last = f": {tail[-1]}" if tail else ""
            raise ChildError(f"the checker process died while {doing}{last}")
        return message

    def confirm(self, job: dict) -> dict:
        try:
            self.process.stdin.write((json.dumps(job) + "\n").encode("utf-8"))
            self.process.stdin.flush()
        except OSError:
            self.kill()
            raise ChildError("the checker process died before the file was sent") from None
        deadline = time.monotonic() + float(job["timeout"]) + GRACE_SECONDS
        while True:
            message = self._next(deadline - time.monotonic(), "confirming the file")
            if message.get("type") == "started":
                self.running_pid = message.get("pid")
            elif message.get("type") == "done" and message.get("id") == job["id"]:
                self.running_pid = None
                return message

    def close(self) -> None:
        try:
            self.process.stdin.close()
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()

    def kill(self) -> None:
        """Kill the running grandchild's group and the child's whole session group."""
        for group in (self.running_pid, self.process.pid):
            if group:
                try:
                    os.killpg(group, signal.SIGKILL)
                except OSError:
                    pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            try:
                stream.close()
            except OSError:
                pass


def child_environment(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    # The user's imports must not litter their project with __pycache__ files.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    # Several children share the CPUs; tiny models gain nothing from threads.
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    env.pop("PYTHONSTARTUP", None)
    env.update(extra or {})
    return env


def run_jobs(jobs: list, settings: PoolSettings, on_start=None, on_done=None) -> dict:
    """Run every job; returns job id -> ``done`` message (or a synthesised failure)."""
    pending: queue.Queue = queue.Queue()
    for job in jobs:
        pending.put(job)
    results: dict = {}
    lock = threading.Lock()
    startup_failure: list = []
    live: list = []  # children to kill if we are interrupted
    stopping = threading.Event()

    def work() -> None:
        child = None
        try:
            while True:
                if stopping.is_set():
                    return
                try:
                    job = pending.get_nowait()
                except queue.Empty:
                    return
                if startup_failure:
                    _record(job, _failed(startup_failure[0]))
                    continue
                if child is None:
                    try:
                        child = Child(settings)
                        live.append(child)
                    except ChildError as error:
                        startup_failure.append(str(error))
                        _record(job, _failed(str(error)))
                        continue
                if on_start is not None:
                    on_start(job)
                started = time.monotonic()
                try:
                    done = child.confirm(job)
                except ChildError as error:
                    child = None
                    done = _failed(str(error), time.monotonic() - started)
                _record(job, done)
        finally:
            if child is not None:
                child.close()

    def _record(job: dict, done: dict) -> None:
        with lock:
            results[job["id"]] = done
            if on_done is not None:
                on_done(job, done)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(max(1, min(settings.workers, len(jobs))))]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)  # short waits, so Ctrl-C is seen at once
    except BaseException:
        # Interrupted (Ctrl-C): leave nothing running behind us.
        stopping.set()
        for child in list(live):
            child.kill()
        raise
    return results


def _failed(reason: str, seconds: float = 0.0) -> dict:
    return {"type": "done", "report": None, "confirmed": [], "exit": {"kind": "harness", "reason": reason},
            "stdout": "", "stderr": "", "seconds": round(seconds, 3)}


def default_python() -> str:
    return sys.executable
