"""--confirm on Jupyter notebooks: run the code cells as one program, talk in cells.

The static side already turns a notebook into one program (its code cells in
order, IPython syntax neutralised in place) and reports findings by cell and
row. Here we run that same program and translate both ways: a finding's
(cell, row) to the program's line, and the "line N" of the evidence back to
"line N" (same cell) or "line N of cell C".
"""

from __future__ import annotations

import re
from dataclasses import replace

from graphlint.notebook import NotebookProgram, is_notebook, read_notebook

__all__ = ["is_notebook", "program_of", "program_line", "evidence_in_cells"]

_LINE = re.compile(r"\bline (\d+)\b")


def program_of(data: str | bytes, path: str) -> tuple:
    """(the notebook's program, None) or (None, why it cannot run)."""
    program = read_notebook(data, path)
    if program is None:
        return None, "the notebook's kernel is not Python"
    if not isinstance(program, NotebookProgram):
        return None, program.message
    return program, None


def program_line(program: NotebookProgram, cell: int | None, row: int) -> int:
    """The program line of ``row`` in ``cell`` (the row itself when the cell is unknown)."""
    if cell is None:
        return row
    for index, (origin_cell, origin_row) in enumerate(program.origins):
        if origin_cell == cell and origin_row == row:
            return index + 1
    return row


def evidence_in_cells(confirmation, program: NotebookProgram, cell: int | None):
    """The verdict with every "line N" of the program said as a cell's line."""

    def in_cell(match: re.Match) -> str:
        other_cell, row = program.cell_position(int(match.group(1)))
        return f"line {row}" if other_cell == cell else f"line {row} of cell {other_cell}"

    return replace(confirmation, evidence=_LINE.sub(in_cell, confirmation.evidence))
