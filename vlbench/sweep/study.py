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

import json
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import OptionError, VlbenchError
from ..execution import RunOutcome, RunStatus
from ..runfolder import read_results
from ..util.io import atomic_write_text, write_json
from . import history
from .executors import get_executor
from .plan import RUNS, Plan, PlanError, check_tasks, expand, read_plan
from .progress import Progress
from .status import CONFLICT, FINISHED, as_json, grid_lines, look_ahead, states
from .worker import Task, link_problem

PLAN_FILE, SWEEP_FILE, RUN_SET, BOARD = "plan.json", "sweep.json", "run_set.txt", "leaderboard"


@dataclass
class SweepResult:
    study: Path
    tasks: list[Task]
    outcomes: dict[str, RunOutcome] = field(default_factory=dict)  # run id -> outcome (none with ``plan_only``)
    states: dict[str, dict] = field(default_factory=dict)  # ``plan_only``: run id -> where it stands (status.as_json)
    leaderboard: Path | None = None
    leaderboard_error: str | None = None
    leaderboard_note: str | None = None  # what the board holds of the plan's runs (superseded ones named)
    stale_board_removed: bool = False  # the board of an earlier plan was removed (it did not describe this plan)
    plan_only: bool = False

    @property
    def failed(self) -> list[RunOutcome]:
        """The runs without their results: failed, killed, or in conflict (not run)."""
        return [o for o in self.outcomes.values() if not o.ok]

    @property
    def ok(self) -> bool:
        return not self.plan_only and not self.failed and not self.leaderboard_error


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
    get_executor(executor)  # an unknown name: "did you mean", before anything is read or written
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
        result.states = {r.task.run_id: row for r, row in zip(rows, as_json(rows))}
        return result

    err = stream if stream is not None else sys.stderr
    check_study_folder(study, tasks)
    options = {**plan.executors.get(executor, {}), **(executor_options or {})}
    if workers is not None:
        options["workers"] = workers
    get_executor(executor).check_options(dict(options))  # a bad option: said before the first run
    result.stale_board_removed = _forget_stale_board(study, tasks)
    (study / RUNS).mkdir(parents=True, exist_ok=True)
    write_json(study / PLAN_FILE, {"plan": plan.path, "executor": executor,
                                   "runs": [t.as_dict() for t in tasks]})
    result.outcomes = execute_tasks(rows, executor, options, stream=err)
    _keep_timings(result, cache_dir)
    write_json(study / SWEEP_FILE, {"plan": plan.path, "executor": executor, "finished": time.strftime(
        "%Y-%m-%dT%H:%M:%S"), "outcomes": [o.as_dict() for o in result.outcomes.values()]})
    if leaderboard:
        _leaderboard(result, err)
    _summary(result, err)
    return result


def check_study_folder(study: Path, tasks: list[Task]) -> None:
    """Refuse a study folder whose parts are symbolic links (``runs``, ``leaderboard``, a run's folder or log):
    a sweep writes inside its study folder only, never through a link to a user's files elsewhere."""
    parts = [study / RUNS, study / BOARD] + [study / name for name in (PLAN_FILE, SWEEP_FILE, RUN_SET)]
    for path in parts:
        if path.is_symlink():
            raise VlbenchError(f"the study folder's {path.name} ({path}) is a symbolic link: a sweep writes only "
                               "inside its study folder", f"remove the link {path}, or choose another study folder")
    for t in tasks:
        why = link_problem(t)
        if why is not None:
            raise VlbenchError(f"run {t.run_id}: {why}: a sweep writes only inside its study folder",
                               "remove the link, or choose another study folder (--out)")


def execute_tasks(rows: list, executor: str, options: dict, *, workers: int | None = None,
                  stream=None) -> dict[str, RunOutcome]:
    """Run the runs of ``rows`` (their :class:`~vlbench.sweep.status.RunState`) that are not finished on
    ``executor`` with one progress display; outcomes by run id. Finished runs are "skipped", runs in conflict
    "conflict" without running. The unit of a sweep, also used by a reproduction (``vlbench reproduce``)."""
    err = stream if stream is not None else sys.stderr
    outcomes: dict[str, RunOutcome] = {}
    todo = _partition(rows, outcomes)
    finished = sum(o.status is RunStatus.SKIPPED for o in outcomes.values())
    conflicts = len(outcomes) - finished
    print(f"{len(rows)} run(s): {finished} already finished"
          + (f", {conflicts} in conflict (not run: their folders hold other finished runs)" if conflicts else "")
          + f", {len(todo)} to run with --executor {executor}", file=err)
    if todo:
        options = dict(options)
        if workers is not None:
            options["workers"] = workers
        execute = get_executor(executor)
        progress = Progress(len(rows), skipped=finished, stream=err)
        try:
            got = execute.execute(todo, options, progress.on_event)
        finally:
            progress.close()
        _check_outcomes(executor, todo, got)
        for t, o in zip(todo, got):
            outcomes[t.run_id] = o
    return {r.task.run_id: outcomes[r.task.run_id] for r in rows}


def _check_outcomes(executor: str, todo: list[Task], got) -> None:
    """An executor broke its contract (vlbench.execution.Executor): say which and how, naming the executor."""
    fix = "fix the executor (vlbench.testing.check_executor finds what it breaks), or use --executor local"
    if not isinstance(got, list) or len(got) != len(todo):
        raise VlbenchError(f"the executor {executor!r} returned {type(got).__name__} of "
                           f"{len(got) if hasattr(got, '__len__') else '?'} outcome(s) for {len(todo)} run(s)", fix)
    for t, o in zip(todo, got):
        if not isinstance(o, RunOutcome):
            raise VlbenchError(f"the executor {executor!r} returned a {type(o).__name__} for run {t.run_id}, not a "
                               "vlbench.execution.RunOutcome", fix)
        if o.run_id != t.run_id:
            raise VlbenchError(f"the executor {executor!r} returned the outcome of {o.run_id} where run {t.run_id}'s "
                               "was due (outcomes come in the order of the tasks)", fix)


def _print_plan(plan: Plan, study: Path, rows: list, cache_dir, out) -> None:
    look_ahead(rows, cache_dir)
    print(f"study {study} (plan {plan.path}): {len(plan.models)} model(s) x {len(plan.datasets)} dataset(s) x "
          f"{len(plan.conditions)} condition(s) x {len(plan.seeds)} seed(s)"
          + (f", {len(plan.exclude)} exclusion(s)" if plan.exclude else ""), file=out)
    for line in grid_lines(rows):
        print(line, file=out)


def _partition(rows: list, outcomes: dict) -> list[Task]:
    """The tasks to run; finished runs get a "skipped" outcome, runs in conflict a "conflict" one (not run)."""
    todo = []
    for r in rows:
        t = r.task
        if r.state == FINISHED:
            outcomes[t.run_id] = RunOutcome(t.run_id, RunStatus.SKIPPED, t.folder, t.log, extra={"finished_run": r.why})
        elif r.state == CONFLICT:
            outcomes[t.run_id] = RunOutcome(t.run_id, RunStatus.CONFLICT, t.folder, t.log, error=(
                f"{r.why} (the sweep does not replace a finished run: remove {t.folder} to run it again)"))
        else:
            todo.append(t)
    return todo


def _forget_stale_board(study: Path, tasks: list[Task]) -> bool:
    """Remove the study's leaderboard when it was built for another plan (plan.json lists other runs): a board
    that no longer describes the plan is never left to be read as this plan's (a rebuild that fails, or
    ``--no-leaderboard``, would leave the earlier plan's runs on it). True when one was removed."""
    board, old = study / BOARD, study / PLAN_FILE
    if not (board / "build_manifest.json").is_file() or board.is_symlink() or not old.is_file():
        return False
    try:
        before = {r["run_id"] for r in json.loads(old.read_text("utf-8"))["runs"]}
    except (OSError, ValueError, KeyError, TypeError):
        before = None
    if before == {t.run_id for t in tasks}:
        return False
    shutil.rmtree(board)
    return True


def _keep_timings(result: SweepResult, cache_dir) -> None:
    for o in result.outcomes.values():
        if o.status is RunStatus.DONE:
            try:
                history.note(read_results(o.folder), cache_dir)
            except (VlbenchError, OSError):
                pass  # a cost estimate is a convenience: never fail the sweep for it


def _leaderboard(result: SweepResult, err) -> None:
    """The board of exactly the plan's finished runs: the study's runs/ folder read with the run set of those runs,
    so any other folder there (a stray run, a failed one) is left out, and named so in the board's manifest."""
    finished = [o.folder for o in result.outcomes.values() if o.ok]
    run_set = result.study / RUN_SET
    atomic_write_text(run_set, "# the runs of the plan that finished (vlbench sweep)\n" + "".join(
        f"{Path(f).resolve()}\n" for f in finished))
    if not finished:
        return
    from ..leaderboards.build import build_leaderboard  # lazy: the leaderboard stack (pandas, plots)
    from ..leaderboards.runset import Choice

    try:
        built = build_leaderboard([str((result.study / RUNS).resolve())], result.study / BOARD, plots=False,
                                  warn=lambda m: print(f"vlbench: warning: {m}", file=err),
                                  choice=Choice(run_set=str(run_set), allow_limited=True, keep_stray=True))
        result.leaderboard = result.study / BOARD
    except VlbenchError as exc:
        result.leaderboard_error = str(exc)
        return
    superseded = [s for s in built.manifest.get("superseded", []) if s.get("fully")]
    result.leaderboard_note = (
        f"{len(finished)} of the plan's {len(result.tasks)} run(s) finished and are on it"
        + (f"; the values of {len(superseded)} of them come from later runs of the plan with the same model, "
           "dataset and condition (build_manifest.json: superseded)" if superseded else ""))


def _summary(result: SweepResult, err) -> None:
    counts = {s: 0 for s in RunStatus}
    for o in result.outcomes.values():
        counts[o.status] += 1
    print(f"sweep {result.study}: {counts[RunStatus.DONE]} run(s) finished now, {counts[RunStatus.SKIPPED]} already "
          f"finished (skipped), {counts[RunStatus.FAILED]} failed"
          + (f", {counts[RunStatus.KILLED]} killed (their worker died)" if counts[RunStatus.KILLED] else "")
          + (f", {counts[RunStatus.CONFLICT]} in conflict (not run)" if counts[RunStatus.CONFLICT] else ""), file=err)
    for o in result.failed:
        print(f"  {o.status.value.upper()} {o.run_id} after {o.attempts} attempt(s): {o.error}\n"
              f"         log: {o.log}", file=err)
    if result.stale_board_removed:
        print(f"the study's leaderboard of an earlier plan was removed: it did not hold this plan's "
              f"{len(result.tasks)} run(s)", file=err)
    if result.leaderboard:
        print(f"leaderboard of the plan's runs: {result.leaderboard} ({result.leaderboard_note})", file=err)
    if result.leaderboard_error:
        print(f"leaderboard not built: {result.leaderboard_error}", file=err)
    if result.failed:
        print("fix the failed runs and run the same command again: finished runs are skipped, only the failed "
              "ones run", file=err)


__all__ = ["sweep", "SweepResult", "PlanError", "PLAN_FILE", "SWEEP_FILE", "RUN_SET", "BOARD", "RunOutcome",
           "RunStatus"]
