"""``check_executor``: a sweep executor against the contract of vlbench/execution (the protocol
:class:`~vlbench.execution.Executor`, the outcome :class:`~vlbench.execution.RunOutcome`).

What vlbench relies on: ``check_options`` refuses an option the executor does not have (naming it) before
anything runs, and returns the options it will use; ``execute`` runs every task through
``vlbench.sweep.worker.run_task`` (so a task's ``retries`` are honoured and its log written), returns one
``RunOutcome`` per task in the order of the tasks (a run that fails is an outcome, never an exception), refuses a
bad option before it runs anything, returns nothing for no task, and reports each run "started" and then "done"
or "failed" through ``on_event``.

The check runs two tasks that fail at once (a model name no registry holds), so it loads no model: one with no
retry, one with one retry. Their folders are in a temporary folder, or under ``folder`` (an executor whose runs
execute elsewhere needs storage every node sees); ``options`` are the executor's options for the check (e.g.
``{"cluster": "local"}`` for the Slurm executor on a machine without Slurm).
"""

from __future__ import annotations

import json
import tempfile
import threading
from pathlib import Path

from ..errors import VlbenchError
from ..execution import Executor, RunOutcome, RunStatus, Task
from ..registry import executors as EXECUTORS
from .common import Checker, Report, short

#: an option no executor has
BOGUS_OPTION = "no-such-option-of-any-executor"
#: what the check's runs are: a model no registry holds, so each run fails in its first step
FAILING_RUN = {"model": "no-such-model-for-check-executor", "dataset": "custom:no-such-manifest.jsonl",
               "quiet": True}


def _load(c: Checker, target):
    with c.check("load"):
        obj = EXECUTORS.get(target) if isinstance(target, str) else target
        if isinstance(obj, type):
            obj = obj()
    with c.check("protocol"):
        missing = [m for m in ("check_options", "execute") if not callable(getattr(obj, m, None))]
        c.expect(not missing and isinstance(obj, Executor),
                 "check_options(options) and execute(tasks, options, on_event) (vlbench.execution.Executor)",
                 f"{type(obj).__name__} has no {' and no '.join(missing)}" if missing else type(obj).__name__)
    return obj


def _refuses(c: Checker, call, what: str) -> None:
    """``call()`` must raise a VlbenchError (an OptionError) that names the bogus option."""
    try:
        got = call()
    except VlbenchError as exc:
        c.expect(BOGUS_OPTION in str(exc) or getattr(exc, "option", None) == BOGUS_OPTION,
                 f"{what}: an error naming the option {BOGUS_OPTION!r}", str(exc))
        return
    raise c.error(f"{what}: a vlbench.errors.OptionError naming the unknown option {BOGUS_OPTION!r}",
                  f"no error (returned {short(got)})")


def _check_options(c: Checker, ex, options: dict) -> dict:
    with c.check("options"):
        got = ex.check_options(dict(options))
        c.expect(isinstance(got, dict), "check_options returns the options it will use (a dict)", short(got))
        _refuses(c, lambda: ex.check_options({**options, BOGUS_OPTION: 1}), "check_options of an unknown option")
    return got


def _tasks(root: Path, tag: str) -> list[Task]:
    runs = root / f"check-executor-{tag}" / "runs"
    return [Task(run_id=f"check-{tag}-{i}", folder=str(runs / f"check-{tag}-{i}"), kwargs=dict(FAILING_RUN),
                 log=str(runs / f"check-{tag}-{i}.log"), retries=i) for i in range(2)]


def _check_outcomes(c: Checker, tasks: list[Task], got, events: list) -> None:
    with c.check("outcomes"):
        c.expect(isinstance(got, list) and len(got) == len(tasks), f"a list of {len(tasks)} outcomes, one per task",
                 short(got))
        for t, o in zip(tasks, got):
            c.expect(isinstance(o, RunOutcome), "a vlbench.execution.RunOutcome per task", type(o).__name__)
            c.expect(o.run_id == t.run_id, f"the outcomes in the order of the tasks ({t.run_id} here)", o.run_id)
            c.expect((o.folder, o.log) == (t.folder, str(t.log_path)), f"the task's folder and log {t.log_path}",
                     f"{o.folder}, {o.log}")
            c.expect(o.status is RunStatus.FAILED and bool(o.error),
                     f"run {t.run_id} (a model no registry holds) failed, with its error", f"{o.status}: {o.error}")
            problem = None
            try:
                json.dumps(o.as_dict(), allow_nan=False)
            except (TypeError, ValueError) as exc:
                problem = str(exc)
            c.expect(problem is None, "an outcome that is plain JSON (sweep.json)", problem or "")
    with c.check("retries honoured"):
        for t, o in zip(tasks, got):
            c.expect(o.attempts == t.retries + 1, f"run {t.run_id} with {t.retries} retr(y/ies) tried "
                     f"{t.retries + 1} time(s) (run_task tries a failed run again)", f"attempts {o.attempts}")
            c.expect(Path(t.log_path).is_file() and f"== {t.run_id}: attempt {t.retries + 1}" in
                     Path(t.log_path).read_text(errors="replace"), f"run {t.run_id}'s log with every attempt",
                     f"{t.log_path}")
    with c.check("events"):
        for t in tasks:
            kinds = [k for k, rid, _ in events if rid == t.run_id]
            c.expect("started" in kinds and "failed" in kinds and kinds.index("started") < kinds.index("failed"),
                     f"on_event('started', {t.run_id!r}, ...) then on_event('failed', {t.run_id!r}, ...)", kinds)
            c.expect(all(isinstance(info, dict) for _, rid, info in events if rid == t.run_id),
                     "each event's info a dict", [type(info).__name__ for _, _, info in events])


def check_executor(executor, *, options: dict | None = None, folder=None) -> Report:
    """Check a sweep executor: an object or class of the :class:`~vlbench.execution.Executor` protocol, or a
    registered name. ``options``: the executor's options for the check's runs; ``folder``: where their folders go
    (default: a temporary folder). Returns the :class:`Report` of the checks passed; raises
    :class:`ConformanceError` at the first failure."""
    name = executor if isinstance(executor, str) else getattr(executor, "__name__", type(executor).__name__)
    c = Checker("executor", name)
    ex = _load(c, executor)
    options = dict(options or {})
    with tempfile.TemporaryDirectory(prefix="vlbench-check-executor-") as tmp:
        root = Path(folder) if folder is not None else Path(tmp)
        _check_options(c, ex, options)
        with c.check("no task"):
            got = ex.execute([], dict(options), lambda kind, run_id, info: None)
            c.expect(got == [], "no outcome for no task", short(got))
        with c.check("bad option refused before any run"):
            tasks = _tasks(root, "refused")
            _refuses(c, lambda: ex.execute(tasks, {**options, BOGUS_OPTION: 1}, lambda k, r, i: None),
                     "execute with an unknown option")
            ran = [t.run_id for t in tasks if t.log_path.exists() or Path(t.folder).exists()]
            c.expect(not ran, "nothing run when an option is refused", f"runs started: {ran}")
        tasks, events, lock = _tasks(root, "runs"), [], threading.Lock()

        def on_event(kind, run_id, info):
            with lock:
                events.append((kind, run_id, info))

        with c.check("execute"):
            got = ex.execute(list(tasks), dict(options), on_event)
        _check_outcomes(c, tasks, got, events)
    return c.report
