"""Ruff's JSON shape, so tools that read ``ruff --output-format json`` read this too.

One object per finding, keys sorted as Ruff prints them: ``cell``, ``code``,
``end_location``, ``filename`` (absolute), ``fix``, ``location``, ``message``,
``name``, ``noqa_row``, ``url``; plus ``confirmation`` when ``--confirm`` ran.
With ``--statistics``: Ruff's list of ``{code, name, count, fixable, fixable_count}``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter
from typing import Any, TextIO

from graphlint.finding import Finding
from graphlint.report import ReportOptions, cell_of, rule_name, rule_url
from graphlint.suppress import noqa_row


def write(findings: list[Finding], out: TextIO, options: ReportOptions) -> None:
    document = statistics(findings) if options.statistics else [as_json(finding) for finding in findings]
    json.dump(document, out, indent=2, sort_keys=True)
    out.write("\n")


def as_json(finding: Finding) -> dict[str, Any]:
    item: dict[str, Any] = {
        "cell": cell_of(finding),
        "code": finding.code,
        "end_location": {"row": finding.end_line, "column": finding.end_col},
        "filename": os.path.abspath(finding.path),
        "fix": jsonable(finding.fix),
        "location": {"row": finding.line, "column": finding.col},
        "message": finding.message,
        "name": rule_name(finding.code),
        "noqa_row": noqa_row(finding),
        "url": rule_url(finding.code),
    }
    if finding.confirmation is not None:
        item["confirmation"] = jsonable(finding.confirmation)
    return item


def statistics(findings: list[Finding]) -> list[dict[str, Any]]:
    counts = Counter(finding.code for finding in findings)
    fixable = Counter(finding.code for finding in findings if finding.fix is not None)
    return [
        {
            "code": code,
            "name": rule_name(code),
            "count": count,
            "fixable": fixable[code] > 0,
            "fixable_count": fixable[code],
        }
        for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


def jsonable(value: Any) -> Any:
    """Fix and confirmation objects come from other parts of graphlint; accept their usual shapes."""
    if value is None or isinstance(value, (str, int, float, bool, list, dict)):
        return value
    if hasattr(value, "to_json"):
        return value.to_json()
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    return str(value)
