"""Run one user file under the probes and report a verdict per finding.

Runs in the forked grandchild (see zygote.py), after the process limits are
in place. The file runs as ``__main__``, the way ``python file.py`` would run
it, from the instrumented copy; functions holding flagged lines that nothing
called are then driven with stand-in arguments (standins.py).
"""

from __future__ import annotations

import builtins
import errno
import os
import signal
import sys
import time
import traceback
import types

from . import environment, patches
from .instrument import PlanError, build_plan
from .judge import RunEnd, judge
from .probes import Probe, Stop


def run(job: dict, emit) -> dict:
    """The final report for ``job``: a verdict per finding index."""
    started = time.monotonic()
    filename = job["path"]
    try:
        plan = build_plan(job["source"], filename, job["findings"])
    except PlanError as error:
        return _everything(job, "inconclusive", str(error), started)
    probe = Probe(
        plan, filename, emit,
        iterations=int(job.get("iterations", 3)),
        loop_cap=int(job.get("loop_cap", 16)),
    )
    state = {"probe": probe, "run": None, "drive": {}, "job": job, "started": started}
    _guard_os_exit(state, emit)
    patches.install(probe)
    environment.install_network_off()
    environment.install_cpu_only()

    module = types.ModuleType("__main__")
    namespace = module.__dict__
    namespace.update({"__file__": filename, "__builtins__": builtins, "__cached__": None, "_gl_probe": probe})
    sys.modules["__main__"] = module
    sys.argv = [filename] + list(job.get("argv", []))
    sys.path[0] = os.path.dirname(filename)
    os.chdir(job.get("cwd") or os.path.dirname(filename))

    state["run"] = execute(lambda: exec(plan.code, namespace), probe, filename)
    if state["run"].clean:
        from .standins import drive_uncalled

        state["drive"] = drive_uncalled(plan, probe, namespace, job["source"], filename, execute)
        if any(not end.clean for end in state["drive"].values()):
            failed = [end for end in state["drive"].values() if not end.clean]
            state["run"] = RunEnd(False, failed[0].reason, failed[0].exception)
    signal.setitimer(signal.ITIMER_REAL, 0)  # the soft time limit must not cut the report short
    namespace.clear()  # frees what the user's code held before we report
    return _report(state)


def _report(state: dict) -> dict:
    probe, run_end = state["probe"], state["run"]
    reasons = {fid: end.reason for fid, end in state["drive"].items() if end.reason}
    verdicts = judge(probe, run_end, reasons)
    return {
        "type": "report",
        "verdicts": {str(k): v for k, v in verdicts.items()},
        "outcome": run_end.reason or "finished",
        "internal_errors": probe.errors[:5],
        "seconds": round(time.monotonic() - state["started"], 3),
    }


def _everything(job: dict, status: str, reason: str, started: float) -> dict:
    verdicts = {str(f["index"]): {"status": status, "evidence": reason, "iterations": 0} for f in job["findings"]}
    return {"type": "report", "verdicts": verdicts, "outcome": reason, "internal_errors": [],
            "seconds": round(time.monotonic() - started, 3)}


def _guard_os_exit(state: dict, emit) -> None:
    """os._exit skips every handler: report what we have before it happens."""
    real_exit = os._exit
    main_pid = os.getpid()

    def guarded_exit(code=0):
        if os.getpid() == main_pid and state["run"] is None and not state.get("reported"):
            state["reported"] = True
            state["run"] = RunEnd(False, f"the code called os._exit({code!r})")
            try:
                emit(_report(state))
            except BaseException:
                pass
        real_exit(code)

    os._exit = guarded_exit


def execute(action, probe, filename: str) -> RunEnd:
    """Run user code; turn however it ends into a RunEnd."""
    try:
        action()
        return RunEnd(True)
    except Stop as stop:
        if probe.stop_reason is None:  # the soft time limit raises Stop without the probe
            probe.request_stop(str(stop) or "stopped")
        return RunEnd(probe.stop_clean, None if probe.stop_clean else probe.stop_reason)
    except SystemExit as error:
        code = error.code
        if code in (None, 0):
            return RunEnd(True)
        return RunEnd(False, f"the code called sys.exit({code!r})")
    except KeyboardInterrupt:
        return RunEnd(False, "the code raised KeyboardInterrupt")
    except BaseException as error:  # the user's code may raise anything
        info = exception_info(error, filename)
        if probe.stop_reason is not None and not probe.stop_clean:
            return RunEnd(False, probe.stop_reason, info)
        return RunEnd(False, describe(error, info), info)


def exception_info(error: BaseException, filename: str) -> dict:
    lines = []
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            lines.append(tb.tb_lineno)
        tb = tb.tb_next
    return {"type": type(error).__name__, "message": headline(str(error)), "line": lines[-1] if lines else None,
            "lines": lines[::-1], "chain": _chain_text(error)}


def headline(message: str) -> str:
    """The first sentence of an error message: the part that names the problem."""
    text = message.strip().splitlines()[0] if message.strip() else ""
    for stop in (" (or ", ". "):
        if stop in text:
            text = text[: text.index(stop)]
    return text if len(text) <= 160 else text[:157] + "..."


def _chain_text(error: BaseException) -> str:
    texts, seen = [], set()
    while error is not None and id(error) not in seen and len(texts) < 5:
        seen.add(id(error))
        texts.append(str(error))
        error = error.__cause__ or error.__context__
    return " | ".join(texts)


def describe(error: BaseException, info: dict) -> str:
    """Why the code could not be driven, in words a user acts on."""
    at = f" (line {info['line']})" if info.get("line") else ""
    text = f"{info['type']}: {info['message']}" if info["message"] else info["type"]
    chain = info.get("chain", "")
    if environment.NETWORK_OFF in chain:
        return f"a download was attempted and {environment.NETWORK_OFF}: {text}{at}"
    if isinstance(error, (FileNotFoundError, IsADirectoryError, NotADirectoryError)) or (
        isinstance(error, OSError) and error.errno == errno.ENOENT
    ):
        return f"missing data: {text}{at}"
    if isinstance(error, ImportError):
        return f"import failed: {text}{at}"
    if isinstance(error, MemoryError) or "can't allocate memory" in chain or "Cannot allocate memory" in chain:
        return f"memory limit reached: {text}{at}"
    if isinstance(error, EOFError):
        return f"the code tried to read stdin, which is closed under --confirm: {text}{at}"
    if "CUDA" in chain or "cuda" in info["message"]:
        return f"needs a GPU: {text}{at}"
    return f"the code raised {text}{at}"


def format_traceback(error: BaseException) -> str:
    return "".join(traceback.format_exception(type(error), error, error.__traceback__))
