"""Jupyter notebooks: code cells as one program, IPython syntax neutralised in place, findings per cell."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from graphlint.checker import check_source
from graphlint.files import discover
from graphlint.notebook import NotebookProgram, neutralise_ipython, read_notebook
from graphlint.report import ReportOptions, write


def code(*lines: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
            "source": [line + "\n" for line in lines]}


def markdown(text: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def notebook(*cells: dict, language: str = "python") -> str:
    return json.dumps({
        "cells": list(cells),
        "metadata": {"kernelspec": {"name": "k", "display_name": "k", "language": language},
                     "language_info": {"name": language}},
        "nbformat": 4, "nbformat_minor": 5,
    }, indent=1)


SETUP = code(
    "%matplotlib inline",
    "!pip install torch",
    "import torch",
    "model = torch.nn.Linear(2, 1)",
    "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)",
)
LOSS_ONCE = code("loss = model(torch.ones(4, 2)).pow(2).mean()")
LOOP = code(
    "for step in range(3):",
    "    optimizer.zero_grad()",
    "    loss.backward()",
    "    optimizer.step()",
)
BUGGY = notebook(markdown("# Train"), SETUP, LOSS_ONCE, markdown("loop"), LOOP)


def test_code_cells_become_one_program_with_cell_positions():
    program = read_notebook(BUGGY, "nb.ipynb")
    assert isinstance(program, NotebookProgram)
    assert program.source.splitlines()[:3] == ["pass", "pass", "import torch"]
    assert program.origins[0] == (2, 1)  # markdown cells count, as in Jupyter and Ruff
    assert program.origins[5] == (3, 1)
    assert program.origins[-1] == (5, 4)
    assert program.cell_position(9) == (5, 3)


def test_a_loop_in_a_later_cell_sees_the_state_of_an_earlier_one():
    [finding] = check_source(BUGGY, "nb.ipynb")
    assert (finding.code, finding.extra["cell"], finding.line, finding.col) == ("GL001", 5, 3, 5)
    assert "line 1 of cell 3" in finding.message  # references to other lines name their cell too


def test_the_same_cells_in_a_fixed_order_are_clean():
    fixed = notebook(SETUP, code("for step in range(3):", "    optimizer.zero_grad()",
                                 "    loss = model(torch.ones(4, 2)).pow(2).mean()", "    loss.backward()",
                                 "    optimizer.step()"))
    assert check_source(fixed, "nb.ipynb") == []


def test_suppression_comments_work_in_cells():
    suppressed = json.loads(BUGGY)
    suppressed["cells"][4]["source"][2] = "    loss.backward()  # noqa: GL001\n"
    assert check_source(json.dumps(suppressed), "nb.ipynb") == []


@pytest.mark.parametrize(
    "lines, expected",
    [
        (["%matplotlib inline", "x = 1"], ["pass", "x = 1"]),
        (["!pip install torch", "  !ls"], ["pass", "  pass"]),
        (["files = !ls", "t = %timeit -o f()"], ["files = None", "t = None"]),
        (["%time loss.backward()"], ["pass; loss.backward()"]),
        (["for i in r:", "    %timeit -n 3 step()"], ["for i in r:", "    pass;        step()"]),
        (["model?", "??model", "x = 1  # why?"], ["pass", "pass", "x = 1  # why?"]),
        (["%%time", "loss.backward()"], ["pass", "loss.backward()"]),
        (["%%bash", "echo hi", "ls"], ["", "", ""]),
        (['s = """', "%not a magic", '"""', "y = (1,", "  !2)"], ['s = """', "%not a magic", '"""', "y = (1,", "  !2)"]),
        # A command continued by backslashes (speechbrain's tutorials); Python after it is Python.
        (["!python train.py \\", "    --lr 0.1 \\", "    --epochs 2", "x = 1 + \\", "    2"],
         ["pass", "", "", "x = 1 + \\", "    2"]),
        (["%time f(a, \\", "    b)"], ["pass; f(a, \\", "    b)"]),
    ],
)
def test_ipython_syntax_is_neutralised_in_place(lines, expected):
    result = neutralise_ipython(lines)
    assert result == expected
    assert len(result) == len(lines)


def test_code_after_a_python_running_magic_keeps_its_column():
    [line] = neutralise_ipython(["    %time loss.backward()"])
    assert line.index("loss") == "    %time loss.backward()".index("loss")


def test_a_syntax_error_in_a_cell_is_reported_in_that_cell():
    broken = notebook(code("import torch"), markdown("x"), code("x = 1", "for i in range(3)", "    pass"))
    [finding] = check_source(broken, "nb.ipynb")
    assert (finding.code, finding.extra["cell"], finding.line) == ("GL000", 3, 2)
    assert "expected ':'" in finding.message


def test_a_broken_cell_does_not_hide_the_findings_of_the_others():
    # An exercise's placeholder between the setup and the buggy loop.
    exercise = notebook(SETUP, code("answer = <YOUR CODE>"), LOSS_ONCE, LOOP)
    findings = check_source(exercise, "nb.ipynb")
    assert [(f.code, f.extra["cell"], f.line) for f in findings] == [("GL000", 2, 1), ("GL001", 4, 3)]
    assert "this cell is left out" in findings[0].message


def test_a_name_a_broken_cell_assigns_is_not_read_from_an_earlier_cell():
    # The exercise would define a new loss: the later backward must not be taken
    # for a second backward through the first cell's graph.
    exercise = notebook(SETUP, LOSS_ONCE, code("loss.backward()"), code("loss = <YOUR CODE>"),
                        code("optimizer.zero_grad()", "loss.backward()", "optimizer.step()"))
    assert [(f.code, f.extra["cell"]) for f in check_source(exercise, "nb.ipynb")] == [("GL000", 4)]


def test_a_cell_with_top_level_await_is_not_broken():
    program = read_notebook(notebook(code("import asyncio", "await asyncio.sleep(0)")), "nb.ipynb")
    assert program.broken_cells == ()
    assert check_source(notebook(code("import asyncio", "await asyncio.sleep(0)")), "nb.ipynb") == []


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"cells": [', "invalid notebook JSON"),
        ("[1, 2]", "not a Jupyter notebook"),
        ('{"metadata": {}}', "not a Jupyter notebook"),
    ],
)
def test_broken_notebooks_are_gl000_not_a_crash(text, message):
    [finding] = check_source(text, "nb.ipynb")
    assert finding.code == "GL000" and message in finding.message


def test_broken_json_is_located():
    [finding] = check_source('{\n  "cells": [\n    {,\n', "nb.ipynb")
    assert (finding.line, finding.col) == (3, 6)


def test_notebooks_in_other_languages_are_skipped():
    assert check_source(notebook(code("x <- c(1, 2)"), language="R"), "nb.ipynb") == []


def test_nbformat_3_notebooks_are_read():
    old = {"worksheets": [{"cells": [{"cell_type": "code", "input": ["x = (\n"], "outputs": []}]}],
           "metadata": {}, "nbformat": 3}
    [finding] = check_source(json.dumps(old), "nb.ipynb")
    assert finding.code == "GL000" and finding.extra["cell"] == 1


def test_discovery_finds_notebooks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nbs").mkdir()
    (tmp_path / "nbs" / "train.ipynb").write_text(BUGGY)
    (tmp_path / "nbs" / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".gitignore").write_text(".ipynb_checkpoints/\n")
    (tmp_path / "nbs" / ".ipynb_checkpoints" / "train-checkpoint.ipynb").write_text(BUGGY)
    assert [p.as_posix() for p in discover(["."]).files] == ["nbs/train.ipynb"]


def test_the_cli_reports_cells(run_cli, tmp_path):
    Path(tmp_path / "train.ipynb").write_text(BUGGY)
    text = run_cli("check", "train.ipynb")
    assert text.exit_code == 1
    assert text.stdout.startswith("train.ipynb:cell 5:3:5: GL001 ")
    [item] = json.loads(run_cli("check", "--output-format", "json", "train.ipynb").stdout)
    assert (item["cell"], item["location"], item["noqa_row"]) == (5, {"row": 3, "column": 5}, 3)
    sarif = json.loads(run_cli("check", "--output-format", "sarif", "train.ipynb").stdout)
    [result] = sarif["runs"][0]["results"]
    assert result["properties"]["cell"] == 5
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 3


def test_a_code_frame_shows_the_cells_own_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    timed = json.loads(BUGGY)
    timed["cells"][4]["source"][2] = "    %time loss.backward()\n"
    Path("train.ipynb").write_text(json.dumps(timed))
    [finding] = check_source(Path("train.ipynb").read_bytes(), "train.ipynb")
    out = io.StringIO()
    write("text", [finding], out, ReportOptions(show_source=True))
    assert "3 |     %time loss.backward()\n  |           ^^^^^^^^^^^^^^^\n" in out.getvalue()


def test_a_line_the_parser_names_in_a_left_out_cell_is_a_line_of_that_cell():
    broken = notebook(code("import torch", "x = 1", "y = 2"), code("# comment", "with torch.no_grad():", "", "..."))
    [finding] = check_source(broken, "nb.ipynb")
    assert (finding.code, finding.extra["cell"], finding.line) == ("GL000", 2, 4)
    assert "'with' statement on line 2 (" in finding.message


def test_findings_are_ordered_by_cell_then_line():
    broken = notebook(code("a = 1", "b = 2", "c = (",), code("x = (",))
    findings = check_source(broken, "nb.ipynb")
    assert [(f.extra["cell"], f.line) for f in sorted(findings, key=lambda f: f.sort_key())] == [(1, 3), (2, 1)]
