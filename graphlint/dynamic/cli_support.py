"""What the command line needs from the dynamic checker, in one place.

``run_confirm`` runs --confirm with the progress display and --verbose
output; ``verdict_lines`` and ``verdict_json`` render a finding's verdict for
the text and JSON reports; ``counts_toward_exit`` is the exit-code rule.
"""

from __future__ import annotations

import sys

from graphlint.dynamic import ConfirmOptions, FileRun, confirm, counts_toward_exit
from graphlint.dynamic.progress import ProgressDisplay

__all__ = ["run_confirm", "verdict_lines", "verdict_json", "counts_toward_exit", "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 30.0


def run_confirm(findings: list, sources: dict | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                python: str | None = None, verbose: bool = False, progress: bool = False,
                stream=None) -> list:
    """Confirm ``findings``; progress and --verbose output go to ``stream`` (stderr)."""
    stream = stream or sys.stderr
    paths = {f.path for f in findings if f.code != "GL000"}
    display = ProgressDisplay(stream, len(paths)) if progress and paths else None
    runs: list = []

    def done(run: FileRun) -> None:
        runs.append(run)
        if display is not None:
            display.file_done(run)

    options = ConfirmOptions(
        timeout=timeout,
        python=python,
        on_file_start=display.file_started if display is not None else None,
        on_file_done=done,
    )
    try:
        result = confirm(findings, sources or {}, options)
    finally:
        if display is not None:
            display.close()
    if verbose:
        for run in sorted(runs, key=lambda r: r.path):
            stream.write(_output_of(run))
        stream.flush()
    return result


def _output_of(run: FileRun) -> str:
    parts = [f"--- {run.path}: ran {run.seconds:.2f} s; {run.outcome}\n"]
    for name, text in (("stdout", run.stdout), ("stderr", run.stderr)):
        if text.strip():
            parts.append(f"--- {name}:\n{text.rstrip()}\n")
    return "".join(parts)


def verdict_lines(finding) -> list:
    """Lines for the text report, printed under the finding (none without --confirm)."""
    confirmation = getattr(finding, "confirmation", None)
    if confirmation is None:
        return []
    return [f"  {confirmation.line()}"]


def verdict_json(finding) -> dict | None:
    """The JSON ``confirmation`` object: status, evidence, iterations, seconds."""
    confirmation = getattr(finding, "confirmation", None)
    return confirmation.to_json() if confirmation is not None else None
