"""Choice sets in a sweep: a plan run whose options name a ``task`` (``[datasets] wino = { task = "winoground" }``)
is a choice-task run (:func:`vlbench.tasks.run.run_task`) in its own folder under the study, beside the
retrieval runs, and the study's leaderboard lists it (in the choice-task table).

A choice task has no ``resume`` of its own, so the sweep's skip rule is here (:func:`finished_task`): the run's
folder holds a results.json that is a readable vlbench record of that task, model and dataset name, its files
the ones it wrote (their hashes), and recorded with the same number options as the run the plan asks for: the
folder's name already hashes every option that changes a number, and the device kind (``cpu``, ``cuda``,
``mps``), the precision and, on an accelerator, the batch size are compared with the record's own, as
``--resume`` compares them for a retrieval run (vlbench/pipeline/rerun.py).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import VlbenchError
from ..pipeline.rerun import device_kind, option_differences
from ..runfolder import RESULTS, check_run_files, is_finished


def is_choice(kwargs: dict) -> bool:
    """Whether a planned run's options name a choice task."""
    return kwargs.get("task") not in (None, "retrieval")


def _differences(kwargs: dict, rec) -> list[str]:
    task = (rec.other.get("task") or {}).get("name")
    if task != kwargs["task"]:
        return [f"task {task!r}, not {kwargs['task']!r}"]
    if rec.model.spec != kwargs["model"]:
        return [f"model {rec.model.spec!r}, not {kwargs['model']!r}"]
    want_name = kwargs.get("dataset_name")
    if want_name and rec.dataset.name != want_name:
        return [f"dataset {rec.dataset.name!r}, not {want_name!r}"]
    said = rec.settings.get("device")
    kind = device_kind(kwargs.get("device"))
    stored = {"device": device_kind(said) if said not in (None, "not loaded") else None,
              "precision": rec.settings.get("precision"), "seed": rec.settings.get("seed")}
    want = {"device": kind, "precision": kwargs.get("precision", "fp32"), "seed": kwargs.get("seed", 0)}
    if kind != "cpu":
        stored["batch_size"], want["batch_size"] = rec.settings.get("batch_size"), kwargs.get("batch_size", 64)
    return option_differences(stored, want)


def finished_task(kwargs: dict, folder: str) -> str | None:
    """The run id of the finished choice-task run in ``folder`` that is this run (None: nothing finished there);
    a VlbenchError saying what differs when the finished run there is another one."""
    from ..results import RunRecord, SchemaTooNew, UnreadableResults  # lazy: the typed record

    if not is_finished(folder):
        return None
    try:
        rec = RunRecord.load(Path(folder))
    except (UnreadableResults, SchemaTooNew) as exc:
        raise VlbenchError(f"{Path(folder) / RESULTS} is not a readable vlbench run record "
                           f"({getattr(exc, 'reason', None) or exc})", "remove that folder to run it again") from None
    diff = _differences(kwargs, rec)
    if diff:
        raise VlbenchError(f"{folder} holds a finished run with {'; '.join(diff[:5])}: a finished run is kept only "
                           "when every option that changes a number is the same",
                           "remove that folder to run it again, or give the plan another option")
    try:
        check_run_files(folder, rec.other)
    except VlbenchError as exc:
        raise VlbenchError(f"the run in {folder} cannot be trusted as finished: {exc.message}",
                           "remove that folder to run it again") from None
    return rec.run_id


def run_choice(kwargs: dict) -> None:
    """Run one planned choice-task run into ``kwargs["out"]``, unless the finished run there is this one (it is
    kept as it is, as ``resume`` keeps a retrieval run); another finished run there is refused."""
    from ..tasks.run import run_task  # lazy: the tasks' code, where a run happens

    kw = {k: v for k, v in kwargs.items() if k not in ("resume", "overwrite")}
    if finished_task(kw, kw["out"]) is not None:
        print(f"{kw['out']} already holds this finished {kw['task']} run: kept as it is (nothing recomputed)")
        return
    run_task(**kw)
