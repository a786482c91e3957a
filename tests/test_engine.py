"""The file pipeline: read errors, prefilter, cache, process pool, stable order, failures as GL000."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from graphlint import engine
from graphlint.engine import Settings, check_files, run
from graphlint.rules import ALL_CODES

ALL = frozenset(ALL_CODES)

# Deterministic findings that do not depend on how far the rules have come:
# a syntax error in a file the prefilter keeps (it spells a backward).
BROKEN = "import torch\nloss = torch.ones(1, requires_grad=True).sum()\nloss.backward(\n"
DOUBLE_BACKWARD = (
    "import torch\n"
    "model = torch.nn.Linear(2, 1)\n"
    "loss = model(torch.randn(4, 2)).sum()\n"
    "loss.backward()\n"
    "loss.backward()\n"
)
NO_TRAINING = "def add(a, b):\n    return a + b\n"


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def settings(**changes) -> Settings:
    return Settings(ALL, **{"cache": False, **changes})


def codes_by_file(findings) -> dict[str, list[tuple[int, str]]]:
    result: dict[str, list[tuple[int, str]]] = {}
    for finding in findings:
        result.setdefault(Path(finding.path).name, []).append((finding.line, finding.code))
    return result


def test_check_files_keeps_its_signature_and_finds_a_real_bug(tmp_path: Path) -> None:
    path = write(tmp_path, "train.py", DOUBLE_BACKWARD)
    findings = check_files([path], Settings(codes=ALL, cache=False))
    assert [(f.line, f.code) for f in findings] == [(5, "GL001")]
    assert findings[0].path == str(path)


def test_unreadable_paths_become_gl000_and_the_run_goes_on(tmp_path: Path) -> None:
    broken = write(tmp_path, "b.py", BROKEN)
    missing = tmp_path / "missing.py"
    directory = tmp_path / "a_directory.py"
    directory.mkdir()
    findings = check_files([missing, directory, broken], settings())
    by_file = codes_by_file(findings)
    assert by_file["missing.py"] == [(1, "GL000")]
    assert by_file["a_directory.py"] == [(1, "GL000")]
    assert by_file["b.py"][0][1] == "GL000"
    assert "cannot read file" in next(f.message for f in findings if f.path == str(missing))


def test_prefilter_skips_files_without_training_spellings(tmp_path: Path) -> None:
    paths = [write(tmp_path, "util.py", NO_TRAINING), write(tmp_path, "b.py", BROKEN)]
    result = run(paths, settings())
    assert result.stats.skipped_by_prefilter == 1
    assert result.stats.analysed == 1
    off = run(paths, settings(prefilter=False))
    assert off.stats.analysed == 2 and off.findings == result.findings


def test_second_stage_drops_files_whose_spellings_are_only_prose(tmp_path: Path) -> None:
    prose = write(tmp_path, "util.py", '"""Call loss.backward() before opt.step()."""\n' + NO_TRAINING)
    broken = write(tmp_path, "b.py", BROKEN)
    result = run([prose, broken], Settings(ALL, jobs=1, cache_root=tmp_path))
    assert result.stats.skipped_by_prefilter == 0
    assert result.stats.skipped_by_code_prefilter == 1
    assert result.stats.analysed == 1  # the broken file does not compile: kept for its GL000
    assert [Path(f.path).name for f in result.findings] == ["b.py"]
    warm = run([prose, broken], Settings(ALL, jobs=1, cache_root=tmp_path))
    assert warm.stats.from_cache == 2 and warm.findings == result.findings


def test_a_broken_file_outside_the_prefilter_is_still_reported(tmp_path: Path) -> None:
    # Stage 1 drops it (no training spelling), but its syntax is checked: a
    # file that does not parse is one GL000, with the parser's message and position.
    path = write(tmp_path, "notes.py", "def f(:\n")
    result = run([path], settings())
    [finding] = result.findings
    assert (finding.code, finding.line, finding.col, finding.message) == ("GL000", 1, 7, "syntax error: invalid syntax")
    assert result.stats.skipped_by_prefilter == 1 and result.stats.analysed == 0
    assert result.stats.syntax_checked == 1 and result.stats.syntax_errors == 1
    # The same GL000 as without the prefilter, where every file is analysed.
    assert check_files([path], settings(prefilter=False)) == result.findings


def test_a_broken_file_without_spellings_and_a_file_with_findings_are_both_reported(tmp_path: Path) -> None:
    files = [
        write(tmp_path, "a_train.py", DOUBLE_BACKWARD),
        write(tmp_path, "b_notes.py", "def f(:\n"),
        write(tmp_path, "c_util.py", NO_TRAINING),
    ]
    result = run(files, settings(jobs=1))
    assert codes_by_file(result.findings) == {"a_train.py": [(5, "GL001")], "b_notes.py": [(1, "GL000")]}
    stats = result.stats
    assert (stats.analysed, stats.skipped_by_prefilter, stats.syntax_checked, stats.syntax_errors) == (1, 2, 2, 1)
    assert set(result.seconds) == {str(files[0]), str(files[1])}  # both were parsed


def test_syntax_checks_are_cached_and_a_warm_run_still_reports_the_gl000(tmp_path: Path) -> None:
    files = [write(tmp_path, "a_train.py", DOUBLE_BACKWARD), write(tmp_path, "b_notes.py", "def f(:\n")]
    files.append(write(tmp_path, "c_util.py", NO_TRAINING))
    config = Settings(ALL, jobs=1, cache_root=tmp_path)
    cold = run(files, config)
    warm = run(files, config)
    assert warm.findings == cold.findings and len(warm.findings) == 2
    assert (cold.stats.syntax_checked, cold.stats.syntax_from_cache) == (2, 0)
    assert (warm.stats.syntax_checked, warm.stats.syntax_from_cache, warm.stats.syntax_errors) == (0, 2, 0)
    assert (warm.stats.from_cache, warm.stats.analysed, warm.stats.skipped_by_prefilter) == (1, 0, 2)
    # Fixing the file invalidates its entry only.
    write(tmp_path, "b_notes.py", "def f():\n    pass\n")
    fixed = run(files, config)
    assert codes_by_file(fixed.findings) == {"a_train.py": [(5, "GL001")]}
    assert (fixed.stats.syntax_checked, fixed.stats.syntax_from_cache) == (1, 1)


def test_without_gl000_a_dropped_file_is_not_even_parsed(tmp_path: Path) -> None:
    path = write(tmp_path, "notes.py", "def f(:\n")
    result = run([path], Settings(ALL - {"GL000"}, cache=False))
    assert result.findings == []
    assert result.stats.skipped_by_prefilter == 1 and result.stats.syntax_checked == 0


def test_only_gl000_selected_syntax_checks_every_file(tmp_path: Path) -> None:
    paths = [write(tmp_path, "a.py", DOUBLE_BACKWARD), write(tmp_path, "b.py", BROKEN)]
    result = run(paths, Settings(frozenset({"GL000"}), cache=False, jobs=1))
    assert codes_by_file(result.findings) == {"b.py": [(3, "GL000")]}
    assert result.stats.syntax_checked == 2 and result.stats.analysed == 0


def test_code_that_parses_but_does_not_compile_gets_the_checkers_verdict(tmp_path: Path) -> None:
    # compile() rejects a return outside a function, CPython's parser accepts it:
    # the syntax check of a dropped file gives the answer the single-file
    # checker gives, exactly as for a file the prefilter keeps.
    source = "x = 1\nreturn x\n"
    path = write(tmp_path, "odd.py", source)
    result = run([path], settings())
    assert result.stats.syntax_errors == 0
    assert result.findings == check_files([path], settings(prefilter=False)) == _original_check_source(
        source.encode(), str(path), ALL
    ) == []


def test_syntax_checks_in_the_pool_are_batched_and_match_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(engine, "SYNTAX_BATCH_FILES", 4)
    paths = [write(tmp_path, f"u{index:02d}.py", "def f(:\n" if index % 5 == 0 else NO_TRAINING) for index in range(18)]
    paths.append(write(tmp_path, "train.py", DOUBLE_BACKWARD))
    jobs = [engine._Job(0, "t.py", b"", syntax_only=False)] + [engine._Job(i, "s.py", b"", True) for i in range(9)]
    assert [len(unit) for unit in engine._units(jobs)] == [1, 4, 4, 1]  # the analysis first, alone
    pooled = run(paths, settings(jobs=2))
    single = run(paths, settings(jobs=1))
    assert pooled.stats.workers == 2 and single.stats.workers == 1
    assert pooled.findings == single.findings
    assert codes_by_file(pooled.findings) == {
        **{f"u{index:02d}.py": [(1, "GL000")] for index in range(0, 18, 5)},
        "train.py": [(5, "GL001")],
    }
    assert pooled.stats == dataclasses.replace(single.stats, workers=2)
    assert pooled.stats.syntax_checked == 18 and pooled.stats.syntax_errors == 4


def _dying_parse(data: bytes) -> bool:
    if data.startswith(b"# die"):
        os._exit(3)
    return _original_parses(data)


_original_parses = engine.parses


def test_a_worker_that_dies_in_a_syntax_batch_costs_only_its_own_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "fork" not in __import__("multiprocessing").get_all_start_methods():
        pytest.skip("the patched worker function reaches workers only through fork")
    monkeypatch.setattr(engine, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(engine, "SYNTAX_BATCH_FILES", 3)
    monkeypatch.setattr(engine, "parses", _dying_parse)
    paths = [write(tmp_path, f"u{index}.py", "def f(:\n" if index % 2 else NO_TRAINING) for index in range(8)]
    paths.append(write(tmp_path, "die.py", "# die\n" + NO_TRAINING))
    paths.append(write(tmp_path, "train.py", DOUBLE_BACKWARD))
    result = run(paths, settings(jobs=2))
    by_file = codes_by_file(result.findings)
    assert by_file.pop("die.py") == [(1, "GL000")]
    assert "crashed" in next(f.message for f in result.findings if f.path.endswith("die.py"))
    assert by_file == {**{f"u{index}.py": [(1, "GL000")] for index in range(1, 8, 2)}, "train.py": [(5, "GL001")]}


def test_output_is_sorted_by_path_then_position_whatever_the_input_order(tmp_path: Path) -> None:
    names = [f"m{index:02d}.py" for index in range(12)]
    paths = [write(tmp_path, name, BROKEN if index % 2 else DOUBLE_BACKWARD) for index, name in enumerate(names)]
    forward = check_files(paths, settings(jobs=1))
    backward = check_files(list(reversed(paths)), settings(jobs=1))
    assert forward == backward
    assert [f.path for f in forward] == sorted(f.path for f in forward)


def test_pool_gives_the_same_findings_as_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "POOL_MIN_BYTES", 0)
    paths = [write(tmp_path, f"m{index}.py", BROKEN if index % 3 else DOUBLE_BACKWARD) for index in range(6)]
    pooled = run(paths, settings(jobs=2))
    single = run(paths, settings(jobs=1))
    assert pooled.stats.workers == 2
    assert single.stats.workers == 1
    assert pooled.findings == single.findings
    assert len(pooled.findings) == 6


def test_no_pool_for_a_single_file_or_a_small_batch(tmp_path: Path) -> None:
    one = run([write(tmp_path, "a.py", BROKEN)], settings(jobs=4))
    assert one.stats.workers == 1
    small = run([write(tmp_path, f"s{i}.py", BROKEN) for i in range(3)], settings(jobs=4))
    assert small.stats.workers == 1  # well under POOL_MIN_BYTES


def test_default_jobs_is_the_cpu_count() -> None:
    assert Settings(ALL).worker_count() == engine.available_cpus() >= 1
    assert Settings(ALL, jobs=3).worker_count() == 3


def _raising_check(data: bytes, display: str, codes, **options) -> list:
    if display.endswith("boom.py"):
        raise ValueError("analysis bug")
    return _original_check_source(data, display, codes, **options)


from graphlint.checker import check_source as _original_check_source  # noqa: E402


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_exception_in_the_analysis_is_gl000_for_that_file_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    import graphlint.checker

    monkeypatch.setattr(engine, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(graphlint.checker, "check_source", _raising_check)
    paths = [write(tmp_path, "boom.py", BROKEN), write(tmp_path, "ok.py", DOUBLE_BACKWARD)]
    findings = check_files(paths, settings(jobs=jobs))
    by_file = codes_by_file(findings)
    assert by_file["boom.py"] == [(1, "GL000")]
    assert by_file["ok.py"] == [(5, "GL001")]
    assert "ValueError: analysis bug" in next(f.message for f in findings if f.path.endswith("boom.py"))


def _dying_analysis(data: bytes, display: str, codes, prefilter: bool = True) -> list:
    if display.endswith("die.py"):
        os._exit(3)  # what a segfault or the OOM killer looks like to the pool
    return _original_analyse(data, display, codes, prefilter)


_original_analyse = engine.analyse_bytes


def test_a_worker_that_dies_costs_only_its_own_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if "fork" not in __import__("multiprocessing").get_all_start_methods():
        pytest.skip("the patched worker function reaches workers only through fork")
    monkeypatch.setattr(engine, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(engine, "analyse_bytes", _dying_analysis)
    paths = [write(tmp_path, f"ok{index}.py", DOUBLE_BACKWARD) for index in range(4)]
    paths.insert(2, write(tmp_path, "die.py", BROKEN))
    result = run(paths, settings(jobs=2))
    by_file = codes_by_file(result.findings)
    assert by_file.pop("die.py") == [(1, "GL000")]
    assert "crashed" in next(f.message for f in result.findings if f.path.endswith("die.py"))
    assert by_file == {f"ok{index}.py": [(5, "GL001")] for index in range(4)}


def test_warm_run_reads_the_cache_and_matches_the_cold_run(tmp_path: Path) -> None:
    project = tmp_path / "project"
    write(project, "pyproject.toml", "")
    paths = [write(project, "a.py", DOUBLE_BACKWARD), write(project, "b.py", BROKEN), write(project, "c.py", NO_TRAINING)]
    cold = run(paths, Settings(ALL, jobs=1))
    warm = run(paths, Settings(ALL, jobs=1))
    assert cold.stats.from_cache == 0 and cold.stats.analysed == 2
    assert warm.stats.from_cache == 2 and warm.stats.analysed == 0
    assert warm.findings == cold.findings
    assert (project / ".graphlint_cache" / ".gitignore").exists()


def test_editing_a_file_invalidates_only_its_entry(tmp_path: Path) -> None:
    paths = [write(tmp_path, "a.py", DOUBLE_BACKWARD), write(tmp_path, "b.py", BROKEN)]
    config = Settings(ALL, jobs=1, cache_root=tmp_path)
    run(paths, config)
    write(tmp_path, "a.py", DOUBLE_BACKWARD.replace("loss.backward()\nloss.backward()", "loss.backward()"))
    again = run(paths, config)
    assert again.stats.from_cache == 1 and again.stats.analysed == 1
    assert set(codes_by_file(again.findings)) == {"b.py"}


def test_other_settings_do_not_reuse_entries(tmp_path: Path) -> None:
    path = write(tmp_path, "a.py", DOUBLE_BACKWARD)
    run([path], Settings(ALL, jobs=1, cache_root=tmp_path))
    narrowed = run([path], Settings(frozenset({"GL003", "GL000"}), jobs=1, cache_root=tmp_path))
    assert narrowed.stats.from_cache == 0
    assert narrowed.findings == []


def test_prefilter_on_and_off_keep_separate_entries(tmp_path: Path) -> None:
    prose = write(tmp_path, "util.py", '"""Call loss.backward() yourself."""\n' + NO_TRAINING)
    run([prose], Settings(ALL, jobs=1, cache_root=tmp_path))
    off = run([prose], Settings(ALL, jobs=1, cache_root=tmp_path, prefilter=False))
    assert off.stats.from_cache == 0 and off.stats.analysed == 1


def test_no_cache_neither_reads_nor_writes(tmp_path: Path) -> None:
    path = write(tmp_path, "a.py", DOUBLE_BACKWARD)
    run([path], Settings(ALL, cache=False, cache_root=tmp_path))
    assert not (tmp_path / ".graphlint_cache").exists()
    run([path], Settings(ALL, cache_root=tmp_path))
    second = run([path], Settings(ALL, cache=False, cache_root=tmp_path))
    assert second.stats.from_cache == 0 and second.stats.analysed == 1


@pytest.mark.parametrize(("value", "cached"), [("1", False), ("true", False), ("0", True), ("", True)])
def test_graphlint_no_cache_environment_variable_sets_the_default(
    monkeypatch: pytest.MonkeyPatch, value: str, cached: bool
) -> None:
    monkeypatch.setenv("GRAPHLINT_NO_CACHE", value)
    assert Settings(ALL).cache is cached
    assert Settings(ALL, cache=True).cache  # an explicit setting wins


def test_corrupted_entry_is_reanalysed_and_repaired(tmp_path: Path) -> None:
    path = write(tmp_path, "a.py", DOUBLE_BACKWARD)
    config = Settings(ALL, jobs=1, cache_root=tmp_path)
    cold = run([path], config)
    entries = [p for p in (tmp_path / ".graphlint_cache").rglob("*.json") if not p.name.startswith(".")]
    assert len(entries) == 1
    entries[0].write_text('{"key": "forged", "findings": []}')
    repaired = run([path], config)
    assert repaired.stats.analysed == 1 and repaired.findings == cold.findings
    assert run([path], config).stats.from_cache == 1


def test_cache_goes_to_each_files_project_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    first = write(tmp_path / "one", "train.py", BROKEN)
    second = write(tmp_path / "two" / "src", "train.py", BROKEN)
    write(tmp_path / "one", "pyproject.toml", "")
    (tmp_path / "two" / ".git").mkdir()
    run([first, second], Settings(ALL, jobs=1))
    assert (tmp_path / "one" / ".graphlint_cache").is_dir()
    assert (tmp_path / "two" / ".graphlint_cache").is_dir()
    assert not (tmp_path / "two" / "src" / ".graphlint_cache").exists()


def test_two_concurrent_runs_share_one_cache_safely(tmp_path: Path) -> None:
    import subprocess
    import sys

    write(tmp_path, "pyproject.toml", "")
    paths = [write(tmp_path, f"m{index}.py", BROKEN if index % 2 else DOUBLE_BACKWARD) for index in range(6)]
    script = (
        "from pathlib import Path\n"
        "from graphlint.engine import Settings, run\n"
        f"result = run([Path(p) for p in {[str(p) for p in paths]!r}], Settings(frozenset({sorted(ALL)!r}), jobs=1))\n"
        "print(len(result.findings), result.stats.from_cache + result.stats.analysed)\n"
    )
    runs = [
        subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=120)[0].split() for process in runs]
    assert all(process.returncode == 0 for process in runs)
    assert outputs[0] == outputs[1] == ["6", "6"]
    warm = run(paths, Settings(ALL, jobs=1))
    assert warm.stats.from_cache == 6
    assert len(warm.findings) == 6


def test_graphlint_timings_records_what_the_run_did(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    report = tmp_path / "timings.json"
    monkeypatch.setenv("GRAPHLINT_TIMINGS", str(report))
    paths = [write(tmp_path, "a.py", DOUBLE_BACKWARD), write(tmp_path, "util.py", NO_TRAINING)]
    result = run(paths, settings(jobs=1))
    written = json.loads(report.read_text())
    assert written["stats"]["analysed"] == 1 and written["stats"]["skipped_by_prefilter"] == 1
    assert list(written["seconds"]) == [str(paths[0])] == list(result.seconds)
    assert written["seconds"][str(paths[0])] > 0


def test_analysis_does_not_import_libcst(tmp_path: Path) -> None:
    # libcst (0.3 s to import) is the fixer's: the analysis reads CPython's tree.
    import subprocess
    import sys

    write(tmp_path, "pyproject.toml", "")
    paths = [write(tmp_path, "a.py", BROKEN), write(tmp_path, "util.py", NO_TRAINING)]
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from graphlint.engine import Settings, run\n"
        f"result = run([Path(p) for p in {[str(p) for p in paths]!r}], Settings(frozenset({sorted(ALL)!r}), jobs=1))\n"
        "print(result.stats.analysed, 'libcst' in sys.modules)\n"
    )
    cold = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True)
    warm = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert cold.stdout.split() == ["1", "False"]
    assert warm.stdout.split() == ["0", "False"]


@pytest.mark.parametrize("jobs", [1, 2])
def test_syntax_checks_that_parse_do_not_import_libcst(tmp_path: Path, jobs: int) -> None:
    import subprocess
    import sys

    paths = [write(tmp_path, f"util{index}.py", NO_TRAINING * 40) for index in range(30)]
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from graphlint import engine\n"
        "engine.POOL_MIN_BYTES = 0\n"
        "engine.SYNTAX_BATCH_FILES = 4\n"
        f"result = engine.run([Path(p) for p in {[str(p) for p in paths]!r}], "
        f"engine.Settings(frozenset({sorted(ALL)!r}), jobs={jobs}, cache=False))\n"
        "print(result.stats.syntax_checked, result.stats.workers, len(result.findings), 'libcst' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["30", str(jobs), "0", "False"]
