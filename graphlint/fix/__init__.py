"""Autofix: each rule's repair as edits on the file's libcst tree (Ruff's fix model).

``attach_fixes`` fills ``Finding.fix`` for the findings of one source text;
``fix_text`` applies them (iterating until nothing applicable is left, so
several fixes in one file compose); ``graphlint.fix.files`` writes files.
A fix is offered only when the shape of the code is clear; otherwise the
finding's message says how to fix it by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from graphlint.finding import Finding
from graphlint.fix import gl001, gl002, gl003, gl004, gl005
from graphlint.fix.document import Document
from graphlint.fix.edits import SAFE, UNSAFE, Edit, Fix, apply_edits, overlaps

__all__ = ["Edit", "Fix", "SAFE", "UNSAFE", "FixOutcome", "attach_fixes", "fix_text"]

FIXERS: dict[str, Callable[[Finding, Document], Fix | None]] = {
    "GL001": gl001.fix,
    "GL002": gl002.fix,
    "GL003": gl003.fix,
    "GL004": gl004.fix,
    "GL005": gl005.fix,
}

# Each round re-analyses the file; fixes that touch the same text wait for the next round.
MAX_ROUNDS = 10


def document_for(text: str, path: str) -> Document | None:
    from graphlint.source import parse

    if path.endswith(".ipynb"):
        return None  # notebook cells are not fixed in place
    if isinstance(parse(text, path), Finding):  # CPython's verdict, and the depth bound, first
        return None
    return Document.parse(text)


def attach_fixes(findings: list[Finding], text: str, path: str) -> list[Finding]:
    """``findings`` (of ``text``) with ``fix`` set where a fix is offered."""
    if not any(finding.code in FIXERS for finding in findings):
        return findings
    document = document_for(text, path)
    if document is None:
        return findings
    from graphlint import suppress

    suppressed_rows = set(suppress.scan(text).directives)
    result = []
    for finding in findings:
        fixer = FIXERS.get(finding.code)
        fix = None
        if fixer is not None and finding.fix is None and "cell" not in finding.extra:
            try:
                fix = fixer(finding, document)
            except Exception:  # a fixer bug costs its fix, never the run
                import os

                if os.environ.get("GRAPHLINT_DEBUG"):
                    raise
                fix = None
            if fix is not None and _touches(fix, suppressed_rows):
                fix = None  # never edit a line that carries a suppression comment
        result.append(finding.with_(fix=fix) if fix is not None else finding)
    return result


def _touches(fix: Fix, rows: set[int]) -> bool:
    return any(row in rows for edit in fix.edits for row in edit.touched_rows())


@dataclass
class FixOutcome:
    text: str
    fixed: list[Finding] = field(default_factory=list)
    remaining: list[Finding] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.fixed)


def applicable(finding: Finding, unsafe: bool) -> bool:
    return isinstance(finding.fix, Fix) and (finding.fix.is_safe or unsafe)


def fix_text(
    text: str,
    path: str,
    codes: frozenset[str] | None = None,
    unsafe: bool = False,
    findings: list[Finding] | None = None,
) -> FixOutcome:
    """Apply every applicable fix to ``text``; the findings fixed and those that remain."""
    from graphlint.checker import check_source

    outcome = FixOutcome(text)
    for _ in range(MAX_ROUNDS):
        if findings is None:
            findings = check_source(text, path, codes)
        findings = attach_fixes(findings, text, path)
        chosen = _non_overlapping([f for f in findings if applicable(f, unsafe)])
        new_text = _apply_parsing(text, path, chosen)
        if new_text is None:
            break
        text, applied = new_text
        findings = None
        outcome.fixed.extend(applied)
    outcome.text = text
    outcome.remaining = attach_fixes(findings if findings is not None else check_source(text, path, codes), text, path)
    return outcome


def _non_overlapping(findings: list[Finding]) -> list[Finding]:
    chosen: list[Finding] = []
    for finding in sorted(findings, key=lambda f: (f.fix.span(), f.sort_key())):
        if not any(overlaps(finding.fix, other.fix) for other in chosen):
            chosen.append(finding)
    return chosen


def _apply_parsing(text: str, path: str, chosen: list[Finding]) -> tuple[str, list[Finding]] | None:
    """The text with ``chosen`` applied, dropping any fix whose result would not parse."""
    if not chosen:
        return None
    candidate = _apply(text, chosen)
    if candidate is not None and _parses(candidate, path):
        return candidate, chosen
    # One fix breaks the code: keep those that parse on their own, together.
    kept = [finding for finding in chosen if (one := _apply(text, [finding])) is not None and _parses(one, path)]
    if not kept or len(kept) == len(chosen):
        return None
    return _apply_parsing(text, path, kept)


def _apply(text: str, findings: list[Finding]) -> str | None:
    try:
        new_text = apply_edits(text, [edit for finding in findings for edit in finding.fix.edits])
    except ValueError:
        return None
    return new_text if new_text != text else None


def _parses(text: str, path: str) -> bool:
    import libcst

    try:
        compile(text, path, "exec", dont_inherit=True)
        libcst.parse_module(text)
    except (SyntaxError, ValueError, libcst.ParserSyntaxError, RecursionError, MemoryError):
        return False
    return True
