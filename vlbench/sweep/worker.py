"""The unit of work of a sweep: one planned run, executed wherever an executor places it.

:func:`run_task` is a top-level, importable function of plain data (a :class:`Task` as a dict in, an outcome
dict out), so a local process pool, a submitit job (Slurm) or a Ray task can all call it. It never raises for a
failed run: the outcome says ``failed`` with the error, and the run's own log file (``task.log``) holds what
it printed. A run whose folder already holds a finished, verified results.json is not run again (``resume``:
vlbench.run's own check of a finished run), so retries and reruns of a sweep redo only what is missing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from .choice import run_choice


@dataclass(frozen=True)
class Task:
    """One run of a sweep: ``kwargs`` are the keyword arguments of :func:`vlbench.run` (JSON-able; ``out`` is
    ``folder``); ``needs``: what it asks of a node (``gpus``, ``cpus``, ``mem_gb``); ``log``: the file its
    output goes to (beside the run); ``retries``: how many times a failed attempt is tried again."""

    run_id: str
    folder: str
    kwargs: dict
    needs: dict = field(default_factory=dict)
    log: str = ""
    retries: int = 0

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Task:
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


def run_task(task: dict) -> dict:
    """Run one task (a :meth:`Task.as_dict`) to its end: ``{"run_id", "status": "done" | "failed", "error",
    "log", "seconds", "attempts", "folder"}``. Each attempt appends to the task's log; a failed attempt is
    retried ``retries`` times; the error of the last attempt is returned, never raised."""
    t = Task.from_dict(task)
    log = Path(t.log or Path(t.folder).with_name(Path(t.folder).name + ".log"))
    log.parent.mkdir(parents=True, exist_ok=True)
    start, error, attempts = time.monotonic(), None, 0
    for attempts in range(1, t.retries + 2):
        error = _attempt(t, log, attempts)
        if error is None:
            break
    return {"run_id": t.run_id, "status": "done" if error is None else "failed", "error": error, "log": str(log),
            "seconds": round(time.monotonic() - start, 3), "attempts": attempts, "folder": t.folder}


def _attempt(t: Task, log: Path, attempt: int) -> str | None:
    """One attempt of the run, its output appended to ``log``; the error as text, or None."""
    import vlbench  # lazy: the run's own code path (the same as `vlbench run`), imported where a run happens

    kwargs = {**t.kwargs, "out": t.folder}
    kwargs.setdefault("resume", True)
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"== {t.run_id}: attempt {attempt} (pid {os.getpid()}, {time.strftime('%Y-%m-%dT%H:%M:%S')})\n")
        fh.flush()
        with contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
            try:
                if "task" in t.kwargs:  # a choice set of the plan (vlbench/sweep/choice.py)
                    run_choice(kwargs)
                else:
                    vlbench.run(**kwargs)
            except BaseException as exc:  # noqa: BLE001 -- a failed run is an outcome, never the sweep's end
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):  # Ctrl-C, or the job is being requeued
                    print(f"== {t.run_id}: attempt {attempt} stopped ({type(exc).__name__} {exc}): the process "
                          "exits; the run resumes where it is started again", file=fh)
                    raise
                traceback.print_exc(file=fh)
                return f"{type(exc).__name__}: {exc}"
    return None
