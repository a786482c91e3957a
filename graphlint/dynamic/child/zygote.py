"""The child process: import torch once, then fork one grandchild per file.

Protocol (JSON lines): jobs arrive on stdin; on the original stdout we send
``ready`` (or ``fatal``), then for each job ``started`` (with the
grandchild's pid, so the parent can kill its process group if we die) and
``done`` (verdicts, how the grandchild ended, its captured output).

Each grandchild is isolated: its own process group, stdin on /dev/null,
stdout/stderr captured through pipes (bounded), an address-space limit above
what torch's import already uses, no core dumps, and a wall-clock limit after
which its whole process group is killed. The zygote is a child subreaper on
Linux, so descendants that escape the group (setsid, double fork) are
re-parented to it and killed after the job too.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time

CAPTURE_HEAD = 16 * 1024
CAPTURE_TAIL = 16 * 1024
RESULT_LIMIT = 4 * 1024 * 1024
PR_SET_CHILD_SUBREAPER = 36
_REAL_EXIT = os._exit  # the user's code runs with a wrapped os._exit


class Capture:
    """The first and last bytes of a stream, and how much there was."""

    def __init__(self, head: int = CAPTURE_HEAD, tail: int = CAPTURE_TAIL) -> None:
        self.head_limit = head
        self.tail_limit = tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    def text(self) -> str:
        head = self.head.decode("utf-8", "replace")
        if self.total <= len(self.head) + len(self.tail):
            return head + self.tail.decode("utf-8", "replace")
        skipped = self.total - len(self.head) - len(self.tail)
        return f"{head}\n[... {skipped} bytes not shown ...]\n{self.tail.decode('utf-8', 'replace')}"


def _address_space() -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _become_subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except Exception:
        return False


def _children_of(pid: int) -> list:
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return found


def sweep_orphans() -> int:
    """Kill and reap every process re-parented to us; returns how many."""
    killed = 0
    for _ in range(20):
        children = _children_of(os.getpid())
        if not children:
            break
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        for pid in children:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    return killed


class Zygote:
    def __init__(self) -> None:
        self.protocol = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)  # stray prints in this process must not corrupt the protocol
        os.close(devnull)
        self.baseline = None
        self.subreaper = False

    def send(self, message: dict) -> None:
        self.protocol.write(json.dumps(message) + "\n")
        self.protocol.flush()

    def start(self) -> bool:
        try:
            import torch  # noqa: F401  (imported once here, shared by every fork)
            import torch.nn  # noqa: F401
            import torch.optim  # noqa: F401
            import torch.utils.data  # noqa: F401

            from . import environment, instrument, judge, patches, probes, runner, standins  # noqa: F401

            _warm_up(torch)
        except BaseException as error:  # a broken torch install must not crash the parent
            self.send({"type": "fatal", "reason": f"torch cannot be imported by {sys.executable}: "
                                                  f"{type(error).__name__}: {error}"})
            return False
        self.subreaper = _become_subreaper()
        self.baseline = _address_space()
        self.send({
            "type": "ready",
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "baseline_mb": round(self.baseline / 2**20) if self.baseline else None,
            "subreaper": self.subreaper,
        })
        return True

    def serve(self) -> None:
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            job = json.loads(line)
            self.send(self.run(job))

    def run(self, job: dict) -> dict:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        res_r, res_w = os.pipe()
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the grandchild
            try:
                os.close(out_r), os.close(err_r), os.close(res_r)
                self._grandchild(job, out_w, err_w, res_w)
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                _REAL_EXIT(70)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass  # the grandchild did it first, or already exited
        for fd in (out_w, err_w, res_w):
            os.close(fd)
        self.send({"type": "started", "id": job["id"], "pid": pid})
        streams = {out_r: Capture(), err_r: Capture(), res_r: Capture(RESULT_LIMIT, 0)}
        outcome = self._collect(pid, job, streams, res_r, started)
        outcome["id"] = job["id"]
        return outcome

    def _collect(self, pid: int, job: dict, streams: dict, res_r: int, started: float) -> dict:
        timeout = float(job.get("timeout", 30))
        deadline = started + timeout
        status = None
        timed_out = False
        open_fds = set(streams)
        while status is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                self._kill_group(pid)
                status = os.waitpid(pid, 0)[1]
                break
            self._read(open_fds, streams, min(remaining, 0.05))
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                status = raw
        self._kill_group(pid)
        orphans = sweep_orphans() if self.subreaper else 0
        drain_until = time.monotonic() + 0.5
        while open_fds and time.monotonic() < drain_until:
            if not self._read(open_fds, streams, 0.02):
                break
        for fd in streams:
            try:
                os.close(fd)
            except OSError:
                pass
        messages, report = self._messages(streams[res_r])
        return {
            "type": "done",
            "exit": _exit_info(status, timed_out, timeout),
            "report": report,
            "confirmed": [m for m in messages if m.get("type") == "confirmed"],
            "stdout": streams[_fd_of(streams, 0)].text(),
            "stderr": streams[_fd_of(streams, 1)].text(),
            "seconds": round(time.monotonic() - started, 3),
            "orphans": orphans,
        }

    @staticmethod
    def _read(open_fds: set, streams: dict, wait: float) -> bool:
        if not open_fds:
            return False
        ready, _, _ = select.select(list(open_fds), [], [], wait)
        for fd in ready:
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            if data:
                streams[fd].add(data)
            else:
                open_fds.discard(fd)
        return bool(ready)

    @staticmethod
    def _messages(capture: Capture) -> tuple:
        messages, report = [], None
        if capture.total > len(capture.head) + len(capture.tail):
            return messages, report  # never happens with our own small messages
        for line in capture.text().splitlines():
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if message.get("type") == "report":
                report = message
            else:
                messages.append(message)
        return messages, report

    @staticmethod
    def _kill_group(pid: int) -> None:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass

    def _grandchild(self, job: dict, out_w: int, err_w: int, res_w: int) -> None:
        os.setpgid(0, 0)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        result = os.dup2(res_w, 3) if res_w != 3 else 3
        os.closerange(4, _max_fd())
        sys.stdout = os.fdopen(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)
        sys.stdin = os.fdopen(0, "r", closefd=False)
        self._limit(job)
        main_pid = os.getpid()
        written = [0]

        def emit(message: dict) -> None:
            if os.getpid() != main_pid:  # a fork of the user's code must not speak for it
                return
            data = (json.dumps(message) + "\n").encode("utf-8")
            if written[0] + len(data) > RESULT_LIMIT:
                return
            written[0] += len(data)
            view = memoryview(data)
            while view:
                view = view[os.write(result, view):]

        from .runner import run

        timeout = float(job.get("timeout", 30))
        _soft_deadline(timeout)
        report = run(job, emit)
        signal.setitimer(signal.ITIMER_REAL, 0)
        if os.getpid() == main_pid:
            emit(report)
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            _REAL_EXIT(0)

    def _limit(self, job: dict) -> None:
        import resource

        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        except (ValueError, OSError):
            pass
        memory = job.get("memory_mb")
        if memory and self.baseline:
            limit = self.baseline + int(memory) * 2**20
            try:
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            except (ValueError, OSError):
                pass


def _warm_up(torch) -> None:
    """Pay once, before forking, for what every training script triggers.

    torch 2.13 imports torch._dynamo (hundreds of modules, seconds) when the
    first optimizer is created and the profiler at its first step. One element,
    so no op runs in parallel: no thread pool exists yet when we fork.
    """
    param = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.SGD([param], lr=0.1)
    optimizer.zero_grad()
    (param * 2).sum().backward()
    optimizer.step()


def _soft_deadline(timeout: float) -> None:
    """Shortly before the hard kill, stop the user's code so the report gets out."""
    from .probes import Stop

    def handler(signum, frame):
        raise Stop(f"time limit of {timeout:g} s reached")

    signal.signal(signal.SIGALRM, handler)
    soft = max(timeout * 0.85, timeout - 3.0)
    if soft > 0:
        signal.setitimer(signal.ITIMER_REAL, soft)


def _fd_of(streams: dict, position: int) -> int:
    return list(streams)[position]


def _max_fd() -> int:
    try:
        import resource

        return min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 65536)
    except Exception:
        return 4096


def _exit_info(status, timed_out: bool, timeout: float) -> dict:
    if timed_out:
        return {"kind": "timeout", "reason": f"time limit of {timeout:g} s reached"}
    if status is None:
        return {"kind": "unknown", "reason": "the process ended in an unknown way"}
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        words = {
            "SIGSEGV": "crashed with a segmentation fault (SIGSEGV)",
            "SIGBUS": "crashed with a bus error (SIGBUS)",
            "SIGABRT": "aborted (SIGABRT)",
            "SIGKILL": "was killed (SIGKILL), probably for using too much memory",
            "SIGFPE": "crashed with a floating-point exception (SIGFPE)",
            "SIGILL": "crashed with an illegal instruction (SIGILL)",
        }.get(name, f"was killed by {name}")
        return {"kind": "signal", "signal": name, "reason": f"the process {words}"}
    code = os.WEXITSTATUS(status)
    return {"kind": "exit", "code": code, "reason": f"the process exited with status {code} before reporting"}


def main() -> None:
    zygote = Zygote()
    if zygote.start():
        zygote.serve()
    sweep_orphans()
