"""Check many files: prefilter, cache, and a process pool around the single-file checker.

For each file, in this order and stopping at the first that decides it:
1. read its bytes (a read error is a GL000 finding for that file);
2. the prefilter: bytes that cannot lead to a finding of the selected rules
   are never parsed (graphlint/prefilter.py);
3. the cache: a stored result for exactly these bytes, settings and analysis
   code (graphlint/cache.py);
4. the analysis (graphlint/checker.py), in a process pool when the batch is
   large enough to pay for the workers' start-up.

One bad file never hides another file's findings: a read error, an exception
in the analysis or a worker process that dies becomes a GL000 finding for that
file and the run goes on. Output order is stable: by path, then position.

libcst (and the rules, which import it) is imported only when some file
actually has to be analysed: a fully cached or fully prefiltered run never
pays for it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from graphlint.finding import Finding
from graphlint.prefilter import may_have_findings, may_have_findings_in_code

# Below this much source to analyse, starting worker processes costs more than
# it saves: forking and feeding a pool costs some tens of milliseconds, while
# the analysis runs at very roughly 0.05-0.5 MB/s (32 KB: 0.06-0.6 s of work).
POOL_MIN_BYTES = 32_000
POOL_MIN_FILES = 2


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
    skipped_by_prefilter: int = 0  # stage 1: bytes
    skipped_by_compiled_prefilter: int = 0  # stage 2: identifiers of the compiled code
    from_cache: int = 0
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
    jobs: list[_Job] = []
    for index, path in enumerate(paths):
        path = Path(path)
        display = str(path)
        try:
            data = path.read_bytes()
        except OSError as error:
            per_file[index] = [_unanalysable(display, f"cannot read file: {error.strerror or error}")]
            continue
        if settings.prefilter and not may_have_findings(data, settings.codes):
            stats.skipped_by_prefilter += 1
            continue
        job = _Job(index, display, data)
        if caches is not None:
            job.cache, job.key = caches.lookup(path, data)
            cached = job.cache.load(job.key, display) if job.cache is not None else None
            if cached is not None:
                per_file[index] = cached
                stats.from_cache += 1
                continue
        jobs.append(job)

    seconds: dict[str, float] = {}
    for job, (findings, elapsed) in _analyse_all(jobs, settings, stats):
        if findings is None:
            stats.skipped_by_compiled_prefilter += 1
            findings = []
        else:
            stats.analysed += 1
            stats.analysed_bytes += len(job.data)
            seconds[job.display] = elapsed
        per_file[job.index] = findings
        if job.cache is not None:
            job.cache.store(job.key, findings)

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


def _analyse_all(jobs: list[_Job], settings: Settings, stats: RunStats):
    workers = min(settings.worker_count(), len(jobs))
    total = sum(len(job.data) for job in jobs)
    if workers < 2 or len(jobs) < POOL_MIN_FILES or total < POOL_MIN_BYTES:
        stats.workers = 1 if jobs else 0
        for job in jobs:
            yield job, _timed_analysis(job.data, job.display, settings.codes, settings.prefilter)
        return
    stats.workers = workers
    yield from _analyse_in_pool(jobs, settings.codes, settings.prefilter, workers)


def _analyse_in_pool(jobs: list[_Job], codes, prefilter: bool, workers: int):
    """Analyse in worker processes, largest files first so no big file starts last."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    # Import the analysis before forking: workers inherit it instead of each importing it.
    import graphlint.checker  # noqa: F401

    largest_first = sorted(jobs, key=lambda job: len(job.data), reverse=True)
    orphaned: list[_Job] = []
    executor = ProcessPoolExecutor(workers, mp_context=_pool_context(), initializer=_ignore_interrupts)
    try:
        futures = {
            executor.submit(_timed_analysis, job.data, job.display, codes, prefilter): job for job in largest_first
        }
        for future in as_completed(futures):
            job = futures[future]
            try:
                findings = future.result()
            except BrokenProcessPool:
                # A worker died (crash, out of memory, os._exit): every unfinished
                # job fails with it, so each is retried alone to find the culprit.
                orphaned.append(job)
                continue
            except Exception as error:  # noqa: BLE001 - e.g. a result that does not pickle
                findings = ([_internal_error(job.display, error)], 0.0)
            yield job, findings
    except BaseException:
        # Ctrl-C or a failure in the caller: drop the queued files instead of
        # analysing them all before giving up.
        executor.shutdown(wait=False, cancel_futures=True)
        raise
    executor.shutdown(wait=True)
    for job in sorted(orphaned, key=lambda job: job.index):
        yield job, _analyse_isolated(job, codes, prefilter)


def _analyse_isolated(job: _Job, codes, prefilter: bool) -> tuple[list[Finding] | None, float]:
    """One file in a process of its own: if it kills that process, it was the culprit."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    with ProcessPoolExecutor(1, mp_context=_pool_context()) as executor:
        try:
            return executor.submit(_timed_analysis, job.data, job.display, codes, prefilter).result()
        except BrokenProcessPool:
            return [_unanalysable(job.display, "the analysis of this file crashed its worker process")], 0.0
        except Exception as error:  # noqa: BLE001
            return [_internal_error(job.display, error)], 0.0


def _ignore_interrupts() -> None:
    """Workers leave Ctrl-C to the main process, which cancels the run (no traceback per worker)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _pool_context():
    """fork where the platform has it: workers start in milliseconds with everything imported."""
    import multiprocessing

    if "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def _timed_analysis(data: bytes, display: str, codes, prefilter: bool) -> tuple[list[Finding] | None, float]:
    import time

    start = time.perf_counter()
    findings = analyse_bytes(data, display, codes, prefilter)
    return findings, time.perf_counter() - start


def analyse_bytes(data: bytes, display: str, codes: frozenset[str] | None, prefilter: bool = True) -> list[Finding] | None:
    """The single-file checker, with any exception it lets escape turned into GL000.

    None when the second stage of the prefilter (which runs here, in the
    worker, because it compiles the file) shows the file cannot have findings.
    """
    if prefilter and not may_have_findings_in_code(data, codes):
        return None
    try:
        from graphlint.checker import check_source

        return check_source(data, display, codes)
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
    # analysis never imports libcst.
    return Finding("GL000", message, path, 1, 1, 1, 1)
