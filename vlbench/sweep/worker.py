"""The unit of work of a sweep: one planned run, executed wherever an executor places it.

:func:`run_task` is a top-level, importable function of plain data (a :class:`Task` as a dict in, a
:class:`~vlbench.execution.RunOutcome` out), so a local process pool, a submitit job (Slurm), a Ray task or a
third party's executor can all call it. It never raises for a failed run: the outcome says ``failed`` with the
error, and the run's own log file (``task.log``) holds what it printed. A run whose folder already holds a
finished, verified results.json is not run again (``resume``: vlbench.run's own check of a finished run), so
retries and reruns of a sweep redo only what is missing. A run folder or log that is a symbolic link is refused
(a sweep writes inside its study folder only).
"""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from pathlib import Path

from ..execution import RunOutcome, RunStatus, Task, attempt_header
from .choice import run_choice

__all__ = ["Task", "run_task", "link_problem"]


def link_problem(t: Task) -> str | None:
    """Why the run's folder or log would send its writes elsewhere (a symbolic link), or None."""
    for what, path in (("folder", Path(t.folder)), ("log", t.log_path)):
        if path.is_symlink():
            return f"the run's {what} {path} is a symbolic link (to {os.readlink(path)})"
    return None


def run_task(task: dict) -> RunOutcome:
    """Run one task (a :meth:`Task.as_dict`) to its end: a :class:`RunOutcome` with status ``done`` or ``failed``,
    the error, the log, the seconds and the attempts. Each attempt appends to the task's log; a failed attempt is
    retried ``retries`` times; the error of the last attempt is returned, never raised."""
    t = Task.from_dict(task)
    log = t.log_path
    start, error, attempts = time.monotonic(), None, 0
    refused = link_problem(t)
    if refused is not None:
        return RunOutcome(t.run_id, RunStatus.FAILED, t.folder, str(log), 0.0, 0,
                          f"{refused}: a sweep writes only inside its study folder; remove the link")
    log.parent.mkdir(parents=True, exist_ok=True)
    for attempts in range(1, t.retries + 2):
        error = _attempt(t, log, attempts)
        if error is None:
            break
    return RunOutcome(t.run_id, RunStatus.DONE if error is None else RunStatus.FAILED, t.folder, str(log),
                      round(time.monotonic() - start, 3), attempts, error)


def _open_log(log: Path):
    """The log opened for appending, never through a symbolic link (a link put there meanwhile is refused)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    return os.fdopen(os.open(log, flags, 0o644), "a", encoding="utf-8")


def _attempt(t: Task, log: Path, attempt: int) -> str | None:
    """One attempt of the run, its output appended to ``log``; the error as text, or None."""
    import vlbench  # lazy: the run's own code path (the same as `vlbench run`), imported where a run happens

    kwargs = {**t.kwargs, "out": t.folder}
    kwargs.setdefault("resume", True)
    try:
        fh = _open_log(log)
    except OSError as exc:
        return f"cannot write the run's log {log}: {exc.strerror or exc} (a symbolic link is refused)"
    with fh:
        fh.write(attempt_header(t.run_id, attempt))
        fh.flush()
        with contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
            try:
                if Path(t.folder).is_symlink():
                    raise RuntimeError(f"the run folder {t.folder} became a symbolic link; a sweep writes only "
                                       "inside its study folder")
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
