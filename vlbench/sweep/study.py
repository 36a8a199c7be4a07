"""A sweep from start to end: the plan expanded under the study folder, each run's state read (finished runs,
proven by their hashes, are skipped; partial ones resume), the rest handed to an executor, a summary with every
failed run's error and log, and the study's leaderboard built from exactly the runs of the plan.

The study folder::

    STUDY/
      plan.json            the expanded grid: every run's id, folder, log and vlbench.run options
      sweep.json           the last sweep's outcome per run (status, error, log, seconds, attempts)
      run_set.txt          the plan's runs that finished: the leaderboard's run set
      runs/<id>/           each run's folder (results.json, per-query values, ...)
      runs/<id>.log        each run's output, every attempt appended
      leaderboard/         the study's leaderboard (vlbench leaderboard build over runs/ with run_set.txt)
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import registry
from ..errors import OptionError, VlbenchError
from ..runfolder import read_results
from ..util.io import atomic_write_text, write_json
from . import history
from .executors import EXECUTORS
from .plan import RUNS, Plan, PlanError, check_tasks, expand, read_plan
from .progress import Progress
from .status import CONFLICT, FINISHED, as_json, grid_lines, look_ahead, states
from .worker import Task

PLAN_FILE, SWEEP_FILE, RUN_SET, BOARD = "plan.json", "sweep.json", "run_set.txt", "leaderboard"


@dataclass
class SweepResult:
    study: Path
    tasks: list[Task]
    outcomes: dict[str, dict] = field(default_factory=dict)  # run id -> outcome (skipped runs: status "skipped")
    leaderboard: Path | None = None
    leaderboard_error: str | None = None
    plan_only: bool = False

    @property
    def failed(self) -> list[dict]:
        return [o for o in self.outcomes.values() if o["status"] == "failed"]

    @property
    def ok(self) -> bool:
        return not self.plan_only and not self.failed and not self.leaderboard_error and all(
            o["status"] in ("done", "skipped") for o in self.outcomes.values())


def _study_folder(plan: Plan, out) -> Path:
    folder = out or plan.out
    if not folder:
        suite = plan.path.startswith("suite ")
        raise OptionError("out", f"{{opt}}: {'the' if suite else 'the plan'} {plan.path} names no study folder",
                          "pass one, e.g. --out studies/mine" + ("" if suite else
                                                                 f", or write [study] out = \"...\" in {plan.path}"),
                          flag="--out")
    return Path(folder).expanduser()


def sweep(plan: str | Path | Plan, out=None, *, executor: str = "local", workers: int | None = None,
          retries: int = 0, plan_only: bool = False, executor_options: dict | None = None,
          cache_dir=None, leaderboard: bool = True, stream=None) -> SweepResult:
    """Run (or with ``plan_only`` describe) the plan's grid under the study folder ``out`` (default: the plan's
    ``[study] out``). ``stream`` gets the grid, the progress and the summary (default: stderr; the grid of
    ``plan_only`` goes to stdout)."""
    plan = plan if isinstance(plan, Plan) else read_plan(plan)
    if executor not in EXECUTORS:
        near = registry.close_matches(executor, EXECUTORS)
        raise OptionError("executor", f"unknown {{opt}} {executor!r}",
                          f"use {', '.join(EXECUTORS)}" + (f" (did you mean {near[0]}?)" if near else ""),
                          flag="--executor")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise OptionError("retries", f"{{opt}} must be >= 0, got {retries!r}", example=1, flag="--retries")
    study = _study_folder(plan, out)
    cache_dir = cache_dir or plan.options.get("cache_dir")  # the runs' cache: their vectors and the stage times
    tasks = expand(plan, study, retries=retries, needs=dict(plan.needs))
    check_tasks(plan, tasks)
    rows = states(tasks)
    result = SweepResult(study, tasks, plan_only=plan_only)
    if plan_only:
        _print_plan(plan, study, rows, cache_dir, stream if stream is not None else sys.stdout)
        result.outcomes = {r.task.run_id: {**as_json([r])[0], "status": r.state} for r in rows}
        return result

    err = stream if stream is not None else sys.stderr
    (study / RUNS).mkdir(parents=True, exist_ok=True)
    write_json(study / PLAN_FILE, {"plan": plan.path, "executor": executor,
                                   "runs": [t.as_dict() for t in tasks]})
    result.outcomes = execute_tasks(rows, executor, {**plan.executors.get(executor, {}), **(executor_options or {})},
                                    workers=workers, stream=err)
    _keep_timings(result, cache_dir)
    write_json(study / SWEEP_FILE, {"plan": plan.path, "executor": executor, "finished": time.strftime(
        "%Y-%m-%dT%H:%M:%S"), "outcomes": list(result.outcomes.values())})
    if leaderboard:
        _leaderboard(result, err)
    _summary(result, err)
    return result


def execute_tasks(rows: list, executor: str, options: dict, *, workers: int | None = None, stream=None) -> dict:
    """Run the runs of ``rows`` (their :class:`~vlbench.sweep.status.RunState`) that are not finished on
    ``executor`` with one progress display; outcomes by run id. Finished runs are "skipped", runs in conflict
    "failed" without running. The unit of a sweep, also used by a reproduction (``vlbench reproduce``)."""
    err = stream if stream is not None else sys.stderr
    outcomes: dict[str, dict] = {}
    todo = _partition(rows, outcomes)
    print(f"{len(rows)} run(s): {len(rows) - len(todo)} already finished or in conflict, {len(todo)} to run with "
          f"--executor {executor}", file=err)
    if todo:
        options = dict(options)
        if workers is not None:
            options["workers"] = workers
        try:
            execute = registry.resolve(EXECUTORS[executor])
        except ImportError as exc:  # an optional engine that is not installed (submitit, ray)
            raise OptionError("executor", f"{{opt}} {executor} is unavailable here: {exc}",
                              "install the package it runs on (submitit for slurm, ray for ray; docs/scale.md), or use "
                              "--executor local",
                              flag="--executor") from None
        progress = Progress(len(rows), skipped=sum(o["status"] == "skipped" for o in outcomes.values()), stream=err)
        try:
            got = execute(todo, options, progress.on_event)
        finally:
            progress.close()
        for t, o in zip(todo, got):
            outcomes[t.run_id] = o
    return {r.task.run_id: outcomes[r.task.run_id] for r in rows}


def _print_plan(plan: Plan, study: Path, rows: list, cache_dir, out) -> None:
    look_ahead(rows, cache_dir)
    print(f"study {study} (plan {plan.path}): {len(plan.models)} model(s) x {len(plan.datasets)} dataset(s) x "
          f"{len(plan.conditions)} condition(s) x {len(plan.seeds)} seed(s)"
          + (f", {len(plan.exclude)} exclusion(s)" if plan.exclude else ""), file=out)
    for line in grid_lines(rows):
        print(line, file=out)


def _partition(rows: list, outcomes: dict) -> list[Task]:
    """The tasks to run; finished runs get a "skipped" outcome, runs in conflict a "failed" one (not run)."""
    todo = []
    for r in rows:
        base = {"run_id": r.task.run_id, "log": r.task.log, "seconds": 0.0, "attempts": 0, "folder": r.task.folder}
        if r.state == FINISHED:
            outcomes[r.task.run_id] = {**base, "status": "skipped", "error": None, "finished_run": r.why}
        elif r.state == CONFLICT:
            outcomes[r.task.run_id] = {**base, "status": "failed", "error": f"{r.why} (the sweep does not "
                                              f"replace a finished run: remove {r.task.folder} to run it again)"}
        else:
            todo.append(r.task)
    return todo


def _keep_timings(result: SweepResult, cache_dir) -> None:
    for o in result.outcomes.values():
        if o["status"] == "done":
            try:
                history.note(read_results(o["folder"]), cache_dir)
            except (VlbenchError, OSError):
                pass  # a cost estimate is a convenience: never fail the sweep for it


def _leaderboard(result: SweepResult, err) -> None:
    """The board of exactly the plan's finished runs: the study's runs/ folder read with the run set of those runs,
    so any other folder there (a stray run, a failed one) is left out, and named so in the board's manifest."""
    finished = [o["folder"] for o in result.outcomes.values() if o["status"] in ("done", "skipped")]
    run_set = result.study / RUN_SET
    atomic_write_text(run_set, "# the runs of the plan that finished (vlbench sweep)\n" + "".join(
        f"{Path(f).resolve()}\n" for f in finished))
    if not finished:
        return
    from ..leaderboards.build import build_leaderboard  # lazy: the leaderboard stack (pandas, plots)
    from ..leaderboards.runset import Choice

    try:
        build_leaderboard([str((result.study / RUNS).resolve())], result.study / BOARD, plots=False,
                          warn=lambda m: print(f"vlbench: warning: {m}", file=err),
                          choice=Choice(run_set=str(run_set), allow_limited=True, keep_stray=True))
        result.leaderboard = result.study / BOARD
    except VlbenchError as exc:
        result.leaderboard_error = str(exc)


def _summary(result: SweepResult, err) -> None:
    counts: dict[str, int] = {}
    for o in result.outcomes.values():
        counts[o["status"]] = counts.get(o["status"], 0) + 1
    print(f"sweep {result.study}: {counts.get('done', 0)} run(s) finished now, {counts.get('skipped', 0)} already "
          f"finished (skipped), {counts.get('failed', 0)} failed", file=err)
    for o in result.failed:
        print(f"  FAILED {o['run_id']} after {o.get('attempts', 0)} attempt(s): {o['error']}\n"
              f"         log: {o['log']}", file=err)
    if result.leaderboard:
        print(f"leaderboard of the plan's runs: {result.leaderboard}", file=err)
    if result.leaderboard_error:
        print(f"leaderboard not built: {result.leaderboard_error}", file=err)
    if result.failed:
        print("fix the failed runs and run the same command again: finished runs are skipped, only the failed "
              "ones run", file=err)


__all__ = ["sweep", "SweepResult", "PlanError", "PLAN_FILE", "SWEEP_FILE", "RUN_SET", "BOARD"]
