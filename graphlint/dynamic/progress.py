"""A one-line progress display for --confirm on a terminal.

Shows files done out of all, the verdicts so far and the file(s) running,
redrawn in place on stderr. Only used when a person is watching (text output
on a terminal); piped or JSON output gets nothing of it.
"""

from __future__ import annotations

import shutil
import threading
from collections import Counter


class ProgressDisplay:
    def __init__(self, stream, total: int) -> None:
        self.stream = stream
        self.total = total
        self.done = 0
        self.verdicts: Counter = Counter()
        self.running: list = []
        self.lock = threading.Lock()
        self.shown = False

    def file_started(self, path: str) -> None:
        with self.lock:
            self.running.append(path)
            self._draw()

    def file_done(self, run) -> None:
        with self.lock:
            if run.path in self.running:
                self.running.remove(run.path)
            self.done += 1
            self.verdicts.update(v.status for v in run.verdicts)
            self._draw()

    def line(self) -> str:
        counts = ", ".join(
            f"{self.verdicts[s]} {s}" for s in ("confirmed", "not reproduced", "inconclusive") if self.verdicts[s]
        )
        text = f"confirming: {self.done}/{self.total} files"
        if counts:
            text += f" | {counts}"
        if self.running:
            text += f" | running {self.running[-1]}"
        return text

    def _draw(self) -> None:
        width = shutil.get_terminal_size((80, 20)).columns - 1
        text = self.line()
        if len(text) > width:
            text = text[: max(width - 3, 0)] + "..."
        self.stream.write("\r\x1b[2K" + text)
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        with self.lock:
            if self.shown:
                self.stream.write("\r\x1b[2K")
                self.stream.flush()
                self.shown = False
