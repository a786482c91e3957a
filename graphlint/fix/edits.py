"""A fix is a set of text edits, in Ruff's JSON shape, marked safe or unsafe.

Positions are 1-based rows and columns (Ruff's convention, the same as a
Finding's), columns counting characters. An edit replaces the text from
``start`` up to (not including) ``end`` with ``content``; an insertion has
``start == end``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SAFE = "safe"
UNSAFE = "unsafe"

_NEWLINE = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, order=True)
class Edit:
    start: tuple[int, int]
    end: tuple[int, int]
    content: str

    def to_json(self) -> dict:
        return {
            "content": self.content,
            "location": {"row": self.start[0], "column": self.start[1]},
            "end_location": {"row": self.end[0], "column": self.end[1]},
        }

    def touched_rows(self) -> range:
        """Rows whose existing text this edit changes (an insertion at a line start changes none)."""
        if self.start == self.end and self.start[1] == 1:
            return range(0)
        last = self.end[0] - 1 if self.end[1] == 1 and self.end[0] > self.start[0] else self.end[0]
        return range(self.start[0], last + 1)


@dataclass(frozen=True)
class Fix:
    message: str
    applicability: str
    edits: tuple[Edit, ...]

    def to_json(self) -> dict:
        return {
            "applicability": self.applicability,
            "message": self.message,
            "edits": [edit.to_json() for edit in sorted(self.edits)],
        }

    @property
    def is_safe(self) -> bool:
        return self.applicability == SAFE

    def span(self) -> tuple[tuple[int, int], tuple[int, int]]:
        return min(edit.start for edit in self.edits), max(edit.end for edit in self.edits)


def line_starts(text: str) -> list[int]:
    """Offset of each line's first character; the lines libcst and CPython count (\\r\\n, \\r, \\n)."""
    return [0] + [match.end() for match in _NEWLINE.finditer(text)]


def dominant_newline(text: str) -> str:
    counts: dict[str, int] = {}
    for match in _NEWLINE.finditer(text):
        counts[match.group()] = counts.get(match.group(), 0) + 1
    return max(counts, key=lambda newline: counts[newline]) if counts else "\n"


def apply_edits(text: str, edits: list[Edit]) -> str:
    """``text`` with non-overlapping ``edits`` applied (inserted text keeps the file's newline)."""
    starts = line_starts(text)
    newline = dominant_newline(text)

    def offset(position: tuple[int, int]) -> int:
        row, column = position
        if row > len(starts):  # just past the last line
            return len(text)
        return starts[row - 1] + column - 1

    pieces = []
    cursor = len(text)
    for edit in sorted(edits, reverse=True):
        begin, finish = offset(edit.start), offset(edit.end)
        if finish > cursor:
            raise ValueError("overlapping edits")
        pieces.append(text[finish:cursor])
        pieces.append(edit.content.replace("\n", newline) if newline != "\n" else edit.content)
        cursor = begin
    pieces.append(text[:cursor])
    return "".join(reversed(pieces))


def overlaps(a: Fix, b: Fix) -> bool:
    """Two fixes conflict when any of their edits touch the same text (or insert at the same point)."""
    for x in a.edits:
        for y in b.edits:
            if x.start < y.end and y.start < x.end:
                return True
            if x.start == y.start or x.end == y.end:
                return True
    return False
