"""Suppression comments: the flake8/Ruff ``# noqa`` family and ``# graphlint: ignore[...]``.

Accepted on the line a finding is reported at (or on its ``noqa_row``, see
below), case- and space-tolerant:

    # noqa                          every finding on the line
    # noqa: GL001,GL003             those codes (or code prefixes, as in flake8)
    # graphlint: ignore             every graphlint finding on the line
    # graphlint: ignore[GL001, GL003]

Comments are found with ``tokenize``, so a ``# noqa`` inside a string literal
is text, not a directive.

The ``noqa_row`` is Ruff's: the row a suppression comment has to go on. It
is the reported line, except inside a multi-line string (the string's last
line) or a backslash-continued statement (its last physical line), where a
comment cannot be written.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass

from graphlint.finding import Finding

# flake8's shape: "# noqa" optionally followed by ":" and a list of codes.
_NOQA = re.compile(
    r"#\s*noqa\b(?:\s*:\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?",
    re.IGNORECASE,
)
_GRAPHLINT_IGNORE = re.compile(
    r"#\s*graphlint\s*:\s*ignore\b(?:\s*\[(?P<codes>[^\]]*)\])?",
    re.IGNORECASE,
)
_CODE_SEPARATOR = re.compile(r"[\s,]+")
# Python 3.12+ tokenizes f-strings as START ... END; older versions as one STRING.
_FSTRING_START = getattr(tokenize, "FSTRING_START", None)
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)


@dataclass(frozen=True)
class Directive:
    """One suppression comment; ``codes`` is None for a blanket suppression."""

    line: int
    codes: frozenset[str] | None

    def covers(self, code: str) -> bool:
        if self.codes is None:
            return True
        return any(code.startswith(prefix) for prefix in self.codes)


@dataclass
class SourceComments:
    """What suppression needs to know about one source text."""

    directives: dict[int, list[Directive]]
    # Line -> the row its suppression comment belongs on, where that differs.
    noqa_rows: dict[int, int]

    def noqa_row(self, line: int) -> int:
        return self.noqa_rows.get(line, line)

    def suppresses(self, finding: Finding) -> bool:
        rows = {finding.line, self.noqa_row(finding.line)}
        return any(
            directive.covers(finding.code) for row in rows for directive in self.directives.get(row, ())
        )


def parse_directive(comment: str, line: int) -> Directive | None:
    """The suppression a comment token carries, if any."""
    match = _NOQA.search(comment)
    if match is not None:
        return Directive(line, _codes(match.group("codes")))
    match = _GRAPHLINT_IGNORE.search(comment)
    if match is not None:
        return Directive(line, _codes(match.group("codes")))
    return None


def _codes(text: str | None) -> frozenset[str] | None:
    if text is None:
        return None
    codes = frozenset(code.upper() for code in _CODE_SEPARATOR.split(text) if code)
    # "# noqa:" or "[]" with nothing usable is treated as blanket, as flake8 does.
    return codes or None


def scan(source: str) -> SourceComments:
    """Directives and noqa rows of ``source``; text that stops tokenizing keeps what came before."""
    directives: dict[int, list[Directive]] = {}
    spans: list[tuple[int, int]] = []  # (first, last) line of multi-line strings
    comment_lines: set[int] = set()
    string_interior: set[int] = set()  # lines whose end lies inside a string
    fstring_starts: list[int] = []  # Python 3.12+ splits f-strings into several tokens
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                comment_lines.add(token.start[0])
                directive = parse_directive(token.string, token.start[0])
                if directive is not None:
                    directives.setdefault(directive.line, []).append(directive)
            elif token.type == _FSTRING_START:
                fstring_starts.append(token.start[0])
            elif token.type == tokenize.STRING or (token.type == _FSTRING_END and fstring_starts):
                first = token.start[0] if token.type == tokenize.STRING else fstring_starts.pop()
                if token.end[0] > first:
                    spans.append((first, token.end[0]))
                    string_interior.update(range(first, token.end[0]))
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass  # Unterminated input: the directives before the error still count.
    spans.extend(_continuations(source, comment_lines, string_interior))
    return SourceComments(directives, _rows_from_spans(spans))


def _continuations(source: str, comment_lines: set[int], string_interior: set[int]) -> list[tuple[int, int]]:
    """Runs of physical lines joined by a trailing backslash."""
    runs: list[tuple[int, int]] = []
    start: int | None = None
    for number, text in enumerate(source.splitlines(), start=1):
        continued = (
            text.endswith("\\") and number not in comment_lines and number not in string_interior
        )
        if continued and start is None:
            start = number
        elif not continued and start is not None:
            runs.append((start, number))
            start = None
    return runs


def _rows_from_spans(spans: list[tuple[int, int]]) -> dict[int, int]:
    """Merge overlapping spans; every line of a merged span maps to its last line."""
    rows: dict[int, int] = {}
    merged: list[list[int]] = []
    for first, last in sorted(spans):
        if merged and first <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    for first, last in merged:
        for line in range(first, last):
            rows[line] = last
    return rows


def apply(findings: list[Finding], source: str) -> list[Finding]:
    """Drop suppressed findings; record a ``noqa_row`` that differs from the line in ``extra``."""
    if not findings:
        return findings
    comments = scan(source)
    kept: list[Finding] = []
    for finding in findings:
        if comments.suppresses(finding):
            continue
        row = comments.noqa_row(finding.line)
        if row != finding.line:
            finding = finding.with_(extra={**finding.extra, "noqa_row": row})
        kept.append(finding)
    return kept


def noqa_row(finding: Finding) -> int:
    """The row a suppression comment for ``finding`` goes on (Ruff's JSON ``noqa_row``)."""
    return finding.extra.get("noqa_row", finding.line)
