"""The dynamic checker behind ``graphlint check --confirm``.

``confirm(findings, sources, options)`` runs the flagged code of every file
under torch, in child processes, and returns the findings with their
``confirmation`` set (a ``Confirmation``: status, evidence, iterations,
seconds). It never raises for anything the user's code does; a file that
cannot be driven gets "inconclusive" verdicts with the reason.

This executes the code being checked (see README, "Confirming findings").
"""

from __future__ import annotations

import io
import os
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from graphlint.dynamic import notebooks
from graphlint.dynamic.harness import PoolSettings, child_environment, default_python, run_jobs
from graphlint.dynamic.verdict import (
    CONFIRMED,
    INCONCLUSIVE,
    NOT_REPRODUCED,
    Confirmation,
    counts_toward_exit,
    from_child,
    inconclusive,
)

__all__ = [
    "CONFIRMED", "INCONCLUSIVE", "NOT_REPRODUCED", "Confirmation", "ConfirmOptions", "FileRun",
    "confirm", "counts_toward_exit",
]

# GL000 reports input we could not analyse: there is no flagged code to run.
UNCONFIRMABLE = frozenset({"GL000"})


@dataclass(frozen=True)
class FileRun:
    """One file's run, for progress displays and --verbose."""

    path: str
    verdicts: tuple
    stdout: str
    stderr: str
    seconds: float
    outcome: str


@dataclass(frozen=True)
class ConfirmOptions:
    timeout: float = 30.0  # wall clock per file (--confirm-timeout)
    python: str | None = None  # interpreter of the child (--python); None: this one
    workers: int | None = None  # children in parallel; None: the CPU count (at most 8)
    memory_mb: int = 4096  # address space a file may add to what importing torch takes
    iterations: int = 3  # iterations through the flagged lines before a loop is stopped
    cwd: str | None = None  # where the code runs; None: the current directory
    startup_timeout: float = 180.0  # importing torch in a child
    on_file_start: Callable[[str], None] | None = None
    on_file_done: Callable[[FileRun], None] | None = None


def confirm(findings: list, sources: dict, options: ConfirmOptions | None = None) -> list:
    """The findings, in the same order, with ``confirmation`` set (None for GL000)."""
    options = options or ConfirmOptions()
    by_path: dict = {}
    for index, finding in enumerate(findings):
        if finding.code not in UNCONFIRMABLE:
            by_path.setdefault(finding.path, []).append(index)
    verdicts: dict = {}
    jobs, job_paths, programs = [], {}, {}
    for path, indexes in by_path.items():
        source, problem = _source_of(path, sources)
        lines = {i: findings[i].line for i in indexes}
        if problem is None and notebooks.is_notebook(path):
            program, problem = notebooks.program_of(source, path)
            if program is not None:
                programs[path] = program
                source = program.source
                lines = {i: notebooks.program_line(program, findings[i].extra.get("cell"), findings[i].line)
                         for i in indexes}
        if problem is not None:
            for index in indexes:
                verdicts[index] = inconclusive(problem)
            continue
        job = {
            "id": len(jobs) + 1,
            "path": os.path.abspath(path),
            "source": source,
            "findings": [
                {"index": i, "code": findings[i].code, "line": lines[i], "col": findings[i].col}
                for i in indexes
            ],
            "timeout": float(options.timeout),
            "memory_mb": int(options.memory_mb),
            "iterations": int(options.iterations),
            "cwd": os.path.abspath(options.cwd or os.getcwd()),
        }
        jobs.append(job)
        job_paths[job["id"]] = (path, indexes)

    def started(job: dict) -> None:
        if options.on_file_start is not None:
            options.on_file_start(job_paths[job["id"]][0])

    def done(job: dict, message: dict) -> None:
        path, indexes = job_paths[job["id"]]
        found = from_child(indexes, message)
        if path in programs:
            found = {i: notebooks.evidence_in_cells(v, programs[path], findings[i].extra.get("cell"))
                     for i, v in found.items()}
        verdicts.update(found)
        if options.on_file_done is not None:
            report = message.get("report") or {}
            outcome = report.get("outcome") or (message.get("exit") or {}).get("reason", "")
            options.on_file_done(FileRun(
                path, tuple(found[i] for i in indexes), message.get("stdout", ""), message.get("stderr", ""),
                float(message.get("seconds") or 0.0), outcome,
            ))

    if jobs:
        settings = PoolSettings(
            python=options.python or default_python(),
            workers=options.workers or min(os.cpu_count() or 1, 8),
            startup_timeout=options.startup_timeout,
            cwd=os.path.abspath(options.cwd or os.getcwd()),
            env=child_environment(),
        )
        run_jobs(jobs, settings, on_start=started, on_done=done)
    return [
        finding.with_(confirmation=verdicts.get(index, inconclusive("the checker did not report on this finding")))
        if index in verdicts or finding.code not in UNCONFIRMABLE else finding
        for index, finding in enumerate(findings)
    ]


def _source_of(path: str, sources: dict) -> tuple:
    source = sources.get(path) if sources else None
    if source is None:
        try:
            source = Path(path).read_bytes()
        except OSError as error:
            return None, f"cannot read the file: {error.strerror or error}"
    if notebooks.is_notebook(path):
        return source, None  # JSON: notebooks.program_of reads it
    if isinstance(source, bytes):
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
            source = source.decode(encoding)
        except (UnicodeDecodeError, LookupError, SyntaxError) as error:
            return None, f"cannot decode the file: {error}"
    return source, None
