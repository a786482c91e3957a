"""Editors: `graphlint check --stdin-filename path.py -` checks the source sent on stdin."""

from __future__ import annotations

import json
import os
import subprocess
import sys

BROKEN = "import torch\nloss.backward()\nfor x in data\n"


def test_stdin_is_reported_under_the_given_name(run_cli):
    result = run_cli("check", "--stdin-filename", "src/train.py", "-", input=BROKEN)
    assert result.exit_code == 1
    assert result.stdout == "src/train.py:3:14: GL000 syntax error: expected ':'\nFound 1 error.\n"


def test_the_name_defaults_to_a_dash_and_clean_input_passes(run_cli):
    assert run_cli("check", "-", input=BROKEN).stdout.startswith("-:3:14: GL000")
    clean = run_cli("check", "-", input="x = 1\n")
    assert (clean.exit_code, clean.stdout) == (0, "All checks passed!\n")


def test_stdin_filename_alone_reads_stdin(run_cli):
    assert run_cli("check", "--stdin-filename", "a.py", input=BROKEN).stdout.startswith("a.py:3:14: GL000")


def test_the_file_on_disk_is_not_read(run_cli, tmp_path):
    (tmp_path / "train.py").write_text("x = 1\n")
    result = run_cli("check", "--stdin-filename", "train.py", "-", input=BROKEN)
    assert result.exit_code == 1


def test_json_names_the_stdin_file(run_cli, tmp_path):
    result = run_cli("check", "--output-format", "json", "--stdin-filename", "pkg/train.py", "-", input=BROKEN)
    [item] = json.loads(result.stdout)
    assert item["filename"] == str(tmp_path / "pkg" / "train.py")


def test_configuration_is_found_from_the_stdin_filename(run_cli, tmp_path):
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "pyproject.toml").write_text('[tool.graphlint.per-file-ignores]\n"legacy/*" = ["GL000"]\n')
    assert run_cli("check", "--stdin-filename", "proj/legacy/old.py", "-", input=BROKEN).exit_code == 0
    assert run_cli("check", "--stdin-filename", "proj/new.py", "-", input=BROKEN).exit_code == 1
    assert run_cli("check", "--ignore", "GL000", "--stdin-filename", "proj/new.py", "-", input=BROKEN).exit_code == 0


def test_suppression_comments_work_on_stdin(run_cli):
    source = "import torch\nloss.backward()\nfor x in data:  # noqa\n    loss.backward()\n"
    assert run_cli("check", "-", input=source).exit_code == 0


def test_dash_cannot_be_mixed_with_paths(run_cli, tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    result = run_cli("check", "-", "a.py", input="x = 1\n")
    assert result.exit_code == 2 and "stdin" in result.stderr


def test_bytes_on_stdin_are_decoded_like_a_file(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "graphlint", "check", "--stdin-filename", "x.py", "-"],
        input=b"loss.backward()\nname = 'caf\xe9'\n", capture_output=True, cwd=tmp_path, timeout=120,
        env={**os.environ, "GRAPHLINT_NO_CACHE": "1"},
    )
    assert done.returncode == 1
    assert done.stdout.decode().startswith("x.py:2:12: GL000 file is not valid utf-8")
