"""README.md opens with the two set-up commands, and .ci/run runs exactly those, judging each correctly."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
CI_RUN = REPO_ROOT / ".ci" / "run"


def setup_commands() -> list[str]:
    text = README.read_text(encoding="utf-8")
    body = re.sub(r"\A# [^\n]*\n\s*", "", text)  # the title line may precede them
    match = re.match(r"```(?:bash|sh|console)?\n(.*?)```", body, re.DOTALL)
    assert match, "README.md must open with a code block of set-up commands"
    return [line for line in match.group(1).splitlines() if line.strip()]


def test_readme_opens_with_exactly_two_setup_commands():
    commands = setup_commands()
    assert len(commands) == 2
    install_and_run, test_suite = commands
    assert "pip install ." in install_and_run and "graphlint check fixtures/" in install_and_run
    assert "requirements-dev.txt" in test_suite and "pytest" in test_suite


def test_ci_runs_exactly_the_readme_commands_in_order():
    script = CI_RUN.read_text()
    assert script.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in script
    assert os.access(CI_RUN, os.X_OK)
    positions = [script.find(command) for command in setup_commands()]
    assert all(position >= 0 for position in positions), "each README command appears verbatim in .ci/run"
    assert positions == sorted(positions)


def test_readme_has_the_sections_users_look_for():
    headings = re.findall(r"^## (.+)$", README.read_text(encoding="utf-8"), re.MULTILINE)
    for section in ("What it finds", "Usage", "Confirming findings (--confirm)", "Integrations", "Performance"):
        assert section in headings


# .ci/run's judgement, checked with stand-ins for pip, graphlint and python on PATH.
STUB = """#!/usr/bin/env bash
echo "$(basename "$0") $*" >> "$CALLS"
case "$(basename "$0")" in
  pip) exit "${PIP_STATUS:-0}" ;;
  graphlint) echo "fixtures/GL001/x.py:3:5: GL001 message"; echo "Found 1 error."; exit "${GRAPHLINT_STATUS:-1}" ;;
  python) exit "${PYTEST_STATUS:-0}" ;;
esac
"""


@pytest.fixture
def ci(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy(CI_RUN, repo / ".ci" / "run")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("pip", "graphlint", "python"):
        stub = bin_dir / tool
        stub.write_text(STUB)
        stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    calls = tmp_path / "calls"

    def run(**statuses: int) -> tuple[int, list[str]]:
        environment = {
            "PATH": f"{bin_dir}:/usr/bin:/bin",
            "CALLS": str(calls),
            "HOME": str(tmp_path),
            **{name: str(value) for name, value in statuses.items()},
        }
        calls.write_text("")
        done = subprocess.run(
            ["bash", str(repo / ".ci" / "run")], env=environment, capture_output=True, text=True,
            stdin=subprocess.DEVNULL, timeout=60,
        )
        return done.returncode, calls.read_text().splitlines()

    return run


def test_ci_accepts_findings_in_the_fixtures_and_runs_the_suite(ci):
    status, calls = ci(GRAPHLINT_STATUS=1)
    assert status == 0
    assert calls == ["pip install .", "graphlint check fixtures/", "pip install -r requirements-dev.txt",
                     "python -m pytest -q"]


def test_ci_fails_when_the_install_fails(ci):
    status, calls = ci(PIP_STATUS=1)
    assert status != 0
    assert calls == ["pip install ."]


def test_ci_fails_when_graphlint_errors(ci):
    status, _ = ci(GRAPHLINT_STATUS=2)
    assert status != 0


def test_ci_fails_when_the_suite_fails(ci):
    status, _ = ci(PYTEST_STATUS=1)
    assert status != 0
