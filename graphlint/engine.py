"""Check many files: read each one and run the single-file checker on it.

One bad file never hides another file's findings: every failure to read a file
becomes a GL000 finding for that file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from graphlint.checker import check_source, unanalysable
from graphlint.finding import Finding


@dataclass(frozen=True)
class Settings:
    """Everything that changes a file's findings (and so keys the cache)."""

    codes: frozenset[str]


def check_file(path: Path, settings: Settings) -> list[Finding]:
    display = str(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        return [unanalysable(display, f"cannot read file: {error.strerror or error}")]
    return check_source(data, display, settings.codes)


def check_files(paths: list[Path], settings: Settings) -> list[Finding]:
    """Findings of all files, in a stable order (by path, then position)."""
    findings: list[Finding] = []
    for path in paths:
        findings.extend(check_file(path, settings))
    return sorted(findings, key=Finding.sort_key)
