"""A flake8 plugin, for teams whose editor and CI already run flake8: ``flake8 --select GL``.

Registered as the ``GL`` extension (see pyproject.toml). flake8 hands over the
file's lines; graphlint analyses them exactly as ``graphlint check`` would and
reports the same codes at the same places (flake8 counts columns from 0, so
they are shifted by one on the way out). flake8 itself reports files that do
not parse (E999) and applies ``# noqa``.
"""

from __future__ import annotations

import ast
from typing import Iterator

from graphlint import __version__


class GraphlintChecker:
    name = "graphlint"
    version = __version__

    def __init__(self, tree: ast.AST, filename: str, lines: list[str]) -> None:
        # ``tree`` is required for flake8 to call this plugin once per file; graphlint
        # parses the file itself.
        self.filename = filename
        self.lines = lines

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        from graphlint.checker import check_source

        for finding in check_source("".join(self.lines), self.filename):
            yield finding.line, max(finding.col - 1, 0), f"{finding.code} {finding.message}", type(self)
