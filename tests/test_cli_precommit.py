"""The pre-commit hook, run by the real `pre-commit try-repo` against this checkout."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import REPO_ROOT

BUGGY = """\
import torch

model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss = model(torch.ones(4, 2)).pow(2).mean()
for step in range(3):
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
CLEAN = """\
import torch

model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    optimizer.zero_grad()
    loss = model(torch.ones(4, 2)).pow(2).mean()
    loss.backward()
    optimizer.step()
"""


def test_the_hook_fails_on_a_bug_and_passes_on_clean_code(tmp_path):
    for tool in ("git", "pre-commit"):
        if shutil.which(tool) is None:
            pytest.skip(f"`{tool}` is not installed; the pre-commit hook cannot be exercised")
    if not (REPO_ROOT / ".git").exists():
        pytest.skip(f"{REPO_ROOT} is not a git checkout; pre-commit try-repo needs one")

    work = tmp_path / "project"
    work.mkdir()
    environment = {
        **os.environ,
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@example.com",
        # Offline and fast: the hook's virtualenv sees the packages of this
        # environment (libcst, click, pathspec, setuptools) instead of
        # downloading them, and pip builds graphlint without an isolated env.
        "VIRTUALENV_SYSTEM_SITE_PACKAGES": "1",
        "PIP_NO_INDEX": "1",
        "PIP_NO_BUILD_ISOLATION": "0",  # pip's inverted spelling of --no-build-isolation
    }
    environment.pop("GRAPHLINT_NO_CACHE", None)
    subprocess.run(["git", "init", "-q"], cwd=work, check=True, env=environment)
    (work / "train.py").write_text(BUGGY)
    (work / "clean.py").write_text(CLEAN)
    subprocess.run(["git", "add", "train.py", "clean.py"], cwd=work, check=True, env=environment)

    def try_repo(*files: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["pre-commit", "try-repo", str(REPO_ROOT), "graphlint", "--files", *files],
            cwd=work, env=environment, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
        )

    failing = try_repo("train.py")
    output = failing.stdout + failing.stderr
    assert failing.returncode == 1, output
    assert "graphlint" in output and "Failed" in output
    assert "train.py:8:5: GL001 backward through the graph built at line 5" in output

    passing = try_repo("clean.py")
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert "Passed" in passing.stdout
