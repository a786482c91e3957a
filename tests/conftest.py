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


# Hypothesis profiles for the property tests (tests/test_fuzz*.py). The default
# keeps a CI run short; `HYPOTHESIS_PROFILE=fuzz python -m pytest tests/test_fuzz.py`
# is a deliberate fuzzing session (hours of inputs at most; no deadline, since a
# slow input is reported by the pathological tests, not here).
def _register_hypothesis_profiles() -> None:
    import os

    from hypothesis import HealthCheck, settings

    slow_generation = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
    settings.register_profile("default", max_examples=25, deadline=None, suppress_health_check=slow_generation)
    # GRAPHLINT_FUZZ_EXAMPLES sizes a session to the time at hand (per property test).
    fuzz_examples = int(os.environ.get("GRAPHLINT_FUZZ_EXAMPLES", "5000"))
    settings.register_profile(
        "fuzz", max_examples=fuzz_examples, deadline=None, suppress_health_check=slow_generation, print_blob=True
    )
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


_register_hypothesis_profiles()
