"""Check one file's source: decode, parse, build the model, run the rules, suppress.

This is the whole static pipeline for a single file; engine.py fans it out over
many files. It never raises: anything it cannot analyse becomes a GL000 finding.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
from contextlib import contextmanager

from graphlint import suppress
from graphlint.finding import Finding
from graphlint.model import build_model
from graphlint.prefilter import names_may_have_findings
from graphlint.rules import ALL_RULES
from graphlint.source import parse, read_text, unanalysable

__all__ = ["check_source", "unanalysable"]

# Building the tree and our recursive walks need headroom for deeply nested code;
# past this we report GL000 instead of crashing.
_RECURSION_LIMIT = 10_000

# CPU seconds the model and rules may spend on one file. The model's step budget
# bounds its fixpoint iterations, but not the cost of one step, which grows with
# the file (50,000 statements in one loop, a 50,000-element literal); past this
# the file gets a GL000 "analysis cut short" and the run goes on. CPU time, not
# wall time, so a loaded machine (CI, a pool of workers) does not change results.
ANALYSIS_CPU_SECONDS = 10.0


# The analysis allocates millions of short-lived objects but leaves almost no
# cyclic garbage, while each full collection walks every live object (the
# syntax tree, the dataflow states). With CPython's default thresholds (700,
# 10, 10) collections took about a tenth of the CPU time of the corpus' kept
# files, and 15% on transformers' trainer.py; these thresholds remove nearly
# all of it and peak memory stays the same. The caller's are restored after.
_GC_THRESHOLDS = (50_000, 20, 100)


@contextmanager
def _fewer_collections():
    previous = gc.get_threshold()
    gc.set_threshold(*_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*previous)


class _OutOfTime(BaseException):
    """Raised in the analysis when its CPU time is spent (BaseException: no `except Exception` swallows it)."""


class _Limit:
    expired = False


def _in_gc_callback(frame) -> bool:
    """Whether the interrupted code is a garbage-collection callback (another library's,
    such as hypothesis's): an exception raised there is printed and dropped."""
    callbacks = {getattr(callback, "__code__", None) for callback in gc.callbacks}
    while frame is not None:
        if frame.f_code in callbacks:
            return True
        frame = frame.f_back
    return False


@contextmanager
def _cpu_time_limit(seconds: float | None):
    """Interrupt the block after ``seconds`` of this process's CPU time.

    Only where a signal can be used safely: on the main thread, with the
    virtual timer free (a host program that uses it keeps it; then the
    analysis runs unlimited, bounded by the model's step budget alone).
    Yields an object whose ``expired`` tells, after the fact, whether the
    limit fired: code interrupted mid-cleanup (a context manager's exit)
    may raise its own error in place of ours.
    """
    limit = _Limit()
    usable = (
        seconds is not None
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getitimer(signal.ITIMER_VIRTUAL)[0] == 0
    )
    if not usable:
        yield limit
        return
    armed = True

    def expire(signum, frame) -> None:
        if not armed:  # a signal landing after the block finished must not escape
            return
        limit.expired = True
        if frame is not None and _in_gc_callback(frame):
            return  # Python would print and drop the raise there: the next tick raises
        raise _OutOfTime

    previous = signal.signal(signal.SIGVTALRM, expire)
    # Then again every tenth of a second, until a raise gets through (see expire).
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds, 0.1)
    try:
        yield limit
    finally:
        armed = False
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)


def check_source(
    source: str | bytes, path: str, codes: frozenset[str] | None = None, *, prefilter: bool = False
) -> list[Finding] | None:
    """All findings for one file, sorted; ``codes`` restricts which rules run.

    With ``prefilter``, None when the file parses and its code spells nothing the
    selected rules need (the prefilter's second stage, graphlint/prefilter.py).
    """
    try:
        if path.endswith(".ipynb"):
            from graphlint.notebook import check_notebook

            # A notebook's code cells are analysed as one program; findings come back per cell.
            findings = check_notebook(source, path, lambda program: _findings(program, path, codes))
        else:
            findings = _findings(source, path, codes, prefilter)
    except Exception as error:  # a bug in graphlint must cost one file, never the run
        if os.environ.get("GRAPHLINT_DEBUG"):
            raise
        detail = str(error).splitlines()[0][:200] if str(error) else ""
        findings = [unanalysable(path, f"internal error while analysing this file: {type(error).__name__}: {detail}")]
    if findings is not None and codes is not None and "GL000" not in codes:
        findings = [finding for finding in findings if finding.code != "GL000"]
    return findings


def _findings(source: str | bytes, path: str, codes: frozenset[str] | None, prefilter: bool = False) -> list[Finding] | None:
    text = read_text(source, path)
    if isinstance(text, Finding):
        return [text]
    source = text

    with _fewer_collections():
        return _analyse_text(source, path, codes, prefilter)


def _analyse_text(source: str, path: str, codes: frozenset[str] | None, prefilter: bool = False) -> list[Finding] | None:
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, _RECURSION_LIMIT))
    try:
        module = parse(source, path)
        if isinstance(module, Finding):
            return [module]
        if prefilter and not names_may_have_findings(module.names, codes):
            return None
        # The parse is not timed: the tree is built on a thread of its own that a
        # signal cannot stop, and source.py already bounds its input.
        with _cpu_time_limit(ANALYSIS_CPU_SECONDS) as limit:
            try:
                findings = _rule_findings(module, source, path, codes)
            except Exception:
                if limit.expired:
                    raise _OutOfTime from None
                raise
    except _OutOfTime:
        return [
            unanalysable(
                path,
                f"analysis cut short: it needed more than {ANALYSIS_CPU_SECONDS:g} s of CPU time; "
                "this file was not checked",
            )
        ]
    except RecursionError:
        return [unanalysable(path, "code is nested too deeply to analyse")]
    except MemoryError:
        return [unanalysable(path, "file is too large to analyse")]
    finally:
        sys.setrecursionlimit(old_limit)
    # Suppressions are applied here and nowhere else (see graphlint/suppress.py).
    return suppress.apply(sorted(set(findings), key=Finding.sort_key), source)


def _rule_findings(module, source: str, path: str, codes: frozenset[str] | None) -> list[Finding]:
    findings: list[Finding] = []
    model = build_model(module, source)
    for rule in ALL_RULES:
        if codes is not None and rule.CODE not in codes:
            continue
        for diagnostic in rule.check(model):
            span = diagnostic.span
            findings.append(
                Finding(rule.CODE, diagnostic.message, path, span.line, span.col, span.end_line, span.end_col)
            )
    if model.truncated:
        findings.append(unanalysable(path, model.truncated))
    return findings
