"""Output formats: each module here renders a list of findings for one audience.

``FORMATS`` maps a ``--output-format`` name to the module that writes it;
modules are imported only when chosen, so the formats a run does not use cost
nothing at start-up. Every writer has the same signature:
``write(findings, out, options)``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TextIO

from graphlint.finding import Finding

FORMATS: dict[str, str] = {
    "text": "graphlint.report.text",
    "json": "graphlint.report.json",
    "sarif": "graphlint.report.sarif",
    "github": "graphlint.report.github",
}

# Where each rule's documentation lives: README.md has one section per rule.
HOMEPAGE = "https://github.com/graphlint/graphlint"
DOCS_URL = HOMEPAGE + "#"

# GL000 is not a rule module; this is its documentation (`graphlint rule GL000`, SARIF).
GL000_DOC = """GL000 unanalysable-input

## What it does
Reports a file that graphlint could not analyse: it could not be read, it is
not text (undecodable bytes, a NUL byte), it does not parse (the message and
position are CPython's), it is too large, or its code is nested too deeply.

## Why is this bad?
Nothing in that file was checked, so a clean result would be a false promise.

## Fix
Fix the syntax error or the encoding, or leave the file out with `exclude` or
`--ignore GL000`.
"""


@dataclass
class ReportOptions:
    # A code frame under each finding: only for a person at a terminal.
    show_source: bool = False
    # Findings only: no summary line.
    quiet: bool = False
    # Counts per code instead of the findings themselves.
    statistics: bool = False
    # Source text of files that are not on disk (stdin), by the finding's path.
    sources: dict[str, str] = field(default_factory=dict)
    # After --fix: how many findings were fixed (None when --fix did not run).
    fixed: int | None = None
    # Unsafe fixes that --unsafe-fixes would have applied.
    hidden_unsafe_fixes: int = 0


def write(format_name: str, findings: list[Finding], out: TextIO, options: ReportOptions | None = None) -> None:
    """Render ``findings`` in the named format to ``out``."""
    module = importlib.import_module(FORMATS[format_name])
    module.write(findings, out, options or ReportOptions())


def rule_name(code: str) -> str:
    from graphlint.rules import rule_name

    return rule_name(code)


def rule_documentation(code: str) -> str:
    """The full documentation of a code (a rule module's docstring, or GL000's text)."""
    if code == "GL000":
        return GL000_DOC.strip()
    from graphlint.rules import rule_doc

    return rule_doc(code)


def rule_url(code: str) -> str | None:
    """A link to the rule's documentation; None for GL000, which is not a rule."""
    name = rule_name(code)
    if code == "GL000" or not name:
        return None
    return f"{DOCS_URL}{code.lower()}-{name}"


def cell_of(finding: Finding) -> int | None:
    """The notebook cell a finding is in (1-based), None for a plain source file."""
    return finding.extra.get("cell")


class SourceLines:
    """Lines of each reported file, read once, from ``sources`` or from disk."""

    def __init__(self, sources: dict[str, str]) -> None:
        self._given = sources
        self._read: dict[str, list[str] | None] = {}
        self._cells: dict[str, dict[int, list[str]]] = {}

    def get(self, path: str) -> list[str] | None:
        if path not in self._read:
            text = self._given.get(path)
            if text is None:
                text = _read_text(path)
            self._read[path] = text.splitlines() if text is not None else None
        return self._read[path]

    def line(self, finding: Finding) -> str | None:
        """The text of the line a finding is reported on (in its cell, for a notebook)."""
        cell = cell_of(finding)
        lines = self.get(finding.path) if cell is None else self._cell(finding.path, cell)
        if lines is None or not 1 <= finding.line <= len(lines):
            return None
        return lines[finding.line - 1]

    def _cell(self, path: str, cell: int) -> list[str] | None:
        if path not in self._cells:
            from graphlint.notebook import NotebookProgram, read_notebook

            text = self._given.get(path) or _read_text(path)
            program = read_notebook(text, path) if text is not None else None
            self._cells[path] = program.cell_lines() if isinstance(program, NotebookProgram) else {}
        return self._cells[path].get(cell)


def _read_text(path: str) -> str | None:
    import io
    import tokenize

    try:
        data = open(path, "rb").read()
    except OSError:
        return None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        encoding = "utf-8"
    try:
        return data.decode(encoding, errors="replace")
    except LookupError:
        return data.decode("utf-8", errors="replace")
