"""One progress display over a sweep's grid: runs done / running / failed, and each running run's stage.

``on_event(kind, run_id, info)`` is the executor's callback (it may come from another thread). On a terminal
the display is one line rewritten in place; otherwise (a log, a pipe) one line per run started, finished or
failed, so a batch log stays readable.
"""

from __future__ import annotations

import sys
import threading
import time


class Progress:
    def __init__(self, total: int, skipped: int = 0, stream=None):
        self.total, self.skipped = total, skipped
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.running: dict[str, str] = {}  # run id -> stage
        self.done: list[str] = []
        self.failed: list[str] = []
        self._lock = threading.Lock()
        self._t0 = time.monotonic()

    def counts(self) -> str:
        return (f"{len(self.done) + self.skipped}/{self.total} done ({self.skipped} already finished), "
                f"{len(self.running)} running, {len(self.failed)} failed")

    def on_event(self, kind: str, run_id: str, info: dict | None = None) -> None:
        info = info or {}
        with self._lock:
            if kind == "started":
                self.running[run_id] = "starting"
            elif kind == "stage":
                if run_id in self.running or not self.tty:
                    self.running[run_id] = str(info.get("stage", "?"))
            elif kind in ("done", "failed"):
                self.running.pop(run_id, None)
                (self.done if kind == "done" else self.failed).append(run_id)
            elif kind == "retry":
                self.running[run_id] = f"retry {info.get('attempt', '')}".strip()
            self._show(kind, run_id, info)

    def _show(self, kind: str, run_id: str, info: dict) -> None:
        elapsed = time.monotonic() - self._t0
        if self.tty:
            now = "; ".join(f"{r}: {s}" for r, s in list(self.running.items())[:3])
            line = f"[{elapsed:6.0f} s] {self.counts()}" + (f" | {now}" if now else "")
            width = 160
            self.stream.write("\r" + line[:width].ljust(width))
            self.stream.flush()
            return
        if kind == "stage":
            return
        what = {"started": "started", "done": "finished", "failed": "FAILED", "retry": "retrying"}.get(kind, kind)
        extra = f" ({info.get('error')}; log: {info.get('log')})" if kind == "failed" else ""
        self.stream.write(f"[{elapsed:6.0f} s] {run_id}: {what}{extra} -- {self.counts()}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
