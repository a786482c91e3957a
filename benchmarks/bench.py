"""Time graphlint against Ruff and a bare libcst parse on the pinned corpus.

    python benchmarks/bench.py              # fetch the corpus if needed, 3 runs each
    python benchmarks/bench.py --runs 5 --check-prefilter 0

Every timed command runs as a subprocess on exactly the same file list
(benchmarks/corpus/files.txt), several times; the table shows medians of wall
time and the peak memory of the whole process tree (sampled from /proc) and of
its largest process (wait4). Then: the ratios the performance issue sets
targets for, the start-up cost of checking one training file next to
``python -c "import libcst"``, the slowest files and the findings per rule.

graphlint runs from a snapshot of the committed code (``git archive HEAD``),
so edits made in the checkout while the benchmark runs (a long affair) can
neither change what is measured nor invalidate the warm run's cache.

``--check-prefilter N`` also analyses N randomly chosen files the prefilter
skips (0: all of them, slow) and prints any finding it would have hidden
(there must be none).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import fetch_corpus  # noqa: E402

CORPUS = fetch_corpus.CORPUS
# A typical training script for the start-up measurement (what pre-commit passes on a commit).
TYPICAL_TRAINING_FILE = "accelerate-1.15.0/accelerate/test_utils/scripts/test_script.py"


@dataclass
class Timing:
    name: str
    walls: list[float]
    cpus: list[float]
    tree_peak_mb: float
    process_peak_mb: float
    output: str

    @property
    def median(self) -> float:
        return statistics.median(self.walls)

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpus)


# ----- measuring one command -----
def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stream:
                fields = stream.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def _tree_rss_kb(root: int) -> int:
    children = _children_map()
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, ()))
        try:
            with open(f"/proc/{pid}/status", "rb") as stream:
                for line in stream:
                    if line.startswith(b"VmRSS:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            continue
    return total


def measure(command: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float, float, float, str]:
    """Wall seconds, CPU seconds (user + system, whole tree), peak RSS of the process tree
    (MB, sampled), of its largest process (MB), stdout."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        peak = [0]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], _tree_rss_kb(process.pid))
                done.wait(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        if Path("/proc").is_dir():
            sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        done.set()
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    if process.returncode not in (0, 1):
        raise SystemExit(f"command failed ({process.returncode}): {' '.join(command[:6])} ...\n{text[-2000:]}")
    # ru_maxrss is in KB on Linux: the largest single process, children included.
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, peak[0] / 1024, usage.ru_maxrss / 1024, text


def timed(name: str, command: list[str], runs: int, *, cwd: Path, env=None, before_each=None) -> Timing:
    walls, cpus, tree_peaks, process_peaks, output = [], [], [], [], ""
    for _ in range(runs):
        if before_each:
            before_each()
        wall, cpu, tree_peak, process_peak, output = measure(command, cwd=cwd, env=env)
        walls.append(wall)
        cpus.append(cpu)
        tree_peaks.append(tree_peak)
        process_peaks.append(process_peak)
        print(f"  {name}: {wall:.2f} s wall, {cpu:.2f} s CPU", flush=True)
    return Timing(name, walls, cpus, max(tree_peaks), max(process_peaks), output)


def snapshot_of_head() -> Path:
    """graphlint as committed, importable from the returned directory (rules/ becomes graphlint/rules)."""
    directory = Path(tempfile.mkdtemp(prefix="graphlint-bench-"))
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD", "graphlint", "rules"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive.stdout, check=True)
    (directory / "rules").rename(directory / "graphlint" / "rules")
    # Bytecode, as `pip install` writes it: without it every run would compile
    # graphlint's modules again (this machine sets PYTHONDONTWRITEBYTECODE=1),
    # which `import libcst`, installed with its bytecode, never pays.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(directory)], check=True)
    return directory


# ----- the --check-prefilter pass (in-process workers) -----
def _time_one(job: tuple[str, bool]) -> tuple[str, int, float, list[str], bool]:
    """Analyse one file (always when ``force``, else only if the prefilter keeps it)."""
    from graphlint.checker import check_source
    from graphlint.prefilter import may_have_findings, may_have_findings_in_code

    relative, force = job
    data = (CORPUS / relative).read_bytes()
    kept = may_have_findings(data) and may_have_findings_in_code(data)
    if not (kept or force):
        return relative, len(data), 0.0, [], kept
    start = time.perf_counter()
    findings = check_source(data, relative, None)
    return relative, len(data), time.perf_counter() - start, [f.code for f in findings], kept


def per_file_pass(jobs_list: list[tuple[str, bool]], jobs: int) -> list[tuple[str, int, float, list[str], bool]]:
    # Largest first so the pass ends evenly on all workers.
    sizes = {name: (CORPUS / name).stat().st_size for name, _ in jobs_list}
    ordered = sorted(jobs_list, key=lambda job: -sizes[job[0]])
    with ProcessPoolExecutor(jobs) as executor:
        return list(executor.map(_time_one, ordered, chunksize=1))


# ----- report -----
def graphlint_command(files_arg: list[str]) -> list[str]:
    return [sys.executable, "-m", "graphlint", "check", "--exit-zero", *files_arg]


def bare_parse_command(file_list: Path) -> list[str]:
    script = (
        "import sys, libcst\n"
        "sys.setrecursionlimit(10000)\n"
        "for name in open(sys.argv[1]).read().split():\n"
        "    try:\n"
        "        libcst.parse_module(open(name, 'rb').read())\n"
        "    except Exception:\n"
        "        pass\n"
    )
    return [sys.executable, "-c", script, str(file_list)]


def finding_codes(text_output: str) -> Counter:
    counts: Counter = Counter()
    for line in text_output.splitlines():
        parts = line.split(": ", 1)
        if len(parts) == 2 and parts[0].count(":") >= 2 and parts[1][:2] == "GL":
            counts[parts[1].split(" ", 1)[0]] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs per command (median reported)")
    parser.add_argument("--startup-runs", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="workers of the --check-prefilter pass")
    parser.add_argument(
        "--check-prefilter", type=int, default=None, metavar="N",
        help="also analyse N random files the prefilter skips (0: all, slow)",
    )
    parser.add_argument("--json", type=Path, help="write the measured numbers here")
    parser.add_argument("--sample", type=int, default=1, help="use every N-th file only (quick trial runs)")
    args = parser.parse_args()

    fetch_corpus.main()
    snapshot = snapshot_of_head()
    sys.path.insert(0, str(snapshot))
    # Every graphlint subprocess imports the snapshot, never the live checkout.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(snapshot), os.environ.get("PYTHONPATH")]))
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    files = fetch_corpus.FILE_LIST.read_text().split()[:: args.sample]
    file_list = fetch_corpus.FILE_LIST
    if args.sample > 1:
        file_list = Path(tempfile.mkstemp(suffix=".txt")[1])
        file_list.write_text("\n".join(files) + "\n")
    size_mb = sum((CORPUS / name).stat().st_size for name in files) / 1e6
    ruff = shutil.which("ruff")
    no_cache_env = {**os.environ, "GRAPHLINT_NO_CACHE": "1"}
    cache_env = {k: v for k, v in os.environ.items() if k != "GRAPHLINT_NO_CACHE"}
    # Files under benchmarks/corpus/ belong to this repository's project root.
    cache_dir = REPO / ".graphlint_cache"
    load_before = os.getloadavg()[0]
    print(
        f"graphlint at {head}; corpus: {len(files)} files, {size_mb:.1f} MB; {os.cpu_count()} CPUs; "
        f"{args.runs} runs each; load {load_before:.1f}\n",
        flush=True,
    )

    timings_file = Path(tempfile.mkstemp(suffix=".json")[1])
    cold_env = {**cache_env, "GRAPHLINT_TIMINGS": str(timings_file)}

    def empty_cache() -> None:
        shutil.rmtree(cache_dir, ignore_errors=True)

    timings: list[Timing] = []
    # Cold: what a first run costs (empty cache, which it fills); it also records
    # every parsed file's analysis time (GRAPHLINT_TIMINGS) for the slowest files.
    timings.append(
        timed("graphlint cold (empty cache)", graphlint_command(files), args.runs, cwd=CORPUS, env=cold_env, before_each=empty_cache)
    )
    run_record = json.loads(timings_file.read_text())
    timings.append(timed("graphlint warm (cache)", graphlint_command(files), args.runs, cwd=CORPUS, env=cache_env))
    if ruff:
        ruff_command = [ruff, "check", "--select", "ALL", "--no-cache", "--exit-zero", *files]
        timings.append(timed("ruff check --select ALL --no-cache", ruff_command, args.runs, cwd=CORPUS))
    timings.append(timed("bare libcst.parse_module (1 process)", bare_parse_command(file_list), args.runs, cwd=CORPUS))

    print("\nstart-up: one training file vs python -c 'import libcst'", flush=True)
    one_file, import_libcst = [], []
    for _ in range(args.startup_runs):
        # Interleaved, so both see the same machine load.
        one_file.append(measure(graphlint_command([TYPICAL_TRAINING_FILE]), cwd=CORPUS, env=no_cache_env)[0])
        import_libcst.append(measure([sys.executable, "-c", "import libcst"], cwd=CORPUS)[0])

    from graphlint.prefilter import may_have_findings

    kept = [name for name in files if may_have_findings((CORPUS / name).read_bytes())]
    per_file = []
    if args.check_prefilter is not None:
        import random

        print("\nprefilter check: analysing skipped files ...", flush=True)
        skipped = sorted(set(files) - set(kept))
        random.Random(0).shuffle(skipped)
        chosen = skipped if args.check_prefilter == 0 else skipped[: args.check_prefilter]
        # Files kept by stage 1 are analysed too, to catch what stage 2 drops.
        per_file = per_file_pass([(name, True) for name in kept] + [(name, True) for name in chosen], args.jobs)
    analysed = [(name, (CORPUS / name).stat().st_size, seconds) for name, seconds in run_record["seconds"].items()]

    by_name = {t.name: t for t in timings}
    cold = by_name["graphlint cold (empty cache)"]
    warm = by_name["graphlint warm (cache)"]
    bare = by_name["bare libcst.parse_module (1 process)"]
    rows = [
        f"| {t.name} | {t.median:.2f} | {min(t.walls):.2f} | {t.cpu:.2f} | {t.tree_peak_mb:.0f} | {t.process_peak_mb:.0f} |"
        for t in timings
    ]
    load = max(load_before, os.getloadavg()[0])
    print(f"\n## Corpus: {len(files)} files, {size_mb:.1f} MB, {os.cpu_count()} CPUs, median of {args.runs} runs")
    # Wall times are only comparable on an idle machine; CPU times hold up under load.
    print(f"machine load average (1 min) before/after: {load_before:.1f}/{os.getloadavg()[0]:.1f}\n")
    print("| command | median wall (s) | best wall (s) | median CPU (s) | peak RSS, process tree (MB) | peak RSS, largest process (MB) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))
    print()
    kept_mb = sum((CORPUS / name).stat().st_size for name in kept) / 1e6
    analysed_mb = run_record["stats"]["analysed_bytes"] / 1e6
    print(
        f"prefilter: stage 1 keeps {len(kept)} of {len(files)} files ({kept_mb:.1f} of {size_mb:.1f} MB); "
        f"after stage 2, {len(analysed)} files ({analysed_mb:.1f} MB) are parsed"
    )
    numbers = {
        "commit": head,
        "files": len(files),
        "megabytes": round(size_mb, 2),
        "prefilter_kept_files": len(kept),
        "prefilter_kept_megabytes": round(kept_mb, 2),
        "parsed_files": len(analysed),
        "parsed_megabytes": round(analysed_mb, 2),
        "load_average": load,
        "timings": {t.name: {"median": t.median, "walls": t.walls, "cpus": t.cpus, "tree_peak_mb": t.tree_peak_mb, "process_peak_mb": t.process_peak_mb} for t in timings},
    }
    if ruff:
        ruff_time = by_name["ruff check --select ALL --no-cache"].median
        ruff_cpu = by_name["ruff check --select ALL --no-cache"].cpu
        print(f"graphlint cold / ruff:        {cold.median / ruff_time:.2f} wall, {cold.cpu / ruff_cpu:.2f} CPU  (target <= 1.0)")
        numbers["cold_over_ruff"] = cold.median / ruff_time
    print(f"graphlint cold / bare parse:  {cold.median / bare.median:.2f}")
    print(f"graphlint warm / cold:        {warm.median / cold.median:.3f} wall, {warm.cpu / cold.cpu:.3f} CPU  (target <= 0.10)")
    startup_ratio = statistics.median(one_file) / statistics.median(import_libcst)
    print(
        f"one file ({TYPICAL_TRAINING_FILE}): {statistics.median(one_file):.3f} s; "
        f"import libcst: {statistics.median(import_libcst):.3f} s; ratio {startup_ratio:.2f}  (target <= 1.5)"
    )
    peak = max(t.tree_peak_mb for t in timings if t.name.startswith("graphlint"))
    print(f"graphlint peak memory (process tree): {peak:.0f} MB  (target < 500)")
    numbers.update(
        cold_over_bare_parse=cold.median / bare.median,
        warm_over_cold=warm.median / cold.median,
        one_file_seconds=statistics.median(one_file),
        import_libcst_seconds=statistics.median(import_libcst),
        startup_ratio=startup_ratio,
    )

    slowest = sorted(analysed, key=lambda row: -row[2])[:10]
    print("\nslowest files (seconds each took in the cold run, in a worker; target: none over 2 s):")
    for name, size, seconds in slowest:
        print(f"  {seconds:6.2f}  {size / 1000:7.1f} KB  {name}")
    over = [row for row in analysed if row[2] > 2.0]
    print(f"files over 2 s: {len(over)} of {len(analysed)} parsed")
    numbers["slowest"] = slowest
    numbers["run_stats"] = run_record["stats"]
    numbers["files_over_2s"] = len(over)

    counts = finding_codes(cold.output)
    print("\nfindings per rule (graphlint cold run):")
    for code, count in sorted(counts.items()):
        print(f"  {code}: {count}")
    numbers["findings_per_rule"] = dict(counts)

    if args.check_prefilter is not None:
        hidden = [(name, codes) for name, _, _, codes, passed in per_file if codes and not passed]
        checked = sum(1 for row in per_file if not row[4])
        print(f"\nprefilter check: of {checked} skipped files analysed anyway, {len(hidden)} have findings")
        for name, codes in hidden[:40]:
            print(f"  {name}: {Counter(codes)}")
        numbers["prefilter_hidden"] = hidden
    if args.json:
        args.json.write_text(json.dumps(numbers, indent=2))


if __name__ == "__main__":
    main()
