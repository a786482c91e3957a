"""Per-file result cache in ``.graphlint_cache/`` (what makes a re-run near-instant).

An entry holds one file's findings and is found by a key that hashes everything
the findings depend on: the file's bytes, its kind (suffix), the effective
settings, graphlint's version and a fingerprint of the analysis code itself (so
editing a rule in a development checkout invalidates every entry).

Entries live in a few shard files (see ``Cache``), read once and written once
per run. Entries are data, never code (JSON, not pickle: a checked-out
repository may ship a crafted cache). A shard that does not decode and an
entry that does not match the expected shape are ignored and rewritten, never
trusted. Shards are written to a temporary file in the same directory and
moved into place with ``os.replace``, merged with what is on disk just before,
so two concurrent runs never see half a shard (at worst one run's new entries
are lost, a later miss). Entries unused for ``RETENTION_DAYS`` are dropped.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from graphlint import __version__
from graphlint.finding import Finding

CACHE_DIR_NAME = ".graphlint_cache"
# Bump when the entry layout changes; old entries then live in another directory.
_FORMAT = 2
# Entries no run has used for this many days are dropped when their shard is next written.
RETENTION_DAYS = 30
# Markers Ruff also uses to find a project root for its cache.
_PROJECT_MARKERS = ("pyproject.toml", ".git")

_FINDING_FIELDS = {
    "code": str,
    "message": str,
    "line": int,
    "col": int,
    "end_line": int,
    "end_col": int,
    "extra": dict,
}


def analysis_fingerprint(roots: list[Path] | None = None) -> str:
    """A hash of graphlint's version and of the source of every module that produces findings.

    Reading a few dozen small files costs about a millisecond; it is what makes
    a development edit to a rule invalidate old results without a version bump.
    """
    digest = hashlib.sha256(f"graphlint {__version__} cache format {_FORMAT}".encode())
    for root in sorted(roots if roots is not None else _analysis_code_roots()):
        for path in sorted(root.rglob("*.py")):
            if path.relative_to(root).parts[0] in _NOT_ANALYSIS:
                continue
            digest.update(str(path.relative_to(root)).encode())
            try:
                digest.update(path.read_bytes())
            except OSError:
                digest.update(b"<unreadable>")
    return digest.hexdigest()


# Parts of the graphlint package that never change a file's findings. Anything
# not listed (a new module included) counts, so a forgotten entry only costs a
# needless invalidation, never a stale result.
_NOT_ANALYSIS = frozenset(
    {"__main__.py", "cli.py", "files.py", "config.py", "cache.py", "engine.py", "report", "dynamic", "__pycache__"}
)


def _analysis_code_roots() -> list[Path]:
    import importlib.util

    import graphlint

    # find_spec locates graphlint.rules (a separate folder in a checkout) without
    # importing it: the rules pull in the model, which a fully cached run never needs.
    rules = importlib.util.find_spec("graphlint.rules")
    rule_paths = list(rules.submodule_search_locations or []) if rules else []
    return sorted({Path(p).resolve() for p in (*graphlint.__path__, *rule_paths)})


def project_root(path: Path, cwd: Path, _memo: dict[Path, Path] | None = None) -> Path:
    """The nearest directory above ``path`` holding pyproject.toml or .git, else ``cwd`` (Ruff's rule)."""
    start = (path if path.is_absolute() else cwd / path).parent
    seen: list[Path] = []
    found = cwd
    for directory in (start, *start.parents):
        if _memo is not None and directory in _memo:
            found = _memo[directory]
            break
        seen.append(directory)
        if any((directory / marker).exists() for marker in _PROJECT_MARKERS):
            found = directory
            break
    if _memo is not None:
        for directory in seen:
            _memo[directory] = found
    return found


@dataclass(frozen=True)
class CacheKey:
    """Where one file's result lives and the full key it must carry inside."""

    digest: str

    @classmethod
    def of(cls, data: bytes, suffix: str, settings_key: str, fingerprint: str) -> "CacheKey":
        digest = hashlib.sha256()
        for part in (fingerprint.encode(), settings_key.encode(), suffix.encode()):
            digest.update(len(part).to_bytes(8, "little"))
            digest.update(part)
        digest.update(data)
        return cls(digest.hexdigest())


class Cache:
    """One project's cache: a few shard files, read once and written once per run.

    An entry per file would cost a file creation per file checked: on a cold
    run over 2,700 files that was 2 s of system time in the main process,
    which competes with the workers for the CPUs. Entries are grouped into
    ``SHARDS`` files by the first hex digit of their key instead; each shard
    is read when a key of it is first looked up and rewritten by ``flush``
    only if this run stored or used one of its entries. Every failure to read
    or write is a silent miss.
    """

    def __init__(self, root: Path, fingerprint: str, today: int | None = None) -> None:
        self.directory = root / CACHE_DIR_NAME
        # One directory per analysis fingerprint: a new version never reads old entries.
        self.entries = self.directory / f"v{_FORMAT}-{fingerprint[:16]}"
        self._prepared = False
        self.writable = True
        self._today = today if today is not None else int(time.time() // 86400)
        self._shards: dict[str, dict[str, dict]] = {}
        self._touched: dict[str, dict[str, dict]] = {}  # per shard: entries this run stored or used

    def shard_path(self, key: CacheKey) -> Path:
        return self.entries / f"shard-{key.digest[0]}.json"

    def load(self, key: CacheKey, display_path: str) -> list[Finding] | None:
        """The cached findings (re-attached to ``display_path``), or None on any miss or bad entry."""
        entry = self._shard(key).get(key.digest)
        findings = decode_entry(entry, display_path)
        if findings is not None and entry["used"] != self._today:
            # Refreshed at most once a day, so a warm run rewrites nothing.
            self._touch(key, {**entry, "used": self._today})
        return findings

    def store(self, key: CacheKey, findings: list[Finding]) -> None:
        entry = encode_entry(findings, self._today)
        if entry is not None and self.writable:
            self._shard(key)[key.digest] = entry
            self._touch(key, entry)

    def flush(self) -> None:
        """Write every shard this run changed, merged with what other runs wrote meanwhile."""
        for name, touched in sorted(self._touched.items()):
            if not self.writable:
                break
            path = self.entries / name
            merged = {
                digest: entry for digest, entry in _read_shard(path).items()
                if self._today - entry.get("used", 0) <= RETENTION_DAYS
            }
            merged.update(touched)
            try:
                self._prepare()
                self.entries.mkdir(parents=True, exist_ok=True)
                _write_atomically(path, json.dumps({"entries": merged}, separators=(",", ":")))
            except OSError:
                # Read-only checkout, full disk, permissions: run uncached rather than fail.
                self.writable = False
        self._touched.clear()

    def _shard(self, key: CacheKey) -> dict[str, dict]:
        name = self.shard_path(key).name
        shard = self._shards.get(name)
        if shard is None:
            shard = self._shards[name] = _read_shard(self.entries / name)
        return shard

    def _touch(self, key: CacheKey, entry: dict) -> None:
        self._touched.setdefault(self.shard_path(key).name, {})[key.digest] = entry

    def _prepare(self) -> None:
        """Create the directory with its own .gitignore and CACHEDIR.TAG, like Ruff's cache."""
        if self._prepared:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        gitignore = self.directory / ".gitignore"
        if not gitignore.exists():
            _write_atomically(gitignore, "# Automatically created by graphlint.\n*\n")
        tag = self.directory / "CACHEDIR.TAG"
        if not tag.exists():
            _write_atomically(
                tag,
                "Signature: 8a477f597d28d172789f06886806bc55\n"
                "# This file is a cache directory tag created by graphlint.\n",
            )
        self._prepared = True


def _read_shard(path: Path) -> dict[str, dict]:
    """A shard's entries by key; anything unreadable or of the wrong shape counts as empty.

    Entries are only checked for shape here; their findings are validated when looked up.
    """
    try:
        shard = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    entries = shard.get("entries") if isinstance(shard, dict) else None
    if not isinstance(entries, dict):
        return {}
    return {
        digest: entry for digest, entry in entries.items()
        if isinstance(entry, dict) and type(entry.get("used")) is int
    }


def encode_entry(findings: list[Finding], today: int) -> dict | None:
    """The entry for these findings; None when a finding holds data JSON cannot round-trip (not cached)."""
    records = []
    for finding in findings:
        if finding.fix is not None or finding.confirmation is not None:
            return None
        record = {name: getattr(finding, name) for name in _FINDING_FIELDS}
        records.append(record)
    try:
        json.dumps(records)
    except (TypeError, ValueError):
        return None
    return {"used": today, "findings": records}


def decode_entry(entry: object, display_path: str) -> list[Finding] | None:
    """The findings of a stored entry, or None unless every record has exactly the expected fields and types."""
    if not isinstance(entry, dict) or type(entry.get("used")) is not int:
        return None
    records = entry.get("findings")
    if not isinstance(records, list):
        return None
    findings = []
    for record in records:
        if not isinstance(record, dict) or set(record) != set(_FINDING_FIELDS):
            return None
        for name, kind in _FINDING_FIELDS.items():
            value = record[name]
            # bool is an int subclass; a line number of `true` is corruption.
            if not isinstance(value, kind) or isinstance(value, bool):
                return None
        findings.append(Finding(path=display_path, **record))
    return findings


def _write_atomically(path: Path, text: str) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        _remove_quietly(temporary)
        raise


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
