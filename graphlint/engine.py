"""Check many files: prefilter, cache, and a process pool around the single-file checker.

For each file, in this order and stopping at the first that decides it:
1. read its bytes (a read error is a GL000 finding for that file);
2. the prefilter's first stage: bytes that cannot lead to a finding of the
   selected rules are not analysed, only syntax-checked (graphlint/prefilter.py);
3. the cache: a stored result for exactly these bytes, settings and analysis
   code (graphlint/cache.py), for analysed and syntax-checked files alike;
4. in a process pool when the batch is large enough to pay for the workers'
   start-up: the analysis (graphlint/checker.py: the parse, the prefilter's
   second stage, then the model), or for a file the first stage dropped, a
   parse (under a millisecond; such files go to the workers in batches). A
   file that does not parse goes through the single-file checker like any
   other, so every file that does not parse is reported as GL000.

One bad file never hides another file's findings: a read error, an exception
in the analysis or a worker process that dies becomes a GL000 finding for that
file and the run goes on. Output order is stable: by path, then position.

The model and the rules are imported only when some file actually has to be
analysed: a fully cached run, or one whose files all parse and were dropped
by the prefilter, never pays for them.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from graphlint.finding import Finding
from graphlint.prefilter import may_have_findings, parses

# Below this much source to analyse, starting worker processes costs more than
# it saves: forking and feeding a pool costs some tens of milliseconds, while
# the analysis runs at very roughly 0.05-0.5 MB/s (32 KB: 0.06-0.6 s of work).
POOL_MIN_BYTES = 32_000
POOL_MIN_FILES = 2
# A syntax check (compile(), ~10 MB/s) costs about this fraction of an
# analysis per byte: its bytes count this much less towards POOL_MIN_BYTES.
SYNTAX_CHECK_COST_RATIO = 50
# Syntax checks go to the workers in batches of up to this many files or bytes,
# so that the pool's per-task cost (pickling, queues: ~0.1-0.3 ms) stays small
# next to a compile of ~1 ms, while batches stay small enough to share out.
SYNTAX_BATCH_FILES = 64
SYNTAX_BATCH_BYTES = 512_000


@dataclass(frozen=True)
class Settings:
    """How to run a check.

    ``codes`` is the only field that changes a file's findings; the others
    only change how fast they are found. The cache key also names the
    prefilter, so a run that compares findings with it on and off never reads
    one answer for the other.
    """

    codes: frozenset[str]
    # Worker processes; None or 0 means one per available CPU.
    jobs: int | None = None
    # Read and write .graphlint_cache/ (``--no-cache`` turns it off; so does
    # GRAPHLINT_NO_CACHE=1 in the environment, like Ruff's RUFF_NO_CACHE).
    cache: bool = field(default_factory=lambda: not _env_flag("GRAPHLINT_NO_CACHE"))
    # Skip files whose bytes cannot lead to a finding (tests and benchmarks turn it off).
    prefilter: bool = True
    # Put the cache here instead of in each file's project root.
    cache_root: Path | None = None

    def cache_key(self) -> str:
        return "codes=" + ",".join(sorted(self.codes)) + f";prefilter={self.prefilter}"

    def worker_count(self) -> int:
        if self.jobs:
            return max(1, self.jobs)
        return available_cpus()


@dataclass
class RunStats:
    """What a run did with each file (the benchmark harness prints these)."""

    files: int = 0
    # Stage 1 (bytes) found no spelling: not analysed, only syntax-checked,
    # which the next three fields break down (none when GL000 is not selected).
    skipped_by_prefilter: int = 0
    syntax_checked: int = 0  # of those, parsed in this run
    syntax_from_cache: int = 0  # of those, answered by the cache
    syntax_errors: int = 0  # of the parsed ones, did not parse: went through the single-file checker
    skipped_by_code_prefilter: int = 0  # stage 2: identifiers the code spells
    from_cache: int = 0  # passed stage 1, answered by the cache
    analysed: int = 0  # passed both stages and were parsed
    analysed_bytes: int = 0
    workers: int = 0


@dataclass
class RunResult:
    findings: list[Finding]
    stats: RunStats = field(default_factory=RunStats)
    # Seconds the analysis took per parsed file (display path), for profiling.
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class _Job:
    index: int
    display: str
    data: bytes
    # Dropped by stage 1 of the prefilter: only its syntax is checked.
    syntax_only: bool = False
    cache: object | None = None  # graphlint.cache.Cache
    key: object | None = None  # graphlint.cache.CacheKey


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def available_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def check_files(paths: list[Path], settings: Settings) -> list[Finding]:
    """Findings of all files, in a stable order (by path, then position)."""
    return run(paths, settings).findings


def run(paths: list[Path], settings: Settings) -> RunResult:
    stats = RunStats(files=len(paths))
    per_file: list[list[Finding]] = [[] for _ in paths]
    caches = _Caches(settings) if settings.cache else None
    # A file stage 1 drops can have no finding but GL000: without it, nothing to check.
    check_syntax = "GL000" in settings.codes
    jobs: list[_Job] = []
    for index, path in enumerate(paths):
        path = Path(path)
        display = str(path)
        try:
            data = path.read_bytes()
        except OSError as error:
            per_file[index] = [_unanalysable(display, f"cannot read file: {error.strerror or error}")]
            continue
        syntax_only = settings.prefilter and not may_have_findings(data, settings.codes)
        if syntax_only:
            stats.skipped_by_prefilter += 1
            if not check_syntax:
                continue
        job = _Job(index, display, data, syntax_only)
        if caches is not None:
            job.cache, job.key = caches.lookup(path, data)
            cached = job.cache.load(job.key, display) if job.cache is not None else None
            if cached is not None:
                per_file[index] = cached
                if syntax_only:
                    stats.syntax_from_cache += 1
                else:
                    stats.from_cache += 1
                continue
        jobs.append(job)

    seconds: dict[str, float] = {}
    for job, (findings, elapsed) in _analyse_all(jobs, settings, stats):
        if job.syntax_only:
            stats.syntax_checked += 1
            if findings is None:  # it parses
                findings = []
            else:
                stats.syntax_errors += 1
                seconds[job.display] = elapsed
        elif findings is None:
            stats.skipped_by_code_prefilter += 1
            findings = []
        else:
            stats.analysed += 1
            stats.analysed_bytes += len(job.data)
            seconds[job.display] = elapsed
        per_file[job.index] = findings
        if job.cache is not None:
            job.cache.store(job.key, findings)
    if caches is not None:
        caches.flush()

    findings = [finding for group in per_file for finding in group]
    result = RunResult(sorted(findings, key=Finding.sort_key), stats, seconds)
    timings_path = os.environ.get("GRAPHLINT_TIMINGS")
    if timings_path:
        _write_timings(timings_path, result)
    return result


def _write_timings(path: str, result: RunResult) -> None:
    """GRAPHLINT_TIMINGS=file: what the run did and how long each parsed file took (benchmarks/bench.py)."""
    import dataclasses
    import json

    try:
        with open(path, "w", encoding="utf-8") as stream:
            json.dump({"stats": dataclasses.asdict(result.stats), "seconds": result.seconds}, stream)
    except OSError:
        pass  # a profiling aid must never fail the run


class _Caches:
    """One Cache per project root, found the way Ruff finds its cache directory."""

    def __init__(self, settings: Settings) -> None:
        from graphlint import cache

        self._module = cache
        self._fingerprint = cache.analysis_fingerprint()
        self._settings_key = settings.cache_key()
        self._fixed_root = settings.cache_root
        self._cwd = Path.cwd()
        self._roots: dict[Path, Path] = {}
        self._by_root: dict[Path, object] = {}

    def lookup(self, path: Path, data: bytes):
        if self._fixed_root is not None:
            root = self._fixed_root
        else:
            root = self._module.project_root(path, self._cwd, self._roots)
        cache = self._by_root.get(root)
        if cache is None:
            cache = self._by_root[root] = self._module.Cache(root, self._fingerprint)
        key = self._module.CacheKey.of(data, path.suffix, self._settings_key, self._fingerprint)
        return cache, key

    def flush(self) -> None:
        for cache in self._by_root.values():
            cache.flush()


# What a worker returns for one file: findings (None: a compile-based check
# showed there is nothing to analyse) and the seconds it took.
_Outcome = tuple[list[Finding] | None, float]


def _analyse_all(jobs: list[_Job], settings: Settings, stats: RunStats):
    """(job, outcome) for every job, in the order they finish."""
    units = _units(jobs)
    workers = min(settings.worker_count(), len(units))
    cost = sum(len(job.data) / (SYNTAX_CHECK_COST_RATIO if job.syntax_only else 1) for job in jobs)
    if workers < 2 or len(units) < POOL_MIN_FILES or cost < POOL_MIN_BYTES:
        stats.workers = 1 if jobs else 0
        for job in jobs:
            yield job, _timed_job(job.data, job.display, job.syntax_only, settings.codes, settings.prefilter)
        return
    stats.workers = workers
    yield from _analyse_in_pool(units, settings.codes, settings.prefilter, workers)


def _units(jobs: list[_Job]) -> list[list[_Job]]:
    """What is sent to a worker at a time: each file to analyse alone, largest first
    (so no big file starts last), then the syntax checks in batches (cheap, they
    fill the workers' idle time at the end)."""
    analyses = sorted((job for job in jobs if not job.syntax_only), key=lambda job: len(job.data), reverse=True)
    units = [[job] for job in analyses]
    batch: list[_Job] = []
    size = 0
    for job in jobs:
        if not job.syntax_only:
            continue
        batch.append(job)
        size += len(job.data)
        if len(batch) >= SYNTAX_BATCH_FILES or size >= SYNTAX_BATCH_BYTES:
            units.append(batch)
            batch, size = [], 0
    if batch:
        units.append(batch)
    return units


def _analyse_in_pool(units: list[list[_Job]], codes, prefilter: bool, workers: int):
    """Run the units in worker processes; a worker that dies costs a GL000 for its culprit only."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    if any(not job.syntax_only for unit in units for job in unit):
        # Import the analysis before forking: workers inherit it instead of each
        # importing it. Syntax checks alone do not need it (only a file that
        # does not compile does, and the worker that meets one imports it).
        import graphlint.checker  # noqa: F401

    orphaned: list[list[_Job]] = []
    executor = ProcessPoolExecutor(
        workers, mp_context=_pool_context(), initializer=_init_worker, initargs=(os.getpid(),)
    )
    try:
        futures = {executor.submit(_run_unit, _payload(unit), codes, prefilter): unit for unit in units}
        for future in as_completed(futures):
            unit = futures[future]
            try:
                outcomes = future.result()
            except BrokenProcessPool:
                # A worker died (crash, out of memory, os._exit): every unfinished
                # unit fails with it, so each is retried alone to find the culprit.
                orphaned.append(unit)
                continue
            except Exception as error:  # noqa: BLE001 - e.g. a result that does not pickle
                outcomes = [([_internal_error(job.display, error)], 0.0) for job in unit]
            yield from zip(unit, outcomes)
    except BaseException:
        # Ctrl-C or a failure in the caller: drop the queued files instead of
        # analysing them all before giving up.
        executor.shutdown(wait=False, cancel_futures=True)
        raise
    executor.shutdown(wait=True)
    for unit in sorted(orphaned, key=lambda unit: unit[0].index):
        yield from _analyse_isolated(unit, codes, prefilter)


def _analyse_isolated(unit: list[_Job], codes, prefilter: bool):
    """A unit in a process of its own: if it kills that process, one of its files was the culprit.

    A batch that does so is retried file by file, to find which.
    """
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    with ProcessPoolExecutor(1, mp_context=_pool_context()) as executor:
        try:
            outcomes = executor.submit(_run_unit, _payload(unit), codes, prefilter).result()
        except BrokenProcessPool:
            outcomes = None
        except Exception as error:  # noqa: BLE001
            outcomes = [([_internal_error(job.display, error)], 0.0) for job in unit]
    if outcomes is not None:
        yield from zip(unit, outcomes)
    elif len(unit) > 1:
        for job in unit:
            yield from _analyse_isolated([job], codes, prefilter)
    else:
        yield unit[0], ([_unanalysable(unit[0].display, "the analysis of this file crashed its worker process")], 0.0)


def _payload(unit: list[_Job]) -> list[tuple[bytes, str, bool]]:
    # Only what the worker needs: the cache objects stay in the main process.
    return [(job.data, job.display, job.syntax_only) for job in unit]


def _run_unit(payload: list[tuple[bytes, str, bool]], codes, prefilter: bool) -> list[_Outcome]:
    return [_timed_job(data, display, syntax_only, codes, prefilter) for data, display, syntax_only in payload]


def _init_worker(parent: int) -> None:
    """Workers leave Ctrl-C to the main process, which cancels the run (no traceback
    per worker), and never outlive it."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent)


def _die_with_parent(parent: int) -> None:
    """SIGTERM or SIGKILL on the main process skips the pool's shutdown, and its
    workers would wait for work forever: on Linux, ask the kernel to send each
    worker SIGTERM when its parent dies (prctl PR_SET_PDEATHSIG)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


_PR_SET_PDEATHSIG = 1


def _pool_context():
    """fork where the platform has it: workers start in milliseconds with everything imported."""
    import multiprocessing

    if "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def _timed_job(data: bytes, display: str, syntax_only: bool, codes, prefilter: bool) -> _Outcome:
    if syntax_only:
        return _timed_syntax_check(data, display, codes)
    return _timed_analysis(data, display, codes, prefilter)


def _timed_analysis(data: bytes, display: str, codes, prefilter: bool) -> _Outcome:
    import time

    start = time.perf_counter()
    findings = analyse_bytes(data, display, codes, prefilter)
    return findings, time.perf_counter() - start


def _timed_syntax_check(data: bytes, display: str, codes) -> _Outcome:
    import time

    start = time.perf_counter()
    findings = check_syntax(data, display, codes)
    return findings, time.perf_counter() - start


def check_syntax(data: bytes, display: str, codes: frozenset[str] | None) -> list[Finding] | None:
    """A file the prefilter's first stage dropped: None when it parses (nothing to report).

    A file that does not parse goes through the single-file checker, like any
    file that is analysed: its GL000 has the same message and position.
    """
    if parses(data):
        return None
    return analyse_bytes(data, display, codes, prefilter=False)


def analyse_bytes(data: bytes, display: str, codes: frozenset[str] | None, prefilter: bool = True) -> list[Finding] | None:
    """The single-file checker, with any exception it lets escape turned into GL000.

    None when the second stage of the prefilter (which runs in the checker, on
    the identifiers of the tree it parses) shows the file cannot have findings.
    """
    try:
        from graphlint.checker import check_source

        return check_source(data, display, codes, prefilter=prefilter)
    except RecursionError:
        return [_unanalysable(display, "code is nested too deeply to analyse")]
    except MemoryError:
        return [_unanalysable(display, "file is too large to analyse")]
    except Exception as error:  # noqa: BLE001 - one file's bug must not stop the run
        return [_internal_error(display, error)]


def _internal_error(display: str, error: BaseException) -> Finding:
    return _unanalysable(display, f"internal error while analysing this file: {type(error).__name__}: {error}")


def _unanalysable(path: str, message: str) -> Finding:
    # Built here rather than with checker.unanalysable so that a run needing no
    # analysis never imports the model.
    return Finding("GL000", message, path, 1, 1, 1, 1)
