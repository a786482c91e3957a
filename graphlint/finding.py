"""The one record every rule, report and integration speaks: a finding."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Finding:
    """A diagnostic at a source range. Lines are 1-based, columns 1-based (Ruff's convention)."""

    code: str
    message: str
    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    # Autofix (issue: autofix) and the dynamic checker's verdict fill these later.
    fix: Any = None
    confirmation: Any = None
    # Extra, format-specific data (notebook cell, ...).
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def sort_key(self) -> tuple:
        # A notebook's lines are counted per cell: its cell orders first.
        return (self.path, self.extra.get("cell", 0), self.line, self.col, self.code, self.message)

    def with_(self, **changes: Any) -> "Finding":
        return replace(self, **changes)
