"""Where each run of a plan stands, read from the study folder without running anything (``--plan-only``, and the
skip rule of a sweep):

* ``finished``: its folder holds a results.json that ``vlbench.run``'s own resume check accepts: the record's
  options equal to the plan's, the dataset's content hash the same, every run file the one whose hash the record
  holds (:func:`vlbench.pipeline.rerun.finished_run`);
* ``conflict``: its folder holds a finished run that check refuses (other options, files changed): the sweep
  cannot resume it and says why (remove the folder to run it again);
* ``partial``: a run started there and did not finish (run files or a log, no results.json): it resumes, the
  embedding cache holding its finished batches;
* ``todo``: nothing yet.

For runs not finished, what they still need (the preflight's file checks of weights and data: nothing loaded)
and a rough cost from the stage times of earlier runs on this machine (:mod:`vlbench.sweep.history`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import VlbenchError
from ..runfolder import LOCK, PER_QUERY, RESULTS, TABLE
from . import history
from .worker import Task

FINISHED, CONFLICT, PARTIAL, TODO = "finished", "conflict", "partial", "todo"
_TRACES = (LOCK, PER_QUERY, TABLE)


@dataclass
class RunState:
    task: Task
    state: str
    why: str = ""  # conflict: the reason; finished: the run id
    needs: list[str] = field(default_factory=list)
    cached: bool = False
    seconds: float | None = None


def _config(task: Task):
    from ..pipeline import presets  # lazy: the run's own option handling
    from ..pipeline.run_config import RunConfig

    cfg = RunConfig(**{**task.kwargs, "out": task.folder, "resume": True, "quiet": True})
    return presets.resolve(cfg)


def state_of(task: Task) -> tuple[str, str]:
    """(state, why) of one run of the plan."""
    folder = Path(task.folder)
    if (folder / RESULTS).exists():
        from ..pipeline.rerun import finished_run  # lazy: the run's own resume check
        from .choice import finished_task, is_choice

        try:
            if is_choice(task.kwargs):  # a choice set: the same rule, for a run that has no resume of its own
                rid = finished_task(task.kwargs, task.folder)
                if rid is not None:
                    return FINISHED, rid
            else:
                done = finished_run(_config(task), lambda m: None)
                if done is not None:
                    return FINISHED, done[1].run_id
        except VlbenchError as exc:
            return CONFLICT, exc.message
    if any((folder / name).exists() for name in _TRACES) or Path(task.log).is_file():
        return PARTIAL, ""
    return TODO, ""


def states(tasks: list[Task]) -> list[RunState]:
    return [RunState(t, *state_of(t)) for t in tasks]


def _conditions(kw: dict) -> int:
    from .. import perturbations  # lazy: the perturbation registry

    n = 1
    if kw.get("perturb"):
        try:
            n += len(perturbations.resolve(kw["perturb"] if isinstance(kw["perturb"], str)
                                           else ",".join(kw["perturb"])))
        except VlbenchError:
            pass
    images = kw.get("perturb_images")
    if images:
        n += len(images if isinstance(images, list) else str(images).split(","))
    return n


def look_ahead(rows: list[RunState], cache_dir=None) -> None:
    """Fill in what each unfinished run needs, whether its model has cached vectors, and its rough cost."""
    from ..datasets.core import limited  # lazy: the preflight's checks and the loaders
    from ..pipeline.preflight import check_dataset, check_model

    models: dict[tuple, list[str]] = {}
    datasets: dict[tuple, tuple] = {}
    cached = history.cached_models(cache_dir)
    known = history.entries(cache_dir)
    for row in rows:
        if row.state in (FINISHED, CONFLICT):
            continue
        kw = row.task.kwargs
        mkey = (kw["model"], bool(kw.get("trust_remote_code")))
        if kw.get("task") is not None:  # a choice set names its data through its task: its model is checked here
            if mkey not in models:
                models[mkey] = [f"weights {p.item}: {p.what} (fix: {p.fix})" for p in check_model(*mkey)]
            row.needs, row.cached = list(models[mkey]), kw["model"] in cached
            continue
        if mkey not in models:
            models[mkey] = [f"weights {p.item}: {p.what} (fix: {p.fix})" for p in check_model(*mkey)]
        dkey = (kw["dataset"], kw.get("data_dir"), kw.get("limit"))
        if dkey not in datasets:
            ds, found, _ = check_dataset(kw["dataset"], data_dir=kw.get("data_dir"), limit=kw.get("limit"))
            size = None
            if ds is not None:
                cut = limited(ds, kw.get("limit"))
                size = (len(cut.gallery_images), cut.n_captions)
            datasets[dkey] = ([f"data {p.item}: {p.what} (fix: {p.fix})" for p in found], size)
        row.needs = models[mkey] + datasets[dkey][0]
        row.cached = kw["model"] in cached
        size = datasets[dkey][1]
        if size is not None:
            row.seconds = history.estimate(known, kw["model"], size[0], size[1], _conditions(kw))


def columns(header: tuple, rows: list) -> list[str]:
    """A plain-text table: each column as wide as its widest cell, two spaces apart, the last never padded."""
    cells = [[str(c) for c in header]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return ["  ".join([c.ljust(w) for c, w in zip(r[:-1], widths)] + [r[-1]]).rstrip() for r in cells]


def grid_lines(rows: list[RunState]) -> list[str]:
    """The grid as ``--plan-only`` prints it: one line per run, then the totals."""
    table = []
    for r in rows:
        kw = r.task.kwargs
        what = {FINISHED: "finished (hashes verified)", CONFLICT: "conflict", PARTIAL: "partial (resumes)",
                TODO: "to do"}[r.state]
        need = "-" if r.state in (FINISHED, CONFLICT) else ("; ".join(r.needs) if r.needs else "ready")
        cost = "-" if r.state in (FINISHED, CONFLICT) else history.fmt_seconds(r.seconds)
        table.append((r.task.run_id, kw.get("model_name"), kw.get("dataset_name"), what,
                      "yes" if r.cached else "no", cost, need if r.state != CONFLICT else r.why))
    lines = columns(("run", "model", "dataset", "state", "cached", "est. cost", "needs"), table)
    counts = {s: sum(r.state == s for r in rows) for s in (FINISHED, PARTIAL, TODO, CONFLICT)}
    todo = [r for r in rows if r.state in (PARTIAL, TODO)]
    known = [r.seconds for r in todo if r.seconds is not None]
    total = history.fmt_seconds(sum(known)) if known else "?"
    unknown = len(todo) - len(known)
    lines.append(f"{len(rows)} run(s): {counts[FINISHED]} finished, {counts[PARTIAL]} partial, {counts[TODO]} to do"
                 + (f", {counts[CONFLICT]} in conflict" if counts[CONFLICT] else "")
                 + f"; estimated cost of the rest: {total}"
                 + (f" (+ {unknown} run(s) of models never run on this machine)" if unknown and known else
                    " (no earlier run of these models on this machine)" if unknown else "")
                 + f"; {sum(bool(r.needs) for r in todo)} run(s) miss something they need")
    return lines


def as_json(rows: list[RunState]) -> list[dict]:
    return [{"run_id": r.task.run_id, "folder": r.task.folder, "log": r.task.log, "state": r.state, "why": r.why,
             "needs": r.needs, "cached": r.cached, "estimated_seconds": r.seconds,
             "model": r.task.kwargs.get("model_name"), "dataset": r.task.kwargs.get("dataset_name")}
            for r in rows]

