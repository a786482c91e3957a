"""What ``graphlint check --fix / --unsafe-fixes / --diff`` does around the engine's findings."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, TextIO

from graphlint.finding import Finding


@dataclass
class FixRun:
    """The findings left to report, and what fixing did."""

    findings: list[Finding]
    fixed: int = 0
    diffs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Fixes left unapplied because they are unsafe and --unsafe-fixes was not given.
    hidden_unsafe: int = 0


def _by_path(findings: list[Finding]) -> dict[str, list[Finding]]:
    grouped: dict[str, list[Finding]] = defaultdict(list)
    for finding in findings:
        grouped[finding.path].append(finding)
    return grouped


def _fixable_file(path: str, findings: list[Finding]) -> bool:
    from graphlint.fix import FIXERS

    return (
        not path.endswith(".ipynb")
        and any(f.code in FIXERS for f in findings)
        and not any(f.code == "GL000" for f in findings)
    )


def with_fixes(findings: list[Finding], sources: dict[str, str]) -> list[Finding]:
    """``findings`` with the fixes graphlint offers for them (for JSON and SARIF)."""
    from graphlint.fix import attach_fixes
    from graphlint.report import _read_text

    result = []
    for path, group in _by_path(findings).items():
        text = sources.get(path)
        if text is None and _fixable_file(path, group):
            text = _read_text(path)
        if text is None or not _fixable_file(path, group):
            result.extend(group)
            continue
        result.extend(attach_fixes(group, text, path))
    return sorted(result, key=Finding.sort_key)


def fix_files(
    findings: list[Finding], codes_for: Callable[[str], frozenset[str] | None], unsafe: bool, write: bool
) -> FixRun:
    """Fix every file with a fixable finding; with ``write`` False only compute the diffs."""
    from graphlint.fix.files import fix_file

    run = FixRun([])
    for path, group in _by_path(findings).items():
        if not _fixable_file(path, group):
            run.findings.extend(group)
            continue
        result = fix_file(path, group, codes_for(path), unsafe, write)
        if result is None:
            run.findings.extend(group)
            continue
        if result.error:
            run.errors.append(f"{path}: {result.error}")
        run.fixed += len(result.fixed)
        run.findings.extend(result.remaining)
        diff = result.diff()
        if diff:
            run.diffs.append(diff)
    run.findings.sort(key=Finding.sort_key)
    run.hidden_unsafe = sum(1 for f in run.findings if f.fix is not None and not f.fix.is_safe and not unsafe)
    return run


def fix_stdin(text: str, name: str, codes: frozenset[str] | None, unsafe: bool, findings: list[Finding]):
    """The fixed text of a source read from stdin, and the findings left in it."""
    from graphlint.fix import fix_text

    if not _fixable_file(name, findings):
        return text, FixRun(findings)
    outcome = fix_text(text, name, codes, unsafe, findings=findings)
    return outcome.text, FixRun(outcome.remaining, fixed=len(outcome.fixed))


def stdin_diff(name: str, before: str, after: str) -> str:
    import difflib

    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True), name, name))


def write_diffs(run: FixRun, out: TextIO) -> None:
    for diff in run.diffs:
        out.write(diff)
        if not diff.endswith("\n"):
            out.write("\n")
