"""The result cache: keys, shards, entry validation, atomic writes, retention, project roots."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from graphlint import cache as cache_module
from graphlint.cache import RETENTION_DAYS, Cache, CacheKey, analysis_fingerprint, decode_entry, encode_entry, project_root
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
    store.flush()
    loaded = Cache(tmp_path, "fingerprint").load(key, "moved/b.py")
    assert loaded == [finding.with_(path="moved/b.py") for finding in FINDINGS]
    assert loaded[1].extra == {"cell": 2}


def test_a_run_writes_one_file_per_shard_it_changed_not_one_per_entry(tmp_path: Path) -> None:
    store = Cache(tmp_path, "fingerprint")
    keys = [key_for(b"%d" % index) for index in range(200)]
    for key in keys:
        store.store(key, FINDINGS)
    assert not (tmp_path / ".graphlint_cache").exists(), "nothing is written before flush"
    store.flush()
    shards = sorted(store.entries.glob("*.json"))
    assert [path.name for path in shards] == sorted({store.shard_path(key).name for key in keys})
    assert len(shards) <= 16
    reader = Cache(tmp_path, "fingerprint")
    assert all(reader.load(key, "a.py") == FINDINGS for key in keys)


def test_a_warm_run_on_the_same_day_rewrites_nothing(tmp_path: Path) -> None:
    store = Cache(tmp_path, "fingerprint", today=100)
    store.store(key_for(), FINDINGS)
    store.flush()
    shard = store.shard_path(key_for())
    shard.write_text(shard.read_text() + " ")  # a rewrite would drop the trailing space
    warm = Cache(tmp_path, "fingerprint", today=100)
    assert warm.load(key_for(), "a.py") == FINDINGS
    warm.flush()
    assert shard.read_text().endswith(" ")


def keys_in_one_shard(count: int, shard: str | None = None) -> list[CacheKey]:
    """``count`` different keys whose entries share a shard (``shard``: its hex digit)."""
    keys = [key_for(b"%d" % index) for index in range(2000)]
    digit = shard or keys[0].digest[0]
    return [key for key in keys if key.digest[0] == digit][:count]


def test_entries_unused_for_the_retention_period_are_dropped(tmp_path: Path) -> None:
    old, used, new = keys_in_one_shard(3)
    first = Cache(tmp_path, "fingerprint", today=100)
    first.store(old, FINDINGS)
    first.store(used, FINDINGS)
    first.flush()
    later = Cache(tmp_path, "fingerprint", today=100 + RETENTION_DAYS)
    assert later.load(used, "a.py") == FINDINGS  # its day is refreshed
    later.flush()
    last = Cache(tmp_path, "fingerprint", today=101 + RETENTION_DAYS)
    last.store(new, FINDINGS)  # rewrites the shard
    last.flush()
    shard = last.shard_path(old).read_text()
    assert used.digest in shard and new.digest in shard
    assert old.digest not in shard


def test_concurrent_runs_merge_their_entries_instead_of_overwriting(tmp_path: Path) -> None:
    one, two = Cache(tmp_path, "fingerprint"), Cache(tmp_path, "fingerprint")
    first, second = key_for(b"1"), key_for(b"2")
    assert one.load(first, "a.py") is None and two.load(second, "a.py") is None  # both read the shards
    one.store(first, FINDINGS)
    two.store(second, FINDINGS[:1])
    one.flush()
    two.flush()
    reader = Cache(tmp_path, "fingerprint")
    assert reader.load(first, "a.py") == FINDINGS
    assert reader.load(second, "a.py") == FINDINGS[:1]


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


GOOD_RECORD = {"code": "GL001", "message": "m", "line": 3, "col": 1, "end_line": 3, "end_col": 4, "extra": {}}


@pytest.mark.parametrize(
    "shard",
    ["", "{", "not json at all", "[]", "{}", '{"entries": []}', '{"entries": {"k": 1}}', '{"entries": null}'],
)
def test_corrupted_shard_is_a_miss_then_rewritten(tmp_path: Path, shard: str) -> None:
    store = Cache(tmp_path, "fingerprint")
    key = key_for()
    store.entries.mkdir(parents=True)
    store.shard_path(key).write_text(shard)
    assert store.load(key, "a.py") is None
    store.store(key, FINDINGS[:1])
    store.flush()
    assert Cache(tmp_path, "fingerprint").load(key, "a.py") == FINDINGS[:1]


@pytest.mark.parametrize(
    "entry",
    [
        [],
        {"findings": []},  # no day
        {"used": "1", "findings": []},
        {"used": 1, "findings": {}},
        {"used": 1, "findings": [1]},
        {"used": 1, "findings": [{"code": "GL001"}]},
        {"used": 1, "findings": [{**GOOD_RECORD, "path": "/etc/passwd"}]},
        {"used": 1, "findings": [{**GOOD_RECORD, "line": "3"}]},
        {"used": 1, "findings": [{**GOOD_RECORD, "line": True}]},
    ],
)
def test_corrupted_entry_is_ignored_then_rewritten(tmp_path: Path, entry: object) -> None:
    store = Cache(tmp_path, "fingerprint")
    key = key_for()
    neighbour = keys_in_one_shard(1, shard=key.digest[0])[0]
    entries = {key.digest: entry, neighbour.digest: {"used": 1, "findings": [GOOD_RECORD]}}
    store.entries.mkdir(parents=True)
    store.shard_path(key).write_text(json.dumps({"entries": entries}))
    assert store.load(key, "a.py") is None
    # One bad entry does not spoil its shard.
    assert store.load(neighbour, "a.py") == [Finding(path="a.py", **GOOD_RECORD)]
    store.store(key, FINDINGS[:1])
    store.flush()
    assert Cache(tmp_path, "fingerprint").load(key, "a.py") == FINDINGS[:1]


def test_undecodable_bytes_in_a_shard_are_a_miss(tmp_path: Path) -> None:
    store = Cache(tmp_path, "fingerprint")
    key = key_for()
    store.entries.mkdir(parents=True)
    store.shard_path(key).write_bytes(b"\xff\xfe\x00garbage")
    assert store.load(key, "a.py") is None


def test_entry_under_another_fingerprint_is_never_read(tmp_path: Path) -> None:
    key = key_for()
    old = Cache(tmp_path, "old-analysis-code")
    old.store(key, FINDINGS)
    old.flush()
    assert Cache(tmp_path, "new-analysis-code").load(key, "a.py") is None


def test_findings_carrying_a_fix_are_not_cached(tmp_path: Path) -> None:
    fixed = FINDINGS[0].with_(fix={"edits": []})
    assert encode_entry([fixed], 1) is None
    store = Cache(tmp_path, "fingerprint")
    store.store(key_for(), [fixed])
    store.flush()
    assert Cache(tmp_path, "fingerprint").load(key_for(), "a.py") is None


def test_entries_round_trip_through_json() -> None:
    entry = json.loads(json.dumps(encode_entry(FINDINGS, 7)))
    assert decode_entry(entry, "a.py") == FINDINGS
    assert encode_entry([FINDINGS[0].with_(extra={"cell": object()})], 7) is None


def test_cache_directory_carries_its_own_gitignore_and_cachedir_tag(tmp_path: Path) -> None:
    store = Cache(tmp_path, "fingerprint")
    store.store(key_for(), FINDINGS)
    store.flush()
    directory = tmp_path / ".graphlint_cache"
    assert (directory / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (directory / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert not list(directory.rglob(".tmp-*")), "temporary files must not be left behind"


def test_unwritable_cache_location_degrades_to_no_cache(tmp_path: Path) -> None:
    # A regular file where the directory should be: every write fails (works as root too).
    (tmp_path / ".graphlint_cache").write_text("not a directory")
    store = Cache(tmp_path, "fingerprint")
    store.store(key_for(), FINDINGS)
    store.flush()
    assert not store.writable
    assert Cache(tmp_path, "fingerprint").load(key_for(), "a.py") is None


def _hammer(directory: str, rounds: int) -> None:
    for index in range(rounds):
        store = Cache(Path(directory), "fingerprint")
        store.store(key_for(b"%d" % (index % 5)), FINDINGS)
        store.flush()


def test_concurrent_writers_never_leave_a_torn_shard(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
    if context is None:
        pytest.skip("needs fork")
    writers = [context.Process(target=_hammer, args=(str(tmp_path), 100)) for _ in range(3)]
    for writer in writers:
        writer.start()
    while any(writer.is_alive() for writer in writers):
        reader = Cache(tmp_path, "fingerprint")  # a new run reads the shards afresh
        for index in range(5):
            loaded = reader.load(key_for(b"%d" % index), "a.py")
            # Either not there yet or complete: never a partial shard.
            assert loaded is None or loaded == FINDINGS
    for writer in writers:
        writer.join()
        assert writer.exitcode == 0
    reader = Cache(tmp_path, "fingerprint")
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
