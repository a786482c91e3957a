"""Ruff's text shape: ``path:line:col: CODE message``, a code frame on a terminal, a summary."""

from __future__ import annotations

from collections import Counter
from typing import TextIO

from graphlint.finding import Finding
from graphlint.report import ReportOptions, SourceLines, cell_of, rule_name

_TAB_WIDTH = 4


def write(findings: list[Finding], out: TextIO, options: ReportOptions) -> None:
    if options.statistics:
        write_statistics(findings, out)
    else:
        sources = SourceLines(options.sources)
        for finding in findings:
            out.write(f"{location(finding)}: {finding.code} {finding.message}\n")
            if finding.confirmation is not None:
                out.write(f"  {finding.confirmation.line()}\n")
            if options.show_source:
                out.write(code_frame(finding, sources.line(finding)))
    if not options.quiet:
        out.write(summary(findings, options.fixed) + "\n")
        if options.hidden_unsafe_fixes:
            count = options.hidden_unsafe_fixes
            out.write(
                f"{count} hidden fix{'' if count == 1 else 'es'} can be enabled with the `--unsafe-fixes` option.\n"
            )


def location(finding: Finding) -> str:
    cell = cell_of(finding)
    where = f"{finding.path}:cell {cell}" if cell is not None else finding.path
    return f"{where}:{finding.line}:{finding.col}"


def summary(findings: list[Finding], fixed: int | None = None) -> str:
    if fixed:  # Ruff's shape after --fix
        total = fixed + len(findings)
        return f"Found {total} error{'' if total == 1 else 's'} ({fixed} fixed, {len(findings)} remaining)."
    if not findings:
        return "All checks passed!"
    return f"Found {len(findings)} error{'' if len(findings) == 1 else 's'}."


def write_statistics(findings: list[Finding], out: TextIO) -> None:
    """Ruff's ``--statistics`` table: count, code, name; most frequent first."""
    counts = Counter(finding.code for finding in findings)
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if not rows:
        return
    count_width = max(len(str(count)) for _, count in rows)
    code_width = max(len(code) for code, _ in rows)
    for code, count in rows:
        out.write(f"{count:>{count_width}}\t{code:<{code_width}}\t{rule_name(code)}\n")


def code_frame(finding: Finding, text: str | None) -> str:
    """The reported line with carets under the reported range, in Ruff's gutter style."""
    if text is None:
        return ""
    start = len(text[: finding.col - 1].expandtabs(_TAB_WIDTH))
    end_col = finding.end_col if finding.end_line == finding.line else len(text) + 1
    end = len(text[: end_col - 1].expandtabs(_TAB_WIDTH))
    shown = text.expandtabs(_TAB_WIDTH).rstrip()
    number = str(finding.line)
    gutter = " " * len(number)
    carets = "^" * max(1, min(end, len(shown)) - start)
    return (
        f"{gutter} |\n"
        f"{number} | {shown}\n"
        f"{gutter} | {' ' * start}{carets}\n"
        f"{gutter} |\n"
        "\n"
    )
