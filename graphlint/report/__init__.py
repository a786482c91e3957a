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
}

# Where each rule's documentation lives: README.md has one section per rule.
DOCS_URL = "https://github.com/graphlint/graphlint#"


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


def write(format_name: str, findings: list[Finding], out: TextIO, options: ReportOptions | None = None) -> None:
    """Render ``findings`` in the named format to ``out``."""
    module = importlib.import_module(FORMATS[format_name])
    module.write(findings, out, options or ReportOptions())


def rule_name(code: str) -> str:
    from graphlint.rules import GL000_NAME, RULES_BY_CODE

    rule = RULES_BY_CODE.get(code)
    if rule is not None:
        return rule.NAME
    return GL000_NAME if code == "GL000" else ""


def rule_url(code: str) -> str | None:
    """A link to the rule's documentation; None for GL000, which is not a rule."""
    name = rule_name(code)
    if code == "GL000" or not name:
        return None
    return f"{DOCS_URL}{code.lower()}-{name}"


def cell_of(finding: Finding) -> int | None:
    """The notebook cell a finding is in (1-based), None for a plain source file."""
    return finding.extra.get("cell")
