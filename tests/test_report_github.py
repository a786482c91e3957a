"""GitHub Actions annotations: the workflow-command shape and its escaping rules."""

from __future__ import annotations

import io
import re

from graphlint.finding import Finding
from graphlint.report import ReportOptions, write


def render(findings) -> str:
    out = io.StringIO()
    write("github", findings, out, ReportOptions())
    return out.getvalue()


def unescape(text: str) -> str:
    """The runner's decoding (actions/runner ActionCommand.Unescape), to check a round trip."""
    for escaped, plain in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        text = text.replace(escaped, plain)
    return text


def parse(line: str) -> tuple[str, dict[str, str], str]:
    match = re.fullmatch(r"::(\w+) (.*?)::(.*)", line)
    assert match, line
    command, properties, message = match.groups()
    pairs = dict(item.split("=", 1) for item in properties.split(","))
    return command, {key: unescape(value) for key, value in pairs.items()}, unescape(message)


def test_one_error_annotation_per_finding():
    findings = [
        Finding("GL001", "backward through a freed graph", "src/train.py", 23, 9, 23, 24),
        Finding("GL005", "total keeps graphs alive", "src/train.py", 30, 5, 31, 2),
    ]
    assert render(findings) == (
        "::error file=src/train.py,line=23,col=9,endLine=23,endColumn=24,title=GL001::backward through a freed graph\n"
        "::error file=src/train.py,line=30,col=5,endLine=31,endColumn=2,title=GL005::total keeps graphs alive\n"
    )


def test_nothing_to_report_prints_nothing():
    assert render([]) == ""


def test_messages_and_properties_are_escaped():
    message = "100% sure:\nline two, with a comma\r"
    finding = Finding("GL002", message, "we,ird:dir/50%.py", 3, 1, 3, 2)
    line = render([finding]).rstrip("\n")
    assert "\n" not in line and "\r" not in line
    assert "file=we%2Cird%3Adir/50%25.py" in line
    assert line.endswith("::100%25 sure:%0Aline two, with a comma%0D")
    command, properties, decoded = parse(line)
    assert command == "error"
    assert properties["file"] == "we,ird:dir/50%.py" and properties["title"] == "GL002"
    assert decoded == message


def test_gl000_is_a_warning():
    assert render([Finding("GL000", "syntax error: expected ':'", "a.py", 1, 5, 1, 5)]).startswith("::warning ")


def test_notebook_findings_name_the_cell():
    finding = Finding("GL001", "msg", "nb.ipynb", 2, 5, 2, 9, extra={"cell": 4})
    command, properties, message = parse(render([finding]).strip())
    assert properties == {"file": "nb.ipynb", "title": "GL001"}
    assert message == "cell 4, line 2: msg"


def test_the_cli_writes_annotations(run_cli, tmp_path):
    (tmp_path / "broken.py").write_text("import torch\nloss.backward()\nfor x in data\n")
    result = run_cli("check", "--output-format", "github", "broken.py")
    assert result.exit_code == 1
    assert result.stdout == (
        "::warning file=broken.py,line=3,col=14,endLine=3,endColumn=14,title=GL000::syntax error: expected ':'\n"
    )
