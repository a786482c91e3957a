"""Jupyter notebooks: their code cells become one Python program, and findings go back to cells.

The code cells are concatenated in order, so a loop in cell 4 sees the state
cell 2 set up, exactly as the kernel runs them. IPython syntax is neutralised
line by line without moving anything: every line stays on its line, and a
magic that runs Python (``%time loss.backward()``) keeps that Python at its
column. Findings then name the cell (counted among all cells, as Jupyter and
Ruff do) and the line within it.

A cell that is not valid Python on its own (an exercise's `x = <YOUR CODE>`
placeholder, a half-written line) gets its GL000 and is left out as blank
lines, but for the names it assigns at its top level, which become None: a
later cell then does not read an earlier cell's value in their place. The
other cells are still analysed, since the kernel would still run them.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from dataclasses import dataclass
from typing import Callable

from graphlint.finding import Finding
from graphlint.source import syntax_error_finding, unanalysable

NOTEBOOK_SUFFIX = ".ipynb"

# Cell magics whose body is Python that runs; any other cell magic (%%bash,
# %%html, %%writefile, ...) makes the whole cell something else.
_PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "memit", "profile"})
# Line magics that run the Python after them.
_PYTHON_LINE_MAGICS = frozenset({"time", "timeit", "prun", "debug", "memit"})
_LINE_MAGIC = re.compile(r"^(?P<indent>\s*)(?P<prefix>%(?P<name>\w+)(?:\s+-\S+(?:\s+(?!-)\S+)?)*\s*)(?P<rest>.*)$")
_ASSIGNED_SHELL_OR_MAGIC = re.compile(r"^(?P<target>\s*[\w.\[\], ]+?\s*=\s*)(?P<magic>[!%].*)$")
_NOOP = "pass;"


@dataclass(frozen=True)
class NotebookProgram:
    """The Python of a notebook's code cells, and where each of its lines came from."""

    source: str
    # origins[i] = (cell number counted among all cells from 1, line within that cell) of line i + 1.
    origins: tuple[tuple[int, int], ...]
    # The cells' own lines, before IPython syntax was neutralised (for code frames).
    original_lines: tuple[str, ...] = ()
    # GL000 findings of the cells left out (positioned in this program's lines).
    broken_cells: tuple[Finding, ...] = ()

    def cell_position(self, line: int) -> tuple[int, int]:
        if not self.origins:
            return 1, line
        index = min(max(line, 1), len(self.origins)) - 1
        cell, row = self.origins[index]
        return cell, row + (line - 1 - index)  # past the end (EOF errors) keeps counting in the last cell

    def cell_lines(self) -> dict[int, list[str]]:
        """Each code cell's lines as written in the notebook."""
        cells: dict[int, list[str]] = {}
        for (cell, _), text in zip(self.origins, self.original_lines):
            cells.setdefault(cell, []).append(text)
        return cells


def is_notebook(path: str) -> bool:
    return path.endswith(NOTEBOOK_SUFFIX)


def read_notebook(data: str | bytes, path: str) -> NotebookProgram | Finding | None:
    """The notebook's program; a GL000 finding if it is not a notebook; None if it is not Python."""
    try:
        document = json.loads(data)
    except json.JSONDecodeError as error:
        return unanalysable(path, f"invalid notebook JSON: {error.msg}", error.lineno, error.colno)
    except (UnicodeDecodeError, ValueError) as error:
        return unanalysable(path, f"cannot read notebook: {error}")
    if not isinstance(document, dict):
        return unanalysable(path, "not a Jupyter notebook: the JSON is not an object")
    if not _is_python(document):
        return None
    cells = _cells(document)
    if cells is None:
        return unanalysable(path, "not a Jupyter notebook: no list of cells")
    lines: list[str] = []
    originals: list[str] = []
    origins: list[tuple[int, int]] = []
    broken: list[Finding] = []
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        written = _text(cell.get("source", cell.get("input", ""))).splitlines()
        python = neutralise_ipython(written)
        problem = _syntax_error(python, path, first_line=len(lines) + 1)
        if problem is not None:
            broken.append(problem)
            python = [_binding_left_unknown(line) for line in python]
        for row, (line, original) in enumerate(zip(python, written), start=1):
            lines.append(line)
            originals.append(original)
            origins.append((number, row))
    return NotebookProgram("".join(line + "\n" for line in lines), tuple(origins), tuple(originals), tuple(broken))


# `loss = <YOUR CODE>`, `a, b = ...` at the top of a cell that does not compile.
_TOP_LEVEL_ASSIGNMENT = re.compile(r"^(?P<names>[A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*=(?!=)")


def _binding_left_unknown(line: str) -> str:
    """The line of a left-out cell: blank, but a name it assigns at the top level is
    rebound to None, so later cells do not read an earlier cell's value (a stale loss)
    in place of the one this cell would have set."""
    match = _TOP_LEVEL_ASSIGNMENT.match(line)
    if match is None:
        return ""
    return " = ".join(name.strip() for name in match.group("names").split(",")) + " = None"


def _syntax_error(lines: list[str], path: str, first_line: int) -> Finding | None:
    """A GL000 for a cell CPython does not compile on its own (top-level await allowed, as in IPython)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like: not our business
            # Blank lines before the cell number its lines as the program does, so that
            # CPython's own references ("on line 2") become cell lines like any other.
            padded = "\n" * (first_line - 1) + "\n".join(lines) + "\n"
            compile(padded, path, "exec", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    except SyntaxError as error:  # includes IndentationError and TabError
        return syntax_error_finding(error, path, 1, " (this cell is left out; the other cells are analysed)")
    except (ValueError, RecursionError, MemoryError, OverflowError):
        return None  # the whole program's parse reports these
    return None


def check_notebook(data: str | bytes, path: str, check_python: Callable[[str], list[Finding]]) -> list[Finding]:
    """Findings of a notebook, positioned in cells; ``check_python`` analyses the program."""
    program = read_notebook(data, path)
    if program is None:
        return []
    if isinstance(program, Finding):
        return [program]
    findings = list(program.broken_cells)
    if any(line.strip() for line in program.source.splitlines()):
        findings += check_python(program.source)
    return [to_cell(finding, program) for finding in findings]


def to_cell(finding: Finding, program: NotebookProgram) -> Finding:
    cell, row = program.cell_position(finding.line)
    end_cell, end_row = program.cell_position(finding.end_line)
    end_col = finding.end_col
    if end_cell != cell:  # a range never crosses into the next cell
        end_row, end_col = row, finding.col
    extra = {**finding.extra, "cell": cell}
    if "noqa_row" in extra:
        noqa_cell, noqa_row = program.cell_position(extra["noqa_row"])
        extra["noqa_row"] = noqa_row if noqa_cell == cell else row
    message = _LINE_REFERENCE.sub(lambda match: _cell_reference(match, cell, program), finding.message)
    return finding.with_(message=message, line=row, end_line=end_row, end_col=end_col, extra=extra)


# Messages point at other lines ("the graph built at line 12"); in a notebook
# those are lines of the concatenated program and must become cell lines.
_LINE_REFERENCE = re.compile(r"\bline (\d+)\b")


def _cell_reference(match: re.Match, cell: int, program: NotebookProgram) -> str:
    other_cell, row = program.cell_position(int(match.group(1)))
    return f"line {row}" if other_cell == cell else f"line {row} of cell {other_cell}"


def _is_python(document: dict) -> bool:
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        return True
    for key, field in (("language_info", "name"), ("kernelspec", "language")):
        section = metadata.get(key)
        if isinstance(section, dict) and isinstance(section.get(field), str):
            return section[field].lower() == "python"
    return True


def _cells(document: dict) -> list | None:
    cells = document.get("cells")
    if cells is None and isinstance(document.get("worksheets"), list) and document["worksheets"]:
        cells = document["worksheets"][0].get("cells")  # nbformat 3
    return cells if isinstance(cells, list) else None


def _text(source) -> str:
    if isinstance(source, list):
        return "".join(part for part in source if isinstance(part, str))
    return source if isinstance(source, str) else ""


def neutralise_ipython(lines: list[str]) -> list[str]:
    """The lines with IPython-only syntax made into Python that keeps every position."""
    if lines and lines[0].lstrip().startswith("%%"):
        name = lines[0].lstrip()[2:].split(maxsplit=1)[0] if lines[0].lstrip()[2:].strip() else ""
        if name not in _PYTHON_CELL_MAGICS:
            return ["" for _ in lines]  # the cell is shell, HTML, a file to write...
        lines = [_blank(lines[0])] + lines[1:]
    result = []
    scanner = _LogicalLines()
    command_continues = False  # `!pip install x \` goes on on the next line
    for line in lines:
        command = command_continues
        if command_continues:
            result.append("")
        elif scanner.at_statement_start():
            python, command = _neutralise_line(line)
            result.append(python)
            scanner.feed(python)
        else:
            result.append(line)
            scanner.feed(line)
        command_continues = command and line.rstrip().endswith("\\")
    return result


def _blank(line: str) -> str:
    indent = line[: len(line) - len(line.lstrip())]
    return indent + "pass"


def _neutralise_line(line: str) -> tuple[str, bool]:
    """The line as Python, and whether it was an IPython command (shell, help, magic)
    whose text, continued by a backslash, goes on on the next line."""
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return line, False
    indent = line[: len(line) - len(line.lstrip())]
    if stripped.startswith("!") or stripped.startswith("?") or (stripped.endswith("?") and "#" not in stripped):
        return indent + "pass", True  # shell command or help request
    magic = _LINE_MAGIC.match(line)
    if magic:
        if magic.group("name") in _PYTHON_LINE_MAGICS and magic.group("rest").strip():
            prefix = magic.group("prefix")
            # The Python after the magic keeps its column: the prefix becomes "pass;" plus padding.
            padding = _NOOP.ljust(len(prefix)) if len(prefix) >= len(_NOOP) else None
            if padding is not None:
                return magic.group("indent") + padding + magic.group("rest"), False
        return indent + "pass", True
    assigned = _ASSIGNED_SHELL_OR_MAGIC.match(line)
    if assigned:
        return assigned.group("target") + "None", True  # files = !ls  /  t = %timeit -o f()
    return line, False


class _LogicalLines:
    """Knows whether the next physical line starts a statement (not inside brackets or a string)."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote: str | None = None  # the open triple quote, if any
        self.continued = False

    def at_statement_start(self) -> bool:
        return self.depth == 0 and self.quote is None and not self.continued

    def feed(self, line: str) -> None:
        index = 0
        length = len(line)
        while index < length:
            if self.quote is not None:
                end = line.find(self.quote, index)
                if end < 0:
                    return
                index = end + 3
                self.quote = None
                continue
            char = line[index]
            if char == "#":
                break
            if char in "\"'":
                triple = line[index : index + 3]
                if triple in ('"""', "'''"):
                    self.quote = triple
                    index += 3
                    continue
                index = self._skip_string(line, index, char)
                continue
            if char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(0, self.depth - 1)
            index += 1
        self.continued = self.quote is None and line.rstrip().endswith("\\") and "#" not in line

    @staticmethod
    def _skip_string(line: str, index: int, quote: str) -> int:
        index += 1
        while index < len(line):
            if line[index] == "\\":
                index += 2
                continue
            if line[index] == quote:
                return index + 1
            index += 1
        return index
