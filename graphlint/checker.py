"""Check one file's source: decode, parse, build the model, run the rules, suppress.

This is the whole static pipeline for a single file; engine.py fans it out over
many files. It never raises: anything it cannot analyse becomes a GL000 finding.
"""

from __future__ import annotations

import sys

import libcst

from graphlint.finding import Finding
from graphlint.model import build_model
from graphlint.rules import ALL_RULES

# libcst's parser and our recursive walks need headroom for deeply nested code;
# past this we report GL000 instead of crashing.
_RECURSION_LIMIT = 10_000


def decode_source(data: bytes) -> str:
    """Decode Python source honouring a PEP 263 coding cookie and a UTF-8 BOM."""
    import io
    import tokenize

    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding)


def unanalysable(path: str, message: str, line: int = 1, col: int = 1) -> Finding:
    return Finding("GL000", message, path, line, col, line, col)


def check_source(source: str | bytes, path: str, codes: frozenset[str] | None = None) -> list[Finding]:
    """All findings for one file, sorted; ``codes`` restricts which rules run."""
    if isinstance(source, bytes):
        if b"\x00" in source:
            return [unanalysable(path, "file contains a NUL byte; not Python source")]
        try:
            source = decode_source(source)
        except (UnicodeDecodeError, LookupError, SyntaxError) as error:
            return [unanalysable(path, f"cannot decode file: {error}")]
    if "\x00" in source:
        return [unanalysable(path, "file contains a NUL byte; not Python source")]

    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, _RECURSION_LIMIT))
    try:
        try:
            module = libcst.parse_module(source)
        except libcst.ParserSyntaxError as error:
            message = f"syntax error: {error.message}"
            return [unanalysable(path, message, error.raw_line, error.raw_column + 1)]
        findings: list[Finding] = []
        model = build_model(module, source)
        for rule in ALL_RULES:
            if codes is not None and rule.CODE not in codes:
                continue
            for diagnostic in rule.check(model):
                span = diagnostic.span
                findings.append(
                    Finding(
                        rule.CODE,
                        diagnostic.message,
                        path,
                        span.line,
                        span.col,
                        span.end_line,
                        span.end_col,
                    )
                )
        if model.truncated:
            findings.append(unanalysable(path, model.truncated))
    except RecursionError:
        return [unanalysable(path, "code is nested too deeply to analyse")]
    except MemoryError:
        return [unanalysable(path, "file is too large to analyse")]
    finally:
        sys.setrecursionlimit(old_limit)
    return sorted(set(findings), key=Finding.sort_key)
