"""Shared test helpers: the repository's layout and a way to run the CLI in-process."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES_DIR = REPO_ROOT / "fixtures"


@pytest.fixture
def run_cli(monkeypatch, tmp_path):
    """Run ``graphlint ARGS...`` in-process, in ``tmp_path``, without the result cache.

    Returns click's Result: ``exit_code``, ``stdout``, ``stderr``.
    """
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GRAPHLINT_NO_CACHE", "1")
    monkeypatch.delenv("GRAPHLINT_DEBUG", raising=False)

    def run(*args: str, input: str | None = None) -> Result:
        from graphlint.cli import main

        return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)

    return run
