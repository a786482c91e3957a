"""Check one file's source: decode, parse, build the model, run the rules, suppress.

This is the whole static pipeline for a single file; engine.py fans it out over
many files. It never raises: anything it cannot analyse becomes a GL000 finding.
"""

from __future__ import annotations

import os
import sys

from graphlint import suppress
from graphlint.finding import Finding
from graphlint.model import build_model
from graphlint.rules import ALL_RULES
from graphlint.source import parse, read_text, unanalysable

__all__ = ["check_source", "unanalysable"]

# libcst's parser and our recursive walks need headroom for deeply nested code;
# past this we report GL000 instead of crashing.
_RECURSION_LIMIT = 10_000


def check_source(source: str | bytes, path: str, codes: frozenset[str] | None = None) -> list[Finding]:
    """All findings for one file, sorted; ``codes`` restricts which rules run."""
    try:
        if path.endswith(".ipynb"):
            from graphlint.notebook import check_notebook

            # A notebook's code cells are analysed as one program; findings come back per cell.
            findings = check_notebook(source, path, lambda program: _findings(program, path, codes))
        else:
            findings = _findings(source, path, codes)
    except Exception as error:  # a bug in graphlint must cost one file, never the run
        if os.environ.get("GRAPHLINT_DEBUG"):
            raise
        detail = str(error).splitlines()[0][:200] if str(error) else ""
        findings = [unanalysable(path, f"internal error while analysing this file: {type(error).__name__}: {detail}")]
    if codes is not None and "GL000" not in codes:
        findings = [finding for finding in findings if finding.code != "GL000"]
    return findings


def _findings(source: str | bytes, path: str, codes: frozenset[str] | None) -> list[Finding]:
    text = read_text(source, path)
    if isinstance(text, Finding):
        return [text]
    source = text

    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, _RECURSION_LIMIT))
    try:
        module = parse(source, path)
        if isinstance(module, Finding):
            return [module]
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
    # Suppressions are applied here and nowhere else (see graphlint/suppress.py).
    return suppress.apply(sorted(set(findings), key=Finding.sort_key), source)
