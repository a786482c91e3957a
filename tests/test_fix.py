"""Autofix on the fixtures: expected ``*.fixed.py`` outputs, idempotence, and the finding gone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from graphlint.fix import applicable, fix_text
from test_fixtures import KNOWN_GAPS

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
POSITIVES = sorted(p for p in FIXTURES.glob("GL00*/*.py") if not p.name.endswith(".fixed.py"))


def expected_path(path: Path) -> Path:
    """fixtures/GL00x/fixed/<name>.fixed.py: a folder of its own, so globs of fixtures/GL00x/*.py miss it."""
    return path.parent / "fixed" / (path.stem + ".fixed.py")


PAIRS = [p for p in POSITIVES if expected_path(p).exists()]

# Fixed files on which the analysis still reports the fixed rule, and why.
STILL_REPORTED = {
    # The cut is before the inner time loop (detaching inside it would break
    # BPTT); the analysis still sees the state carried across the outer loop.
    "GL002/lstm_cell_nested_time_loop.py": "GL002",
}


def _id(path: Path) -> str:
    return path.relative_to(FIXTURES).as_posix()


def _read(path: Path) -> str:
    # Bytes decoded as-is: the comparison must see the file's own newlines.
    return path.read_bytes().decode("utf-8")


@pytest.fixture(scope="module")
def outcomes():
    return {path: fix_text(_read(path), str(path), unsafe=True) for path in POSITIVES}


def test_every_expected_file_has_its_fixture() -> None:
    for expected in FIXTURES.rglob("*.fixed.py"):
        assert (expected.parent.parent / expected.name.replace(".fixed.py", ".py")).exists(), expected


def test_there_are_fixture_pairs_for_every_rule() -> None:
    for code in ("GL001", "GL002", "GL003", "GL004", "GL005"):
        assert any(p.parent.name == code for p in PAIRS), code


@pytest.mark.parametrize("path", PAIRS, ids=_id)
def test_fixed_output_is_the_expected_file(path: Path, outcomes) -> None:
    expected = _read(expected_path(path))
    assert outcomes[path].text == expected


@pytest.mark.parametrize("path", PAIRS, ids=_id)
def test_fixing_twice_changes_nothing(path: Path, outcomes) -> None:
    # `remaining` is the fixed text's findings with the fixes a second run would apply.
    assert not [f for f in outcomes[path].remaining if applicable(f, unsafe=True)]


@pytest.mark.parametrize("path", PAIRS, ids=_id)
def test_fixed_file_has_no_finding_of_the_fixed_rule(path: Path, outcomes) -> None:
    outcome = outcomes[path]
    fixed_codes = {finding.code for finding in outcome.fixed} - {STILL_REPORTED.get(_id(path))}
    left = [f for f in outcome.remaining if f.code in fixed_codes]
    assert not left, [(f.line, f.code, f.message) for f in left]
    compile(outcome.text, str(path), "exec")


@pytest.mark.parametrize("path", [p for p in POSITIVES if p not in PAIRS], ids=_id)
def test_fixture_without_expected_output_gets_no_fix(path: Path, outcomes) -> None:
    """Unclear shapes get no fix; a new fix shows up here until its expected file is added."""
    outcome = outcomes[path]
    assert outcome.text == _read(path), "a fix was applied: add the expected .fixed.py"


CLEAN = sorted((FIXTURES / "clean").glob("*.py"))


@pytest.mark.parametrize("path", CLEAN, ids=_id)
def test_clean_fixture_is_left_alone(path: Path) -> None:
    """Not even the analysis' known false positives on correct code get a fix that changes it."""
    fixed = fix_text(_read(path), str(path), unsafe=True).text
    if fixed != _read(path) and _id(path) in KNOWN_GAPS:
        # A false positive listed in tests/test_fixtures.py brings its rule's fix along;
        # that list is strict, so this check is back in force once the analysis is fixed.
        pytest.xfail(f"known false positive carries a fix: {KNOWN_GAPS[_id(path)]}")
    assert fixed == _read(path)


def test_safe_only_leaves_unsafe_fixes_alone(outcomes) -> None:
    path = FIXTURES / "GL003" / "zero_grad_missing.py"
    outcome = fix_text(_read(path), str(path), unsafe=False)
    assert outcome.text == _read(path)
    assert [f.code for f in outcome.remaining] == ["GL003"]
    assert not outcome.remaining[0].fix.is_safe


def test_fixes_keep_the_expect_comments_and_everything_else(outcomes) -> None:
    for path in PAIRS:
        before = _read(path).splitlines()
        after = outcomes[path].text.splitlines()
        assert sum("# expect:" in line for line in before) == sum("# expect:" in line for line in after), _id(path)
        # Only a few lines change: the codemods edit the flagged spots, not the file.
        changed = set(after) ^ set(before)
        assert len(changed) <= 6, _id(path)


if os.environ.get("GRAPHLINT_WRITE_FIXED"):  # regenerate the expected files after a deliberate change

    def test_write_expected_files(outcomes) -> None:
        for path, outcome in outcomes.items():
            target = expected_path(path)
            if outcome.text != _read(path):
                target.parent.mkdir(exist_ok=True)
                target.write_bytes(outcome.text.encode("utf-8"))
