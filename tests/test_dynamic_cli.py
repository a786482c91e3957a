"""`graphlint check --confirm`: options, verdict rendering, exit code, progress display.

The static findings are replaced by findings we choose (the rules are written
concurrently), so these tests exercise only the --confirm wiring.
"""

from __future__ import annotations

import importlib.util
import io
import json

import pytest
from click.testing import CliRunner

import graphlint.engine
from graphlint.cli import main
from graphlint.dynamic import FileRun
from graphlint.dynamic.cli_support import run_confirm, verdict_json, verdict_lines
from graphlint.dynamic.progress import ProgressDisplay
from graphlint.dynamic.verdict import Confirmation
from graphlint.finding import Finding

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="--confirm needs torch")

BUGGY = '''import torch
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    print("step", step)
    loss = model(torch.randn(3, 4)).pow(2).mean()
    loss.backward()
    opt.step()
'''


@pytest.fixture
def script(tmp_path, monkeypatch):
    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    chosen = []
    monkeypatch.setattr(graphlint.engine, "check_files", lambda paths, settings: list(chosen))
    return path, chosen


@needs_torch
def test_text_output_shows_the_verdict_under_each_finding(script):
    path, chosen = script
    chosen += [Finding("GL003", "zero_grad missing", str(path), 7, 5, 7, 20),
               Finding("GL001", "wrong on purpose", str(path), 7, 5, 7, 20)]
    result = CliRunner().invoke(main, ["check", str(path), "--confirm", "--confirm-timeout", "20"])
    lines = result.output.splitlines()
    assert lines[0].endswith("GL003 zero_grad missing")
    assert lines[1].startswith("  confirmed: gradients applied by the step at line 8, iteration 1")
    assert lines[3].startswith("  not reproduced: ran 3 iterations through line 7")
    assert result.exit_code == 1  # a confirmed finding fails the run
    assert "confirming:" not in result.output  # no progress display when not on a terminal
    assert "step 0" not in result.output  # the code's own output only with --verbose


@needs_torch
def test_json_adds_the_confirmation_object(script):
    path, chosen = script
    chosen.append(Finding("GL003", "zero_grad missing", str(path), 7, 5, 7, 20))
    result = CliRunner().invoke(main, ["check", str(path), "--confirm", "--output-format", "json"])
    [item] = json.loads(result.output)
    assert set(item["confirmation"]) == {"status", "evidence", "iterations", "seconds"}
    assert item["confirmation"]["status"] == "confirmed" and item["confirmation"]["iterations"] == 2


@needs_torch
def test_not_reproduced_findings_do_not_fail_the_run_and_verbose_shows_the_output(script):
    path, chosen = script
    chosen.append(Finding("GL001", "wrong on purpose", str(path), 7, 5, 7, 20))
    result = CliRunner().invoke(main, ["check", str(path), "--confirm", "--verbose"])
    assert "  not reproduced: " in result.stdout
    assert result.exit_code == 0
    assert "step 0" in result.stderr and "step 0" not in result.stdout


def test_without_confirm_nothing_runs(script):
    path, chosen = script
    chosen.append(Finding("GL003", "zero_grad missing", str(path), 7, 5, 7, 20))
    result = CliRunner().invoke(main, ["check", str(path), "--output-format", "json"])
    assert "confirmation" not in json.loads(result.output)[0]


def test_an_unknown_interpreter_is_a_usage_error(script):
    path, _ = script
    result = CliRunner().invoke(main, ["check", str(path), "--confirm", "--python", "/no/such/python"])
    assert result.exit_code == 2
    assert "no such interpreter" in result.stderr


def test_the_timeout_must_be_positive(script):
    path, _ = script
    result = CliRunner().invoke(main, ["check", str(path), "--confirm", "--confirm-timeout", "0"])
    assert result.exit_code == 2


def test_verdict_rendering_helpers():
    finding = Finding("GL001", "m", "f.py", 3, 1, 3, 5)
    assert verdict_lines(finding) == [] and verdict_json(finding) is None
    confirmed = finding.with_(confirmation=Confirmation("confirmed", 'RuntimeError "x" at line 3, iteration 2', 2, 0.5))
    assert verdict_lines(confirmed) == ['  confirmed: RuntimeError "x" at line 3, iteration 2']
    assert verdict_json(confirmed) == {"status": "confirmed", "evidence": 'RuntimeError "x" at line 3, iteration 2',
                                       "iterations": 2, "seconds": 0.5}


def test_progress_display_counts_files_and_verdicts():
    stream = io.StringIO()
    display = ProgressDisplay(stream, total=2)
    display.file_started("a.py")
    assert display.line() == "confirming: 0/2 files | running a.py"
    display.file_done(FileRun("a.py", (Confirmation("confirmed", "e"), Confirmation("inconclusive", "e")), "", "",
                              0.1, "finished"))
    assert display.line() == "confirming: 1/2 files | 1 confirmed, 1 inconclusive"
    display.close()
    assert stream.getvalue().endswith("\r\x1b[2K")


def test_run_confirm_without_findings_starts_nothing():
    stream = io.StringIO()
    assert run_confirm([], progress=True, stream=stream) == []
    assert stream.getvalue() == ""
