"""GitHub Actions workflow commands: one annotation per finding on the pull request's diff.

    ::error file=train.py,line=23,col=9,endLine=23,endColumn=24,title=GL001::backward through ...

Values are escaped as the runner's command parser expects: ``%``, CR and LF in
the message; additionally ``:`` and ``,`` in property values.
"""

from __future__ import annotations

from typing import TextIO

from graphlint.finding import Finding
from graphlint.report import ReportOptions, cell_of


def write(findings: list[Finding], out: TextIO, options: ReportOptions) -> None:
    for finding in findings:
        out.write(annotation(finding) + "\n")


def annotation(finding: Finding) -> str:
    # GL000 means a file went unchecked, not that it has a bug.
    command = "warning" if finding.code == "GL000" else "error"
    properties = {
        "file": finding.path,
        "line": finding.line,
        "col": finding.col,
        "endLine": finding.end_line,
        "endColumn": finding.end_col,
        "title": finding.code,
    }
    message = finding.message
    cell = cell_of(finding)
    if cell is not None:
        # Annotation lines refer to the raw file; in a notebook that is JSON, so say where.
        message = f"cell {cell}, line {finding.line}: {message}"
        del properties["line"], properties["col"], properties["endLine"], properties["endColumn"]
    rendered = ",".join(f"{name}={escape_property(str(value))}" for name, value in properties.items())
    return f"::{command} {rendered}::{escape_data(message)}"


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")
