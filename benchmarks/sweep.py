"""Real-code sweep: run graphlint over thousands of third-party Python files and count what breaks.

    python benchmarks/sweep.py                       # benchmarks/corpus/ (incl. _sweep/)
    python benchmarks/sweep.py DIR... --no-prefilter # analyse every file, not only candidates
    python benchmarks/sweep.py --confirm-sample 100  # also --confirm a sample of flagged files

Three passes, each answering one question:

1. **Per file, isolated** (the robustness pass): every file is analysed by
   ``graphlint.engine.analyse_bytes`` in a worker process of this script that a
   watchdog kills when one file takes longer than ``--hang-seconds``. Reports
   crashes (GL000 "internal error", a worker that died), hangs, anything the
   analysis printed, and the slowest files.
2. **The real command line**: ``graphlint check --output-format json`` over the
   same files, as a user runs it: exit status 0 or 1, no traceback on stderr,
   JSON that parses, and the same findings as pass 1 (with the prefilter on).
3. **--confirm** (optional) on a deterministic sample of flagged files:
   verdict counts, no traceback, no child process left behind.

The corpus is third-party code and is git-ignored: ``benchmarks/fetch_corpus.py``
fills ``benchmarks/corpus/``; extra wheels can be unpacked under
``benchmarks/corpus/_sweep/`` (``pip download --no-deps``). Files with identical
bytes are swept once.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import random
import re
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_ROOTS = [REPO / "benchmarks" / "corpus"]
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|internal error")


# ----- files -----


def collect(roots: list[Path], limit: int | None) -> list[Path]:
    """Every distinct ``.py`` file under ``roots`` (first path wins for equal bytes), sorted."""
    seen: set[bytes] = set()
    files = []
    for root in roots:
        candidates = [root] if root.is_file() else sorted(root.rglob("*.py"))
        for path in candidates:
            try:
                digest = hashlib.sha256(path.read_bytes()).digest()
            except OSError:
                continue
            if digest not in seen:
                seen.add(digest)
                files.append(path)
    files.sort()
    return files[:limit] if limit else files


# ----- pass 1: isolated workers with a watchdog -----


def worker_main(prefilter: bool) -> None:
    """Read one path per line on stdin; answer one JSON line per path on stdout."""
    import contextlib
    import io

    from graphlint.engine import analyse_bytes
    from graphlint.rules import ALL_CODES

    import graphlint.checker  # noqa: F401 - import time is not any one file's analysis time

    codes = frozenset(ALL_CODES)
    out = sys.stdout
    for line in sys.stdin:
        path = line.rstrip("\n")
        data = Path(path).read_bytes()
        noise = io.StringIO()
        started = time.perf_counter()
        with contextlib.redirect_stdout(noise), contextlib.redirect_stderr(noise):
            findings = analyse_bytes(data, path, codes, prefilter)
        seconds = time.perf_counter() - started
        record = {
            "path": path,
            "seconds": seconds,
            "analysed": findings is not None,
            "findings": [[f.code, f.line, f.col, f.message] for f in findings or []],
            "noise": noise.getvalue()[:2000],
        }
        out.write(json.dumps(record) + "\n")
        out.flush()


class _Worker:
    def __init__(self, prefilter: bool) -> None:
        command = [sys.executable, str(Path(__file__).resolve()), "--worker"]
        if not prefilter:
            command.append("--no-prefilter")
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={**os.environ, "GRAPHLINT_NO_CACHE": "1"},
        )
        self.path: str | None = None
        self.started = 0.0

    def give(self, path: str) -> None:
        self.path, self.started = path, time.monotonic()
        self.process.stdin.write(path + "\n")
        self.process.stdin.flush()

    def kill(self) -> str:
        self.process.kill()
        _, stderr = self.process.communicate()
        return stderr or ""


@dataclass
class SweepResult:
    records: list[dict] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    dead_workers: list[tuple[str, str]] = field(default_factory=list)  # path, worker stderr
    seconds: float = 0.0


def sweep_isolated(files: list[Path], workers: int, hang_seconds: float, prefilter: bool, progress: bool) -> SweepResult:
    result = SweepResult()
    queue = collections.deque(str(path) for path in files)
    pool = [_Worker(prefilter) for _ in range(min(workers, len(queue)) or 1)]
    started = time.monotonic()
    for worker in pool:
        if queue:
            worker.give(queue.popleft())
    busy = [worker for worker in pool if worker.path is not None]
    while busy:
        readable, _, _ = select.select([w.process.stdout for w in busy], [], [], 1.0)
        now = time.monotonic()
        for worker in list(busy):
            if worker.process.stdout in readable:
                line = worker.process.stdout.readline()
                if line:
                    result.records.append(json.loads(line))
                else:  # the worker died on this file
                    result.dead_workers.append((worker.path, worker.kill()[-2000:]))
                    busy.remove(worker)
                    worker = _replace(busy, pool, prefilter)
            elif now - worker.started > hang_seconds:
                result.hangs.append(worker.path)
                worker.kill()
                busy.remove(worker)
                worker = _replace(busy, pool, prefilter)
            else:
                continue
            if queue:
                worker.give(queue.popleft())
            elif worker in busy:
                busy.remove(worker)
        if progress:
            done = len(result.records) + len(result.hangs) + len(result.dead_workers)
            print(f"\r  {done}/{len(files)} files, {time.monotonic() - started:.0f} s", end="", file=sys.stderr)
    for worker in pool:
        if worker.process.poll() is None:
            worker.process.stdin.close()
            worker.process.wait()
    if progress:
        print(file=sys.stderr)
    result.seconds = time.monotonic() - started
    return result


def _replace(busy: list, pool: list, prefilter: bool) -> _Worker:
    fresh = _Worker(prefilter)
    busy.append(fresh)
    pool.append(fresh)
    return fresh


# ----- pass 2: the command line -----


def run_cli(files: list[Path], jobs: int, extra: list[str] = (), timeout: float = 3600) -> dict:
    command = [sys.executable, "-m", "graphlint", "check", "--isolated", "--no-cache", "--output-format", "json",
               "--jobs", str(jobs), *extra, *map(str, files)]
    started = time.monotonic()
    completed = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=timeout,
                               stdin=subprocess.DEVNULL)
    seconds = time.monotonic() - started
    problems = []
    if completed.returncode not in (0, 1):
        problems.append(f"exit status {completed.returncode}")
    if _TRACEBACK.search(completed.stderr):
        problems.append("traceback or internal error on stderr: " + completed.stderr[-1500:])
    try:
        findings = json.loads(completed.stdout)
    except json.JSONDecodeError as error:
        problems.append(f"stdout is not JSON: {error}")
        findings = []
    return {"seconds": seconds, "status": completed.returncode, "findings": findings, "problems": problems,
            "stderr": completed.stderr[-3000:]}


def _cli_key(item: dict) -> tuple:
    return (item["filename"], item["location"]["row"], item["location"]["column"], item["code"])


# ----- report -----


def _gl000_reason(message: str) -> str:
    """The kind of a GL000 message, without the positions and names that vary per file."""
    message = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", message)
    message = re.sub(r"\d+(\.\d+)?", "N", message)
    return message[:110]


def summarise(files: list[Path], sweep: SweepResult, cli: dict | None, cli_jobs1: dict | None,
              confirm: dict | None, compare: bool) -> tuple[str, dict]:
    records = sweep.records
    per_rule = collections.Counter(f[0] for r in records for f in r["findings"])
    gl000 = collections.Counter(_gl000_reason(f[3]) for r in records for f in r["findings"] if f[0] == "GL000")
    crashes = [(r["path"], f[3]) for r in records for f in r["findings"] if f[0] == "GL000" and "internal error" in f[3]]
    crashes += [(path, "worker process died: " + stderr.strip().splitlines()[-1] if stderr.strip() else "worker died")
                for path, stderr in sweep.dead_workers]
    noisy = [(r["path"], r["noise"]) for r in records if r["noise"]]
    analysed = [r for r in records if r["analysed"]]
    slowest = sorted(records, key=lambda r: r["seconds"], reverse=True)[:10]
    total_bytes = sum(p.stat().st_size for p in files)
    lines = [
        f"files: {len(files)} ({total_bytes / 1e6:.1f} MB); analysed (parsed): {len(analysed)}; "
        f"flagged: {sum(1 for r in records if any(f[0] != 'GL000' for f in r['findings']))}",
        f"pass 1 (isolated workers): {sweep.seconds:.1f} s wall, {sum(r['seconds'] for r in records):.1f} s analysis",
        f"crashes: {len(crashes)}; hangs: {len(sweep.hangs)}; output printed by the analysis: {len(noisy)}",
        "findings per rule: " + ", ".join(f"{code} {n}" for code, n in sorted(per_rule.items())),
        "GL000 reasons:",
        *(f"  {n:5d}  {reason}" for reason, n in gl000.most_common()),
        "slowest files:",
        *(f"  {r['seconds']:7.2f} s  {r['path']}" for r in slowest),
    ]
    lines += [f"CRASH {path}: {message}" for path, message in crashes]
    lines += [f"HANG {path}" for path in sweep.hangs]
    lines += [f"NOISE {path}: {text[:300]!r}" for path, text in noisy]
    summary: dict = {
        "files": len(files), "bytes": total_bytes, "analysed": len(analysed), "seconds": sweep.seconds,
        "per_rule": dict(per_rule), "gl000": dict(gl000), "crashes": crashes, "hangs": sweep.hangs,
        "noise": noisy, "slowest": [(r["path"], r["seconds"]) for r in slowest],
        "flagged": sorted({r["path"] for r in records if any(f[0] != "GL000" for f in r["findings"])}),
    }
    if cli is not None:
        lines.append(f"pass 2 (graphlint check, --jobs 2): {cli['seconds']:.1f} s, exit {cli['status']}, "
                     f"{len(cli['findings'])} findings; problems: {cli['problems'] or 'none'}")
        summary["cli"] = {k: cli[k] for k in ("seconds", "status", "problems")}
        expected = sorted((r["path"], f[1], f[2], f[0]) for r in records for f in r["findings"])
        got = sorted(_cli_key(item) for item in cli["findings"])
        if not compare:
            lines.append("  (findings not compared: pass 1 ran without the prefilter)")
        elif sweep.hangs or sweep.dead_workers:
            lines.append("  (findings not compared: pass 1 lost files)")
        else:
            same = expected == got
            lines.append(f"  same findings as pass 1: {same}" + ("" if same else f" ({len(expected)} vs {len(got)})"))
            summary["cli"]["same_as_isolated"] = same
    if cli_jobs1 is not None:
        same = cli_jobs1["findings"] == (cli or {}).get("findings")
        lines.append(f"pass 2 again with --jobs 1: {cli_jobs1['seconds']:.1f} s; identical JSON: {same}; "
                     f"problems: {cli_jobs1['problems'] or 'none'}")
        summary["cli_jobs1"] = {"seconds": cli_jobs1["seconds"], "identical": same, "problems": cli_jobs1["problems"]}
    if confirm is not None:
        verdicts = collections.Counter(
            (item.get("confirmation") or {}).get("status", "none") for item in confirm["findings"]
        )
        reasons = collections.Counter(
            _gl000_reason((item.get("confirmation") or {}).get("evidence") or "")
            for item in confirm["findings"]
            if (item.get("confirmation") or {}).get("status") == "inconclusive"
        )
        lines.append(f"pass 3 (--confirm on {confirm['files']} flagged files): {confirm['seconds']:.1f} s, "
                     f"exit {confirm['status']}, verdicts {dict(verdicts)}; problems: {confirm['problems'] or 'none'}; "
                     f"leftover processes: {confirm['leftover']}")
        lines += [f"  {n:4d} inconclusive: {reason}" for reason, n in reasons.most_common(12)]
        summary["confirm"] = {"files": confirm["files"], "seconds": confirm["seconds"], "verdicts": dict(verdicts),
                              "problems": confirm["problems"], "leftover": confirm["leftover"],
                              "inconclusive": dict(reasons)}
    return "\n".join(lines), summary


def _descendants() -> list[str]:
    """Processes still running under this one (a --confirm child must not outlive its run)."""
    completed = subprocess.run(["ps", "-o", "pid=,args=", "--ppid", str(os.getpid())], capture_output=True, text=True)
    return [line.strip() for line in completed.stdout.splitlines() if line.strip() and " ps " not in f" {line} "]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("roots", nargs="*", type=Path, default=DEFAULT_ROOTS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-prefilter", action="store_true", help="analyse every file, not only candidates")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--hang-seconds", type=float, default=60.0)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--skip-cli", action="store_true", help="only the isolated pass")
    parser.add_argument("--jobs1", action="store_true", help="run the command line again with --jobs 1 and compare")
    parser.add_argument("--confirm-sample", type=int, default=0, metavar="N")
    parser.add_argument("--confirm-timeout", type=float, default=20.0)
    parser.add_argument("--json", type=Path, default=None, help="write the summary here")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.worker:
        worker_main(prefilter=not args.no_prefilter)
        return 0

    files = collect(args.roots, args.limit)
    if not files:
        print("sweep: no .py files under " + ", ".join(map(str, args.roots)), file=sys.stderr)
        return 2
    sweep = sweep_isolated(files, args.workers, args.hang_seconds, not args.no_prefilter, not args.quiet)
    cli = cli_jobs1 = confirm = None
    if not args.skip_cli:
        cli = run_cli(files, jobs=args.workers)
        if args.jobs1:
            cli_jobs1 = run_cli(files, jobs=1)
    if args.confirm_sample:
        flagged = sorted({r["path"] for r in sweep.records if any(f[0] != "GL000" for f in r["findings"])})
        sample = sorted(random.Random(0).sample(flagged, min(args.confirm_sample, len(flagged))))
        confirm = run_cli([Path(p) for p in sample], jobs=args.workers,
                          extra=["--confirm", "--confirm-timeout", str(args.confirm_timeout)])
        confirm["files"] = len(sample)
        confirm["leftover"] = _descendants()
    text, summary = summarise(files, sweep, cli, cli_jobs1, confirm, compare=not args.no_prefilter)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    broken = summary["crashes"] or summary["hangs"] or summary["noise"]
    broken = broken or any(summary.get(k, {}).get("problems") for k in ("cli", "cli_jobs1", "confirm"))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
