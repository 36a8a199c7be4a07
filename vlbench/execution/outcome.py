"""The one typed outcome of a run (:class:`RunOutcome`, :class:`RunStatus`), whichever executor ran it, and the
outcome of a run that ended without one (:func:`lost`: its attempts and seconds read from its log)."""

from __future__ import annotations

import dataclasses
import enum
import os
import re
import time
from dataclasses import dataclass, field

from .task import Task


class RunStatus(str, enum.Enum):
    """How a run of a sweep ended."""

    DONE = "done"  # it ran to its end (or a finished run was found in its folder by the run itself)
    FAILED = "failed"  # its own code failed (an error, the log says why), or it could not be handed to a worker
    KILLED = "killed"  # its worker process, node or job died without an outcome (killed, out of memory, time limit)
    SKIPPED = "skipped"  # finished before this sweep (proven by its hashes): not run
    CONFLICT = "conflict"  # its folder holds another finished run (other options): not run, not replaced

    def __str__(self) -> str:
        return self.value


#: the statuses of a run that has its results
OK_STATUSES = (RunStatus.DONE, RunStatus.SKIPPED)


@dataclass(frozen=True)
class RunOutcome:
    """The outcome of one run, the same from every executor. ``seconds``: wall seconds of its attempts (0.0 when
    it never started); ``attempts``: attempts started (0 when it never started); ``error``: why it did not end well
    (None when it did); ``extra``: facts of the executor that ran it (a Slurm job id and stderr file, ...)."""

    run_id: str
    status: RunStatus
    folder: str
    log: str
    seconds: float = 0.0
    attempts: int = 0
    error: str | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "status", RunStatus(self.status))
        except ValueError:
            raise TypeError(f"run {self.run_id!r}: status {self.status!r} is not one of "
                            f"{', '.join(s.value for s in RunStatus)}") from None
        if isinstance(self.seconds, bool) or not isinstance(self.seconds, (int, float)) or not self.seconds >= 0:
            raise TypeError(f"run {self.run_id!r}: seconds must be a number >= 0, got {self.seconds!r}")
        object.__setattr__(self, "seconds", float(self.seconds))
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 0:
            raise TypeError(f"run {self.run_id!r}: attempts must be a whole number >= 0, got {self.attempts!r}")
        if self.ok != (self.error is None):
            raise TypeError(f"run {self.run_id!r}: a {self.status.value} outcome "
                            + ("has no error" if self.ok else "needs its error (a non-empty text)"))
        if self.error is not None and (not isinstance(self.error, str) or not self.error.strip()):
            raise TypeError(f"run {self.run_id!r}: error must be a non-empty text, got {self.error!r}")

    @property
    def ok(self) -> bool:
        """Whether the run has its results (it ran to its end now, or had before)."""
        return self.status in OK_STATUSES

    def as_dict(self) -> dict:
        """The outcome as JSON (sweep.json, the progress display): the fields, then the executor's facts."""
        return {"run_id": self.run_id, "status": self.status.value, "error": self.error, "log": self.log,
                "seconds": self.seconds, "attempts": self.attempts, "folder": self.folder, **self.extra}

    @classmethod
    def from_dict(cls, d: dict) -> RunOutcome:
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        return cls(**{k: d[k] for k in names if k in d}, extra={k: v for k, v in d.items() if k not in names})

    def with_extra(self, **facts) -> RunOutcome:
        return dataclasses.replace(self, extra={**self.extra, **facts})


# -- the log of a run: each attempt starts with a header line (vlbench.sweep.worker writes it) ------------------

_HEADER = re.compile(r"^== (\S+): attempt (\d+) \(pid (\d+), [^,]*, t=([0-9.]+)\)", re.M)


def attempt_header(run_id: str, attempt: int) -> str:
    """The line that starts an attempt in the run's log (its pid, its start, and the start as epoch seconds)."""
    return (f"== {run_id}: attempt {attempt} (pid {os.getpid()}, {time.strftime('%Y-%m-%dT%H:%M:%S')}, "
            f"t={time.time():.3f})\n")


def log_mark(task: Task) -> int:
    """Where the run's log ends now (bytes): what an executor notes before it starts the run, so that
    :func:`lost` counts only this sweep's attempts (a log keeps every attempt of every sweep)."""
    try:
        return task.log_path.stat().st_size
    except OSError:
        return 0


def attempt_starts(task: Task, since: int = 0) -> list[float]:
    """The start times (epoch seconds) of the run's attempts logged after byte ``since`` of its log."""
    try:
        with open(task.log_path, "rb") as fh:
            fh.seek(since)
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    return [float(m.group(4)) for m in _HEADER.finditer(text) if m.group(1) == task.run_id]


def lost(task: Task, why: str, *, since: int = 0, status: RunStatus = RunStatus.KILLED, **extra) -> RunOutcome:
    """The outcome of a run that ended without one (its worker, node or job died; or it could not be handed to a
    worker, ``status=FAILED``): attempts and seconds from its log (the attempts started after ``since``, from the
    first one's start to now), the error ``why`` and where its log is."""
    starts = attempt_starts(task, since)
    seconds = round(max(0.0, time.time() - starts[0]), 3) if starts else 0.0
    return RunOutcome(task.run_id, status, task.folder, str(task.log_path), seconds, len(starts),
                      f"{why}; see its log {task.log_path}", extra)


