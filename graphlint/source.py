"""From a file's bytes to the model's syntax tree, or one GL000 finding saying why not.

Every way input can be unusable ends here as a short, human message at the
right position: bytes that are not text, a NUL byte, a file too large to
analyse in reasonable time, code nested too deeply, and syntax errors, which
carry CPython's own message and position (what users know from running their
code): the tree is CPython's parser's, turned into the model's node classes
(graphlint/model/from_ast.py).
"""

from __future__ import annotations

import ast
import io
import threading
import tokenize
import warnings
from typing import TYPE_CHECKING

from graphlint.finding import Finding

if TYPE_CHECKING:
    from graphlint.model import syntax

# Past this size one file would stall a whole run (and a pre-commit hook): the
# analysis, not the parse, grows faster than the file. It is reported instead.
MAX_SOURCE_BYTES = 1_000_000

# The tree is built, and analysed, by recursion as deep as an expression:
# CPython's parser rejects more than 200 nested brackets, but a chain of
# 10,000 binary operators is 10,000 levels deep. The build measures the depth
# as it goes (graphlint/model/from_ast.py), and anything deeper than this is
# reported instead of analysed.
MAX_EXPRESSION_DEPTH = 1_000
# The tree is built on a thread with a big stack: deep (bounded) recursion
# there is mere slowness, where the main thread's stack could overflow.
_PARSER_STACK_BYTES = 256 * 1024 * 1024


def unanalysable(path: str, message: str, line: int = 1, col: int = 1, end_line: int | None = None, end_col: int | None = None) -> Finding:
    """A GL000 finding: the file (or part of it) could not be analysed."""
    return Finding("GL000", message, path, line, col, end_line or line, end_col or col)


def read_text(source: str | bytes, path: str) -> str | Finding:
    """The source as text, or a GL000 finding saying why it is not Python text."""
    size = len(source)
    if size > MAX_SOURCE_BYTES:
        return unanalysable(
            path,
            f"file is too large to analyse ({size / 1e6:.1f} MB; the limit is {MAX_SOURCE_BYTES / 1e6:g} MB)",
        )
    if isinstance(source, bytes):
        nul = source.find(b"\x00")
        if nul >= 0:
            line, col = _byte_position(source, nul)
            return unanalysable(path, "file contains a NUL byte; it is not Python source", line, col)
        return _decode(source, path)
    nul = source.find("\x00")
    if nul >= 0:
        line = source.count("\n", 0, nul) + 1
        col = nul - (source.rfind("\n", 0, nul) + 1) + 1
        return unanalysable(path, "file contains a NUL byte; it is not Python source", line, col)
    return source


def _decode(data: bytes, path: str) -> str | Finding:
    """Decode honouring a PEP 263 coding cookie and a UTF-8 BOM."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        if "unknown encoding" in str(error) or "encoding problem" in str(error):
            return unanalysable(path, f"cannot decode file: {error}")
        encoding = "utf-8"  # undecodable first lines: let the decode below locate the byte
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as error:
        line, col = _byte_position(data, error.start)
        byte = data[error.start : error.start + 1].hex()
        return unanalysable(
            path,
            f"file is not valid {error.encoding} (byte 0x{byte}); save it as UTF-8 or declare its encoding",
            line,
            col,
        )
    except LookupError as error:
        return unanalysable(path, f"cannot decode file: {error}")
    # A BOM survives "utf-8-sig" decoding as nothing, but a plain "utf-8" cookie keeps it.
    return text.removeprefix("\ufeff")


def _byte_position(data: bytes, index: int) -> tuple[int, int]:
    line = data.count(b"\n", 0, index) + 1
    col = index - (data.rfind(b"\n", 0, index) + 1) + 1
    return line, col


def parse(text: str, path: str) -> syntax.Module | Finding:
    """The model's syntax tree, or a GL000 finding with the syntax error's message and position."""
    from graphlint.model.from_ast import TooDeep, build_module

    try:
        with warnings.catch_warnings():
            # Invalid escapes and the like warn at parse time; they are not our business.
            warnings.simplefilter("ignore")
            tree = compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:  # includes IndentationError and TabError
        return syntax_error_finding(error, path)
    except (RecursionError, MemoryError):  # CPython's own parser limits
        return unanalysable(path, "code is nested too deeply to parse")
    except ValueError as error:  # e.g. "source code string cannot contain null bytes"
        return unanalysable(path, f"cannot parse: {error}")
    data = text.encode("utf-8", "surrogatepass")
    try:
        # Built by recursion as deep as the code's nesting (bounded: TooDeep).
        return on_big_stack(build_module, tree, data, MAX_EXPRESSION_DEPTH)
    except TooDeep as error:
        line, col = getattr(error.node, "lineno", 1), getattr(error.node, "col_offset", 0) + 1
        return unanalysable(
            path, f"code is nested too deeply to analyse (more than {MAX_EXPRESSION_DEPTH} levels)", line, col
        )


def syntax_error_finding(error: SyntaxError, path: str, first_line: int = 1, note: str = "") -> Finding:
    """The GL000 of CPython's syntax error, for code that starts at line ``first_line`` of the file."""
    kind = "indentation error" if isinstance(error, IndentationError) else "syntax error"
    line = error.lineno or 1
    col = max(error.offset or 1, 1)
    end_line = error.end_lineno if (error.end_lineno or 0) >= line else line
    end_col = error.end_offset if error.end_offset and (end_line, error.end_offset) >= (line, col) else col
    shift = first_line - 1
    return unanalysable(path, f"{kind}: {error.msg}{note}", line + shift, col, end_line + shift, end_col)


def on_big_stack(function, *args):
    """Run ``function`` on a thread with a large stack; fall back to this thread if none can be made."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = function(*args)
        except BaseException as error:  # re-raised on the calling thread
            outcome["error"] = error

    try:
        previous = threading.stack_size(_PARSER_STACK_BYTES)
    except (ValueError, RuntimeError):
        return function(*args)
    try:
        worker = threading.Thread(target=run, name="graphlint-parse", daemon=True)
        worker.start()
    except RuntimeError:  # cannot start a thread (e.g. address-space limit)
        return function(*args)
    finally:
        threading.stack_size(previous)
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
