"""The result cache: keys, entry validation, atomic writes, project roots."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from graphlint import cache as cache_module
from graphlint.cache import Cache, CacheKey, analysis_fingerprint, decode_entry, encode_entry, project_root
from graphlint.finding import Finding

FINDINGS = [
    Finding("GL001", "second backward", "a.py", 6, 1, 6, 16),
    Finding("GL005", "total += loss", "a.py", 9, 5, 9, 18, extra={"cell": 2}),
]


def key_for(data: bytes = b"loss.backward()\n", codes: str = "codes=GL001") -> CacheKey:
    return CacheKey.of(data, ".py", codes, "fingerprint")


def test_entry_round_trips_and_takes_the_new_display_path(tmp_path: Path) -> None:
    store = Cache(tmp_path, "fingerprint")
    key = key_for()
    store.store(key, FINDINGS)
    loaded = store.load(key, "moved/b.py")
    assert loaded == [finding.with_(path="moved/b.py") for finding in FINDINGS]
    assert loaded[1].extra == {"cell": 2}


def test_key_depends_on_content_settings_suffix_and_fingerprint() -> None:
    base = CacheKey.of(b"x", ".py", "codes=GL001", "f1")
    assert CacheKey.of(b"x", ".py", "codes=GL001", "f1") == base
    assert CacheKey.of(b"y", ".py", "codes=GL001", "f1") != base
    assert CacheKey.of(b"x", ".ipynb", "codes=GL001", "f1") != base
    assert CacheKey.of(b"x", ".py", "codes=GL001,GL002", "f1") != base
    assert CacheKey.of(b"x", ".py", "codes=GL001", "f2") != base
    # Length-prefixed parts: moving bytes between fields cannot collide.
    assert CacheKey.of(b"x", ".py", "codes=GL00", "1f1") != base


def test_missing_entry_is_a_miss(tmp_path: Path) -> None:
    assert Cache(tmp_path, "fingerprint").load(key_for(), "a.py") is None


@pytest.mark.parametrize(
    "corrupt",
    [
        "",
        "{",
        "not json at all",
        "[]",
        '{"key": "other", "findings": []}',
        '{"findings": []}',
        "{KEY, \"findings\": {}}",
        "{KEY, \"findings\": [1]}",
        "{KEY, \"findings\": [{\"code\": \"GL001\"}]}",
        "{KEY, \"findings\": [RECORD_WITH_EXTRA_FIELD]}",
        "{KEY, \"findings\": [RECORD_LINE_IS_STRING]}",
        "{KEY, \"findings\": [RECORD_LINE_IS_BOOL]}",
    ],
)
def test_corrupted_entry_is_ignored_then_rewritten(tmp_path: Path, corrupt: str) -> None:
    store = Cache(tmp_path, "fingerprint")
    key = key_for()
    good = {"code": "GL001", "message": "m", "line": 3, "col": 1, "end_line": 3, "end_col": 4, "extra": {}}
    text = (
        corrupt.replace("KEY", json.dumps("key") + ": " + json.dumps(key.digest))
        .replace("RECORD_WITH_EXTRA_FIELD", json.dumps({**good, "path": "/etc/passwd"}))
        .replace("RECORD_LINE_IS_STRING", json.dumps({**good, "line": "3"}))
        .replace("RECORD_LINE_IS_BOOL", json.dumps({**good, "line": True}))
    )
    entry = store._path(key)
    entry.parent.mkdir(parents=True)
    entry.write_text(text)
    assert store.load(key, "a.py") is None
    store.store(key, FINDINGS[:1])
    assert store.load(key, "a.py") == FINDINGS[:1]


def test_undecodable_bytes_in_entry_are_a_miss(tmp_path: Path) -> None:
    store = Cache(tmp_path, "fingerprint")
    key = key_for()
    store._path(key).parent.mkdir(parents=True)
    store._path(key).write_bytes(b"\xff\xfe\x00garbage")
    assert store.load(key, "a.py") is None


def test_entry_under_another_fingerprint_is_never_read(tmp_path: Path) -> None:
    key = key_for()
    Cache(tmp_path, "old-analysis-code").store(key, FINDINGS)
    assert Cache(tmp_path, "new-analysis-code").load(key, "a.py") is None


def test_findings_carrying_a_fix_are_not_cached(tmp_path: Path) -> None:
    fixed = FINDINGS[0].with_(fix={"edits": []})
    assert encode_entry(key_for(), [fixed]) is None
    store = Cache(tmp_path, "fingerprint")
    store.store(key_for(), [fixed])
    assert store.load(key_for(), "a.py") is None


def test_decode_rejects_entry_for_another_key() -> None:
    text = encode_entry(key_for(b"one"), FINDINGS)
    assert decode_entry(text, key_for(b"one"), "a.py") == FINDINGS
    assert decode_entry(text, key_for(b"two"), "a.py") is None


def test_cache_directory_carries_its_own_gitignore_and_cachedir_tag(tmp_path: Path) -> None:
    Cache(tmp_path, "fingerprint").store(key_for(), FINDINGS)
    directory = tmp_path / ".graphlint_cache"
    assert (directory / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (directory / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert not list(directory.rglob(".tmp-*")), "temporary files must not be left behind"


def test_unwritable_cache_location_degrades_to_no_cache(tmp_path: Path) -> None:
    # A regular file where the directory should be: every write fails (works as root too).
    (tmp_path / ".graphlint_cache").write_text("not a directory")
    store = Cache(tmp_path, "fingerprint")
    store.store(key_for(), FINDINGS)
    assert store.load(key_for(), "a.py") is None
    assert not store.writable


def _hammer(directory: str, rounds: int) -> None:
    store = Cache(Path(directory), "fingerprint")
    for index in range(rounds):
        store.store(key_for(b"%d" % (index % 5)), FINDINGS)


def test_concurrent_writers_never_leave_a_torn_entry(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
    if context is None:
        pytest.skip("needs fork")
    writers = [context.Process(target=_hammer, args=(str(tmp_path), 200)) for _ in range(3)]
    for writer in writers:
        writer.start()
    reader = Cache(tmp_path, "fingerprint")
    seen = 0
    while any(writer.is_alive() for writer in writers):
        for index in range(5):
            loaded = reader.load(key_for(b"%d" % index), "a.py")
            # Either not there yet or complete: never a partial entry.
            assert loaded is None or loaded == FINDINGS
            seen += loaded is not None
    for writer in writers:
        writer.join()
        assert writer.exitcode == 0
    for index in range(5):
        assert reader.load(key_for(b"%d" % index), "a.py") == FINDINGS
    assert not list((tmp_path / ".graphlint_cache").rglob(".tmp-*"))


def test_fingerprint_follows_analysis_code_and_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = tmp_path / "rules"
    code.mkdir()
    (code / "gl001.py").write_text("CODE = 'GL001'\n")
    before = analysis_fingerprint([code])
    assert analysis_fingerprint([code]) == before
    (code / "gl001.py").write_text("CODE = 'GL001'  # edited\n")
    edited = analysis_fingerprint([code])
    assert edited != before
    (code / "new_rule.py").write_text("")
    assert analysis_fingerprint([code]) != edited
    current = analysis_fingerprint([code])
    monkeypatch.setattr(cache_module, "__version__", "99.0")
    assert analysis_fingerprint([code]) != current


def test_fingerprint_ignores_code_that_cannot_change_findings(tmp_path: Path) -> None:
    package = tmp_path / "graphlint"
    (package / "report").mkdir(parents=True)
    (package / "checker.py").write_text("")
    (package / "cli.py").write_text("")
    (package / "report" / "text.py").write_text("")
    before = analysis_fingerprint([package])
    (package / "cli.py").write_text("# a new option")
    (package / "report" / "text.py").write_text("# a new format")
    assert analysis_fingerprint([package]) == before
    (package / "notebooks.py").write_text("# a new module may change findings")
    assert analysis_fingerprint([package]) != before


def test_fingerprint_of_the_installed_analysis_covers_the_rules() -> None:
    roots = cache_module._analysis_code_roots()
    names = {path.name for root in roots for path in root.glob("*.py")}
    assert "checker.py" in names
    assert any(name.startswith("gl001") for name in names)


def test_project_root_is_nearest_marker_else_cwd(tmp_path: Path) -> None:
    (tmp_path / "proj" / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "proj" / "pyproject.toml").write_text("")
    (tmp_path / "repo" / "deep").mkdir(parents=True)
    (tmp_path / "repo" / ".git").mkdir()
    (tmp_path / "loose").mkdir()
    cwd = tmp_path / "elsewhere"
    memo: dict = {}
    assert project_root(tmp_path / "proj/src/pkg/train.py", cwd, memo) == tmp_path / "proj"
    assert project_root(tmp_path / "proj/src/other.py", cwd, memo) == tmp_path / "proj"
    assert project_root(tmp_path / "repo/deep/train.py", cwd, memo) == tmp_path / "repo"
    assert project_root(Path("deep/train.py"), tmp_path / "repo", memo) == tmp_path / "repo"
    # No marker up to / (a tmp dir has none): the current directory, as Ruff does.
    assert project_root(tmp_path / "loose/train.py", cwd, {}) in (cwd, *_markers_above(tmp_path))


def _markers_above(path: Path) -> list[Path]:
    return [p for p in path.parents if (p / "pyproject.toml").exists() or (p / ".git").exists()]
