"""The flake8 plugin, run through the real flake8: same codes, same lines and columns as graphlint."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import FIXTURES_DIR

BUGGY = """\
import torch

model = torch.nn.Linear(2, 1)
loss = model(torch.ones(4, 2)).pow(2).mean()
loss.backward()
    {}loss.backward(){}
"""


def run(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "GRAPHLINT_NO_CACHE": "1"})


def test_the_plugin_is_registered_with_flake8(tmp_path):
    # Asked from a neutral directory: a stale graphlint.egg-info in the checkout would shadow the install.
    listing = subprocess.run(
        [sys.executable, "-c", "import importlib.metadata as m; "
         "print([e.value for e in m.entry_points(group='flake8.extension') if e.name == 'GL'])"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert listing.stdout.strip() == "['graphlint.flake8_plugin:GraphlintChecker']", (
        "the GL entry point is missing: reinstall graphlint (pip install -e .)"
    )
    versions = run("flake8", "--version", cwd=tmp_path).stdout
    assert "graphlint" in versions


def test_flake8_reports_graphlints_findings_at_the_same_places(tmp_path):
    source = tmp_path / "train.py"
    source.write_text(BUGGY.replace("    {}", "").format(""))
    flake8 = run("flake8", "--select", "GL", "train.py", cwd=tmp_path)
    assert flake8.returncode == 1
    assert flake8.stdout.startswith("train.py:6:1: GL001 backward through the graph built at line 4")
    graphlint = run("graphlint", "check", "--quiet", "train.py", cwd=tmp_path)
    assert flake8.stdout == graphlint.stdout


def test_flake8_and_graphlint_agree_on_the_fixtures(tmp_path):
    fixtures = sorted(str(path) for path in FIXTURES_DIR.rglob("*.py"))[::4]
    flake8 = run("flake8", "--isolated", "--select", "GL", *fixtures, cwd=tmp_path)
    graphlint = run("graphlint", "check", "--isolated", "--quiet", *fixtures, cwd=tmp_path)
    assert flake8.stdout.splitlines() and sorted(flake8.stdout.splitlines()) == sorted(graphlint.stdout.splitlines())


@pytest.mark.parametrize("comment, reported", [("", True), ("  # noqa: GL001", False), ("  # noqa: GL002", True)])
def test_flake8_noqa_applies(tmp_path, comment, reported):
    (tmp_path / "train.py").write_text(BUGGY.replace("    {}", "").format(comment))
    flake8 = run("flake8", "--select", "GL", "train.py", cwd=tmp_path)
    assert ("GL001" in flake8.stdout) is reported


def test_flake8_select_by_code(tmp_path):
    (tmp_path / "train.py").write_text(BUGGY.replace("    {}", "").format(""))
    assert run("flake8", "--select", "GL002", "train.py", cwd=tmp_path).stdout == ""
    assert "GL001" in run("flake8", "--select", "GL001", "train.py", cwd=tmp_path).stdout
