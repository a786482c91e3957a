"""File discovery: which files a directory walk yields, in which order, and what it never touches."""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

import pytest

from graphlint.files import SOURCE_SUFFIXES, MissingPathError, discover


def touch(root: Path, *relative: str) -> None:
    for name in relative:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


def found(tmp_path: Path, *paths, **kwargs) -> list[str]:
    """Discovered files as posix paths relative to tmp_path (the working directory)."""
    os.chdir(tmp_path)
    return [p.as_posix() for p in discover(list(paths) or ["."], **kwargs).files]


@pytest.fixture(autouse=True)
def _restore_cwd():
    cwd = os.getcwd()
    yield
    os.chdir(cwd)


def test_walks_directories_for_python_files_sorted_and_relative(tmp_path):
    touch(tmp_path, "b.py", "a.py", "pkg/z.py", "pkg/sub/m.py", "notes.txt", "data.json", "script.pyc")
    assert found(tmp_path) == ["a.py", "b.py", "pkg/sub/m.py", "pkg/z.py"]
    assert found(tmp_path, "pkg") == ["pkg/sub/m.py", "pkg/z.py"]
    assert found(tmp_path, str(tmp_path / "pkg")) == ["pkg/sub/m.py", "pkg/z.py"]


def test_suffixes_live_in_one_place():
    assert ".py" in SOURCE_SUFFIXES


def test_outside_the_working_directory_paths_are_kept_as_given(tmp_path):
    touch(tmp_path, "project/a.py", "elsewhere/b.py")
    os.chdir(tmp_path / "project")
    files = discover([str(tmp_path / "elsewhere")]).files
    assert files == [tmp_path / "elsewhere" / "b.py"]


@pytest.mark.parametrize(
    "directory",
    [".git", ".venv", "venv", "env", "build", "dist", "__pycache__", "site-packages", "node_modules",
     ".tox", ".mypy_cache", ".graphlint_cache", ".ipynb_checkpoints", "nested/site-packages"],
)
def test_skips_directories_that_never_hold_project_code(tmp_path, directory):
    touch(tmp_path, "train.py", f"{directory}/hidden.py", f"{directory}/deeper/hidden.py")
    assert found(tmp_path) == ["train.py"]


def test_skips_any_virtual_environment_by_its_pyvenv_cfg(tmp_path):
    touch(tmp_path, "train.py", "myenv/lib/python3.11/mod.py")
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert found(tmp_path) == ["train.py"]


def test_honours_gitignore_at_every_level_with_negation(tmp_path):
    touch(
        tmp_path,
        "keep.py", "generated.py", "logs/run.py",
        "pkg/a.py", "pkg/local_only.py", "pkg/sub/secret.py", "pkg/sub/keep_me.py",
    )
    (tmp_path / ".gitignore").write_text("generated.py\nlogs/\n# a comment\n*_only.py\n")
    (tmp_path / "pkg" / "sub").mkdir(exist_ok=True)
    (tmp_path / "pkg" / "sub" / ".gitignore").write_text("*.py\n!keep_me.py\n")
    assert found(tmp_path) == ["keep.py", "pkg/a.py", "pkg/sub/keep_me.py"]


def test_a_deeper_gitignore_can_re_include_what_a_parent_ignores(tmp_path):
    touch(tmp_path, "exp/run.py", "exp/keep.py")
    (tmp_path / ".gitignore").write_text("exp/*.py\n")
    (tmp_path / "exp" / ".gitignore").write_text("!keep.py\n")
    assert found(tmp_path) == ["exp/keep.py"]


def test_gitignore_files_above_the_walked_directory_apply_inside_a_repository(tmp_path):
    touch(tmp_path, "src/model.py", "src/gen_model.py", "src/tmp/scratch.py")
    (tmp_path / ".git" / "info").mkdir(parents=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("tmp/\n")
    (tmp_path / ".gitignore").write_text("gen_*.py\n")
    assert found(tmp_path, "src") == ["src/model.py"]


def test_gitignore_files_above_a_walked_directory_do_not_apply_outside_a_repository(tmp_path):
    touch(tmp_path, "src/gen_model.py")
    (tmp_path / ".gitignore").write_text("gen_*.py\n")
    assert found(tmp_path, "src") == ["src/gen_model.py"]


def test_files_named_explicitly_are_always_checked(tmp_path):
    touch(tmp_path, "build/generated.py", "ignored.py", "script")
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    assert found(tmp_path, "build/generated.py", "ignored.py", "script") == [
        "build/generated.py",
        "ignored.py",
        "script",
    ]


def test_duplicates_from_overlapping_paths_are_reported_once(tmp_path):
    touch(tmp_path, "pkg/a.py")
    assert found(tmp_path, "pkg", "pkg/a.py", ".", "./pkg/a.py") == ["pkg/a.py"]


def test_exclude_patterns_skip_walked_files_but_not_explicit_ones(tmp_path):
    touch(tmp_path, "train.py", "legacy/old.py", "tests/test_x.py")
    assert found(tmp_path, exclude=["legacy/", "test_*.py"]) == ["train.py"]
    assert found(tmp_path, "legacy/old.py", exclude=["legacy/"]) == ["legacy/old.py"]


def test_a_missing_path_is_an_error(tmp_path):
    touch(tmp_path, "a.py")
    with pytest.raises(MissingPathError, match="does-not-exist.py"):
        found(tmp_path, "a.py", "does-not-exist.py")


def test_symlink_loops_end_quickly_and_symlinked_files_are_found(tmp_path):
    touch(tmp_path, "pkg/a.py", "other/b.py")
    (tmp_path / "pkg" / "loop").symlink_to(tmp_path / "pkg", target_is_directory=True)
    (tmp_path / "pkg" / "up").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "pkg" / "link_to_other").symlink_to(tmp_path / "other", target_is_directory=True)
    (tmp_path / "pkg" / "alias.py").symlink_to(tmp_path / "pkg" / "a.py")
    (tmp_path / "pkg" / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    start = time.monotonic()
    files = found(tmp_path, "pkg")
    assert time.monotonic() - start < 5
    assert files == ["pkg/a.py", "pkg/alias.py", "pkg/link_to_other/b.py"]


def test_very_deep_directory_trees_do_not_exhaust_the_stack(tmp_path):
    # Built and removed level by level: os.makedirs and shutil.rmtree recurse per level.
    levels = [tmp_path]
    for _ in range(200):
        levels.append(levels[-1] / "d")
        levels[-1].mkdir()
    (levels[-1] / "x.py").write_text("x = 1\n")
    limit = sys.getrecursionlimit()
    # Headroom for the walk's own calls, far less than one frame per directory level.
    sys.setrecursionlimit(len(traceback.extract_stack()) + 80)
    try:
        files = found(tmp_path)
    finally:
        sys.setrecursionlimit(limit)
        (levels[-1] / "x.py").unlink()
        for level in reversed(levels[1:]):
            level.rmdir()
    assert len(files) == 1 and files[0].endswith("/d/x.py")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads unreadable directories anyway")
def test_an_unreadable_directory_is_a_warning_not_a_crash(tmp_path):
    touch(tmp_path, "a.py", "locked/b.py")
    (tmp_path / "locked").chmod(0)
    try:
        os.chdir(tmp_path)
        result = discover(["."])
    finally:
        (tmp_path / "locked").chmod(0o755)
    assert [p.as_posix() for p in result.files] == ["a.py"]
    assert any("locked" in warning for warning in result.warnings)


def test_a_malformed_gitignore_does_not_stop_the_walk(tmp_path):
    touch(tmp_path, "a.py")
    (tmp_path / ".gitignore").write_bytes(b"\xff\xfe bad bytes\n[unclosed\n")
    os.chdir(tmp_path)
    assert [p.as_posix() for p in discover(["."]).files] == ["a.py"]
