"""Tiny sweeps for the executor tests (Slurm through submitit, Ray): tasks of tiny saved models on tiny
manifests, and the numbers of a finished run, so an executor's runs can be compared with the same runs made one
by one with ``vlbench.run``."""

from __future__ import annotations

import json
from pathlib import Path

#: run options that keep every run tiny and deterministic (no sampling-dependent validity encoder)
RUN_KW = dict(quiet=True, num_workers=0, n_boot=20, validity="off")
#: the conditions of the grid: the clean set alone, and the clean set with a caption perturbation
CONDITIONS = {"clean": {}, "swap": {"perturb": "char-swap"}}


def make_tasks(root: Path, models: dict[str, str], manifests: dict[str, Path], *, cache: Path,
               conditions: dict[str, dict] | None = None, needs: dict | None = None) -> list:
    """One :class:`vlbench.sweep.worker.Task` per model (name -> ``family:folder``) x dataset x condition, its
    run folder under ``root/runs`` and its log beside it."""
    from vlbench.sweep.worker import Task

    tasks = []
    for m, spec in models.items():
        for d, man in manifests.items():
            for c, extra in (conditions or CONDITIONS).items():
                run_id = f"{m}--{d}--{c}"
                kwargs = dict(model=spec, dataset=f"custom:{man}", cache_dir=str(cache), **RUN_KW,
                              **extra)
                tasks.append(Task(run_id=run_id, folder=str(root / "runs" / run_id), kwargs=kwargs,
                                  needs=dict(needs or {}), log=str(root / "runs" / f"{run_id}.log")))
    return tasks


def numbers(folder) -> dict:
    """What a run measured, without ids, times or hardware: its metric records, deltas, bootstrap intervals,
    conditions and the dataset record."""
    doc = json.loads((Path(folder) / "results.json").read_text())
    return {"results": doc["results"], "deltas": doc["deltas"], "bootstrap": doc["bootstrap"],
            "conditions": doc["conditions"], "dataset": doc["dataset"]}


def one_by_one(tasks, root: Path) -> dict:
    """The same runs made one by one with vlbench.run (in this process), each into ``root/<run_id>``: run_id ->
    numbers."""
    import vlbench

    got = {}
    for t in tasks:
        out = root / t.run_id
        vlbench.run(**{**t.kwargs, "out": str(out)})
        got[t.run_id] = numbers(out)
    return got
