"""[tool.graphlint] in pyproject.toml: discovery, every key, CLI precedence, and errors that name key and file."""

from __future__ import annotations

from pathlib import Path

import pytest

import graphlint.dynamic.cli_support
from graphlint.config import Config, ConfigError, find_config, load_config

BROKEN = "import torch\nloss.backward()\nfor x in data\n    pass\n"  # one GL000 at 3:14


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def reported(result) -> list[str]:
    """The files with findings in a text report."""
    return sorted({line.split(":")[0] for line in result.stdout.splitlines() if ": GL" in line})


def test_the_nearest_pyproject_with_a_graphlint_table_applies(run_cli, tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.graphlint]\nignore = ["GL000"]\n')
    write(tmp_path / "pkg" / "pyproject.toml", '[project]\nname = "pkg"\n')  # no table: keep walking up
    write(tmp_path / "pkg" / "sub" / "broken.py", BROKEN)
    assert run_cli("check", "pkg/sub/broken.py").exit_code == 0
    assert find_config(tmp_path / "pkg" / "sub" / "broken.py") == tmp_path / "pyproject.toml"


def test_without_configuration_defaults_apply(run_cli, tmp_path):
    write(tmp_path / "broken.py", BROKEN)
    assert find_config(tmp_path / "broken.py") is None
    assert run_cli("check", "broken.py").exit_code == 1


def test_cli_flags_override_the_file(run_cli, tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.graphlint]\nignore = ["GL000"]\nselect = ["GL001"]\n')
    write(tmp_path / "broken.py", BROKEN)
    assert run_cli("check", "broken.py").exit_code == 0
    assert run_cli("check", "--ignore", "GL005", "broken.py").exit_code == 1


def test_config_option_and_isolated(run_cli, tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.graphlint]\nignore = ["GL000"]\n')
    write(tmp_path / "strict.toml", 'select = ["ALL"]\n')  # not a pyproject: keys at the top level
    write(tmp_path / "other" / "pyproject.toml", '[tool.graphlint]\nignore = ["GL0"]\n')
    write(tmp_path / "broken.py", BROKEN)
    assert run_cli("check", "broken.py").exit_code == 0
    assert run_cli("check", "--config", "strict.toml", "broken.py").exit_code == 1
    assert run_cli("check", "--config", "other/pyproject.toml", "broken.py").exit_code == 0
    assert run_cli("check", "--isolated", "broken.py").exit_code == 1


def test_exclude_replaces_the_defaults_and_extend_exclude_adds_to_them(run_cli, tmp_path):
    for name in ("train.py", "legacy/old.py", "build/gen.py", "generated/model.py"):
        write(tmp_path / name, BROKEN)
    assert reported(run_cli("check")) == ["generated/model.py", "legacy/old.py", "train.py"]
    write(tmp_path / "pyproject.toml", '[tool.graphlint]\nextend-exclude = ["generated/", "legacy/old.py"]\n')
    assert reported(run_cli("check")) == ["train.py"]
    write(tmp_path / "pyproject.toml", '[tool.graphlint]\nexclude = ["legacy/"]\n')
    assert reported(run_cli("check")) == ["build/gen.py", "generated/model.py", "train.py"]
    # Named explicitly, an excluded file is still checked.
    assert reported(run_cli("check", "legacy/old.py")) == ["legacy/old.py"]


def test_exclude_patterns_are_relative_to_the_config_file(run_cli, tmp_path):
    write(tmp_path / "project" / "pyproject.toml", '[tool.graphlint]\nextend-exclude = ["/scripts/"]\n')
    write(tmp_path / "project" / "scripts" / "a.py", BROKEN)
    write(tmp_path / "project" / "src" / "scripts" / "b.py", BROKEN)
    assert reported(run_cli("check", "project")) == ["project/src/scripts/b.py"]


def test_per_file_ignores(run_cli, tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.graphlint.per-file-ignores]\n"tests/*" = ["GL000"]\n"x.py" = ["GL001"]\n')
    write(tmp_path / "tests" / "test_a.py", BROKEN)
    write(tmp_path / "x.py", BROKEN)
    assert reported(run_cli("check")) == ["x.py"]


def test_paths_in_two_projects_use_their_own_settings(run_cli, tmp_path):
    write(tmp_path / "a" / "pyproject.toml", '[tool.graphlint]\nignore = ["GL000"]\n')
    write(tmp_path / "a" / "broken.py", BROKEN)
    write(tmp_path / "b" / "broken.py", BROKEN)
    assert reported(run_cli("check", "a", "b")) == ["b/broken.py"]


def _count_toml_reads(monkeypatch) -> list[Path]:
    """Every configuration file parsed from now on, in order."""
    import graphlint.config

    reads: list[Path] = []
    read_toml = graphlint.config._read_toml

    def counting(path: Path):
        reads.append(path)
        return read_toml(path)

    monkeypatch.setattr(graphlint.config, "_read_toml", counting)
    return reads


def test_many_explicit_files_of_one_project_parse_its_configuration_once(run_cli, tmp_path, monkeypatch):
    # What pre-commit does: every staged file on the command line.
    write(tmp_path / "pyproject.toml", '[tool.graphlint]\nignore = ["GL000"]\n')
    write(tmp_path / "pkg" / "pyproject.toml", '[project]\nname = "pkg"  # linted by graphlint\n')  # no table
    files = [f"pkg/mod{i}/sub/f{j}.py" for i in range(5) for j in range(8)] + [f"top{j}.py" for j in range(8)]
    for name in files:
        write(tmp_path / name, BROKEN)
    reads = _count_toml_reads(monkeypatch)
    result = run_cli("check", "--jobs", "1", *files)
    assert result.exit_code == 0, result.output
    # Each pyproject.toml that mentions graphlint is parsed once, not once per file.
    assert sorted(reads) == [tmp_path / "pkg" / "pyproject.toml", tmp_path / "pyproject.toml"]


def test_explicit_files_of_two_projects_each_get_their_own_settings(run_cli, tmp_path, monkeypatch):
    write(tmp_path / "a" / "pyproject.toml", '[tool.graphlint]\nignore = ["GL000"]\n')
    write(tmp_path / "a" / "inner" / "pyproject.toml", '[tool.graphlint]\nselect = ["GL000"]\n')  # nearest wins
    write(tmp_path / "b" / "pyproject.toml", '[tool.graphlint]\nselect = ["GL0"]\n')
    files = [
        "a/x.py", "b/x.py", "a/inner/x.py", "a/sub/x.py", "c/x.py", "b/sub/x.py",
        "a/inner/deep/x.py", "c/d/x.py", "a/sub/y.py",
    ]
    for name in files:
        write(tmp_path / name, BROKEN)
    reads = _count_toml_reads(monkeypatch)
    # c/ has no configuration: defaults, GL000 reported.
    assert reported(run_cli("check", "--jobs", "1", *files)) == [
        "a/inner/deep/x.py", "a/inner/x.py", "b/sub/x.py", "b/x.py", "c/d/x.py", "c/x.py",
    ]
    assert len(reads) == len(set(reads)) == 3
    # The same answers, one file at a time.
    for name in files:
        expected = [] if name.startswith("a/") and not name.startswith("a/inner/") else [name]
        assert reported(run_cli("check", name)) == expected


def test_confirm_settings_reach_the_dynamic_checker(run_cli, tmp_path, monkeypatch):
    calls = []

    def fake_run_confirm(findings, sources=None, **options):
        calls.append(options)
        return findings

    monkeypatch.setattr(graphlint.dynamic.cli_support, "run_confirm", fake_run_confirm)
    write(tmp_path / "pyproject.toml", '[tool.graphlint.confirm]\ntimeout = 7\npython = "sh"\n')
    write(tmp_path / "broken.py", BROKEN)
    run_cli("check", "broken.py")
    assert calls == [], "the configuration never switches --confirm on"
    run_cli("check", "--confirm", "broken.py")
    assert (calls[-1]["timeout"], calls[-1]["python"]) == (7.0, "sh")
    run_cli("check", "--confirm", "--confirm-timeout", "3", "--python", "bash", "broken.py")
    assert (calls[-1]["timeout"], calls[-1]["python"]) == (3.0, "bash")


def test_a_relative_interpreter_path_is_relative_to_the_config_file(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.graphlint.confirm]\npython = ".venv/bin/python"\n')
    assert load_config(tmp_path / "pyproject.toml").confirm_python == str(tmp_path / ".venv/bin/python")


@pytest.mark.parametrize(
    "table, named",
    [
        ('selct = ["GL001"]', "'selct'"),
        ('select = "GL001"', "'select'"),
        ('select = ["E501"]', "'E501'"),
        ("ignore = [1]", "'ignore'"),
        ('exclude = "build/"', "'exclude'"),
        ("extend-exclude = [true]", "'extend-exclude'"),
        ('per-file-ignores = ["x"]', "'per-file-ignores'"),
        ('per-file-ignores = { "x.py" = "GL001" }', "per-file-ignores.x.py"),
        ("confirm = 5", "'confirm'"),
        ("confirm = { timeout = -1 }", "'confirm.timeout'"),
        ('confirm = { timeout = "60" }', "'confirm.timeout'"),
        ("confirm = { python = 3 }", "'confirm.python'"),
        ("confirm = { enabled = true }", "'confirm.enabled'"),
    ],
)
def test_a_bad_key_or_type_is_exit_2_naming_key_and_file(run_cli, tmp_path, table, named):
    config = write(tmp_path / "pyproject.toml", f"[tool.graphlint]\n{table}\n")
    write(tmp_path / "train.py", "x = 1\n")
    result = run_cli("check", "train.py")
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert named in result.stderr and str(config) in result.stderr
    with pytest.raises(ConfigError):
        load_config(config)


def test_invalid_toml_is_exit_2_naming_the_file(run_cli, tmp_path):
    config = write(tmp_path / "pyproject.toml", "[tool.graphlint]\nselect = [\n")
    write(tmp_path / "train.py", "x = 1\n")
    result = run_cli("check", "train.py")
    assert result.exit_code == 2 and str(config) in result.stderr and "Traceback" not in result.output


def test_a_missing_config_file_is_exit_2(run_cli, tmp_path):
    write(tmp_path / "train.py", "x = 1\n")
    result = run_cli("check", "--config", "nope.toml", "train.py")
    assert result.exit_code == 2 and "nope.toml" in result.stderr


def test_defaults():
    config = Config()
    assert config.select is None and config.ignore is None
    assert ".venv/" in config.all_excludes() and "site-packages/" in config.all_excludes()
