"""The command line: commands, options, exit codes and error messages, run as users run them."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

import graphlint
import graphlint.engine
from conftest import REPO_ROOT
from graphlint.rules import ALL_CODES, RULES_BY_CODE, rule_doc

# A file with a certain finding that does not depend on the analysis: a syntax
# error (GL000) in a file that spells a backward, so the prefilter keeps it.
BROKEN = "import torch\nloss.backward()\nfor x in data\n    pass\n"
BROKEN_FINDING = "broken.py:3:14: GL000 syntax error: expected ':'"
CLEAN = "import torch\nx = torch.ones(2)\nprint(x.sum().item())\n"


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def one_line(text: str) -> bool:
    return len(text.strip().splitlines()) == 1


def test_version_is_the_package_version(run_cli):
    result = run_cli("--version")
    assert result.exit_code == 0
    assert result.stdout == f"graphlint {graphlint.__version__}\n"


def test_version_has_a_single_source():
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject
    assert 'version = { attr = "graphlint.__version__" }' in pyproject


def test_rules_lists_every_code_with_name_and_summary(run_cli):
    result = run_cli("rules")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == list(ALL_CODES)
    for code, rule in RULES_BY_CODE.items():
        line = next(line for line in lines if line.startswith(code))
        assert rule.NAME in line and rule.SUMMARY in line


@pytest.mark.parametrize("code", sorted(RULES_BY_CODE))
def test_rule_prints_the_rules_documentation(run_cli, code):
    result = run_cli("rule", code.lower())
    assert result.exit_code == 0
    assert result.stdout.strip() == rule_doc(code)
    assert "## What it does" in result.stdout


def test_rule_documents_gl000_too(run_cli):
    result = run_cli("rule", "GL000")
    assert result.exit_code == 0 and "unanalysable-input" in result.stdout


def test_an_unknown_rule_is_a_one_line_usage_error(run_cli):
    result = run_cli("rule", "GL999")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert one_line(result.stderr) and "GL999" in result.stderr


def test_clean_code_passes(run_cli, tmp_path):
    write(tmp_path, "ok.py", CLEAN)
    result = run_cli("check", "ok.py")
    assert (result.exit_code, result.stdout) == (0, "All checks passed!\n")


def test_findings_exit_1_with_ruffs_lines_and_a_summary(run_cli, tmp_path):
    write(tmp_path, "broken.py", BROKEN)
    write(tmp_path, "ok.py", CLEAN)
    result = run_cli("check", ".")
    assert result.exit_code == 1
    assert result.stdout == f"{BROKEN_FINDING}\nFound 1 error.\n"


def test_the_default_path_is_the_current_directory(run_cli, tmp_path):
    write(tmp_path, "sub/broken.py", BROKEN)
    result = run_cli("check")
    assert result.exit_code == 1
    assert result.stdout.startswith("sub/broken.py:3:14: GL000")


def test_exit_zero_quiet_and_statistics(run_cli, tmp_path):
    write(tmp_path, "broken.py", BROKEN)
    assert run_cli("check", "--exit-zero", "broken.py").exit_code == 0
    quiet = run_cli("check", "-q", "broken.py")
    assert (quiet.exit_code, quiet.stdout) == (1, BROKEN_FINDING + "\n")
    stats = run_cli("check", "--statistics", "broken.py")
    assert (stats.exit_code, stats.stdout) == (1, "1\tGL000\tunanalysable-input\nFound 1 error.\n")
    stats_json = run_cli("check", "--statistics", "--output-format", "json", "broken.py")
    assert json.loads(stats_json.stdout)[0]["count"] == 1


def test_json_output(run_cli, tmp_path):
    write(tmp_path, "broken.py", BROKEN)
    result = run_cli("check", "--output-format", "json", "broken.py")
    assert result.exit_code == 1
    [item] = json.loads(result.stdout)
    assert item["code"] == "GL000"
    assert item["filename"] == str(tmp_path / "broken.py")
    assert item["location"] == {"row": 3, "column": 14}
    assert json.loads(run_cli("check", "--output-format", "json", "--ignore", "GL000", "broken.py").stdout) == []


def test_select_and_ignore_take_codes_and_prefixes(run_cli, tmp_path):
    write(tmp_path, "broken.py", BROKEN)
    assert run_cli("check", "--ignore", "GL000", "broken.py").exit_code == 0
    assert run_cli("check", "--ignore", "gl0", "broken.py").exit_code == 0
    # GL000 stays on with --select: a file that was not analysed is always worth knowing.
    assert run_cli("check", "--select", "GL001", "broken.py").exit_code == 1
    assert run_cli("check", "--select", "ALL", "--ignore", "GL000,GL001", "broken.py").exit_code == 0


@pytest.mark.parametrize("option", ["--select", "--ignore"])
def test_an_unknown_selector_is_a_one_line_usage_error(run_cli, tmp_path, option):
    write(tmp_path, "ok.py", CLEAN)
    result = run_cli("check", option, "GL001,E501", "ok.py")
    assert result.exit_code == 2
    assert one_line(result.stderr) and "E501" in result.stderr


def test_a_missing_path_is_a_one_line_usage_error(run_cli, tmp_path):
    write(tmp_path, "broken.py", BROKEN)
    result = run_cli("check", "broken.py", "missing.py")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == "graphlint: error: path does not exist: missing.py\n"


def test_an_unknown_output_format_is_a_usage_error(run_cli, tmp_path):
    write(tmp_path, "ok.py", CLEAN)
    assert run_cli("check", "--output-format", "xml", "ok.py").exit_code == 2


def test_no_python_files_is_a_warning_and_a_pass(run_cli, tmp_path):
    (tmp_path / "empty").mkdir()
    result = run_cli("check", "empty")
    assert result.exit_code == 0
    assert "no Python files" in result.stderr


def test_an_internal_error_is_one_line_and_exit_2(run_cli, tmp_path, monkeypatch):
    def explode(paths, settings):
        raise KeyError("boom")

    monkeypatch.setattr(graphlint.engine, "check_files", explode)
    write(tmp_path, "ok.py", CLEAN)
    result = run_cli("check", "ok.py")
    assert result.exit_code == 2
    assert one_line(result.stderr)
    assert result.stderr.startswith("graphlint: internal error: KeyError: 'boom'")
    assert "Traceback" not in result.output

    monkeypatch.setenv("GRAPHLINT_DEBUG", "1")
    with pytest.raises(KeyError):
        run_cli("check", "ok.py")


def _graphlint(*args: str, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    environment = {**os.environ, "GRAPHLINT_NO_CACHE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "graphlint", *args], cwd=cwd, env=environment, capture_output=True, text=True,
        timeout=120, **kwargs,
    )


def test_exit_codes_of_the_real_process(tmp_path):
    write(tmp_path, "broken.py", BROKEN)
    write(tmp_path, "ok.py", CLEAN)
    assert _graphlint("check", "ok.py", cwd=tmp_path).returncode == 0
    found = _graphlint("check", "broken.py", cwd=tmp_path)
    assert (found.returncode, found.stdout) == (1, f"{BROKEN_FINDING}\nFound 1 error.\n")
    missing = _graphlint("check", "nope.py", cwd=tmp_path)
    assert missing.returncode == 2 and one_line(missing.stderr) and "Traceback" not in missing.stderr
    usage = _graphlint("check", "--bogus-option", cwd=tmp_path)
    assert usage.returncode == 2 and "Traceback" not in usage.stderr


def test_a_reader_that_goes_away_is_not_a_traceback(tmp_path):
    # More output than a pipe buffers (64 KiB), so writing really fails once the reader is gone.
    for n in range(500):
        write(tmp_path, f"{n:03}_{'x' * 150}.py", BROKEN)
    process = subprocess.Popen(
        [sys.executable, "-m", "graphlint", "check", "--jobs", "1", "."],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "GRAPHLINT_NO_CACHE": "1"},
    )
    process.stdout.readline()
    process.stdout.close()  # like `graphlint check | head -1`
    stderr = process.stderr.read().decode()
    process.wait(timeout=120)
    assert "Traceback" not in stderr and "internal error" not in stderr


def _run_on_a_terminal(args: list[str], cwd: Path) -> str:
    """Run graphlint with stdout on a pseudo-terminal, as a person at a shell would."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "graphlint", *args], cwd=cwd, stdout=terminal, stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL, env={**os.environ, "GRAPHLINT_NO_CACHE": "1"},
    )
    os.close(terminal)
    chunks = []
    while True:
        ready, _, _ = select.select([controller], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: the terminal closed with the process
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=60)
    os.close(controller)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_a_code_frame_is_shown_on_a_terminal_only(tmp_path):
    write(tmp_path, "broken.py", BROKEN)
    on_terminal = _run_on_a_terminal(["check", "broken.py"], tmp_path)
    assert on_terminal.startswith(BROKEN_FINDING + "\n  |\n3 | for x in data\n  |              ^\n")
    piped = _graphlint("check", "broken.py", cwd=tmp_path)
    assert "|" not in piped.stdout


def test_suppressed_findings_count_nowhere(run_cli, tmp_path):
    buggy = (
        "import torch\n"
        "model = torch.nn.Linear(2, 1)\n"
        "loss = model(torch.ones(1, 2)).sum()\n"
        "loss.backward()\n"
        "loss.backward(){}\n"
    )
    write(tmp_path, "train.py", buggy.format(""))
    assert run_cli("check", "--statistics", "train.py").stdout.startswith("1\tGL001\t")
    write(tmp_path, "train.py", buggy.format("  # noqa: GL001"))
    for args in (["--statistics"], ["--output-format", "json"], ["--statistics", "--output-format", "json"], []):
        result = run_cli("check", *args, "train.py")
        assert result.exit_code == 0
        assert "GL001" not in result.stdout
