"""SARIF 2.1.0, the format GitHub code scanning and other CI dashboards ingest.

One run: the tool (version, information URI, every rule with its
documentation), and one result per finding with its physical location, a
fingerprint that survives unrelated edits (it hashes the rule, the file and
the reported line's text, not the line number), the fix when there is one,
and the ``--confirm`` verdict in the result's properties.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from graphlint import __version__
from graphlint.finding import Finding
from graphlint.report import HOMEPAGE, ReportOptions, SourceLines, cell_of, rule_documentation, rule_name, rule_url
from graphlint.report.json import jsonable

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SOURCE_ROOT = "%SRCROOT%"


def write(findings: list[Finding], out: TextIO, options: ReportOptions) -> None:
    json.dump(document(findings, options), out, indent=2)
    out.write("\n")


def document(findings: list[Finding], options: ReportOptions | None = None) -> dict[str, Any]:
    options = options or ReportOptions()
    codes = _all_codes()
    sources = SourceLines(options.sources)
    fingerprints = _Fingerprints(sources)
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "graphlint",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": HOMEPAGE,
                        "rules": [_rule(code) for code in codes],
                    }
                },
                # Columns count code points, not UTF-16 units (SARIF's default).
                "columnKind": "unicodeCodePoints",
                "originalUriBaseIds": {SOURCE_ROOT: {"uri": Path.cwd().as_uri() + "/"}},
                "results": [_result(finding, codes.index(finding.code), fingerprints) for finding in findings],
            }
        ],
    }


def _all_codes() -> list[str]:
    from graphlint.rules import ALL_CODES

    return list(ALL_CODES)


def _rule(code: str) -> dict[str, Any]:
    documentation = rule_documentation(code)
    summary = _summary(code)
    rule: dict[str, Any] = {
        "id": code,
        "name": rule_name(code),
        "shortDescription": {"text": summary},
        "fullDescription": {"text": documentation},
        "help": {"text": documentation, "markdown": documentation},
        "defaultConfiguration": {"level": _level(code)},
        "properties": {"tags": ["pytorch", "autograd", "correctness"] if code != "GL000" else ["tool"]},
    }
    url = rule_url(code)
    if url:
        rule["helpUri"] = url
    return rule


def _summary(code: str) -> str:
    from graphlint.rules import rule_summary

    return rule_summary(code)


def _level(code: str) -> str:
    # Every rule finds a real bug; GL000 says a file went unchecked.
    return "warning" if code == "GL000" else "error"


def _result(finding: Finding, rule_index: int, fingerprints: "_Fingerprints") -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "ruleIndex": rule_index,
        "level": _level(finding.code),
        "message": {"text": finding.message},
        "locations": [{"physicalLocation": _physical_location(finding)}],
        "partialFingerprints": {"primaryLocationLineHash": fingerprints.of(finding)},
    }
    fixes = _fixes(finding)
    if fixes:
        result["fixes"] = fixes
    properties: dict[str, Any] = {}
    if cell_of(finding) is not None:
        properties["cell"] = cell_of(finding)
    if finding.confirmation is not None:
        properties["confirmation"] = jsonable(finding.confirmation)
    if properties:
        result["properties"] = properties
    return result


def _artifact_location(path: str) -> dict[str, Any]:
    if os.path.isabs(path):
        return {"uri": Path(path).as_uri()}
    return {"uri": quote(Path(path).as_posix()), "uriBaseId": SOURCE_ROOT}


def _region(line: int, col: int, end_line: int, end_col: int) -> dict[str, int]:
    start = (max(line, 1), max(col, 1))
    end = max((end_line, end_col), start)
    return {"startLine": start[0], "startColumn": start[1], "endLine": end[0], "endColumn": end[1]}


def _physical_location(finding: Finding) -> dict[str, Any]:
    return {
        "artifactLocation": _artifact_location(finding.path),
        "region": _region(finding.line, finding.col, finding.end_line, finding.end_col),
    }


def _fixes(finding: Finding) -> list[dict[str, Any]]:
    """A SARIF fix from a fix in Ruff's JSON shape: {message, edits: [{content, location, end_location}]}."""
    fix = jsonable(finding.fix)
    if not isinstance(fix, dict) or not isinstance(fix.get("edits"), list):
        return []
    replacements = []
    for edit in fix["edits"]:
        try:
            start, end = edit["location"], edit["end_location"]
            region = _region(start["row"], start["column"], end["row"], end["column"])
            replacements.append({"deletedRegion": region, "insertedContent": {"text": str(edit.get("content", ""))}})
        except (KeyError, TypeError):
            return []
    description = fix.get("message") or "Apply graphlint's fix"
    return [
        {
            "description": {"text": str(description)},
            "artifactChanges": [{"artifactLocation": _artifact_location(finding.path), "replacements": replacements}],
        }
    ]


class _Fingerprints:
    """Stable identities: rule, file and the reported line's text, numbered when they repeat."""

    def __init__(self, sources: SourceLines) -> None:
        self._sources = sources
        self._seen: Counter = Counter()

    def of(self, finding: Finding) -> str:
        text = (self._sources.line(finding) or "").strip()
        where = f"cell {cell_of(finding)}" if cell_of(finding) is not None else ""
        key = "\0".join((finding.code, Path(finding.path).as_posix(), where, " ".join(text.split())))
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        self._seen[digest] += 1
        return f"{digest}:{self._seen[digest]}"
