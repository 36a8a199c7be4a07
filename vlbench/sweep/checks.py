"""A plan checked whole before its first run: every cell of the grid (each model, dataset, perturbation, image
corruption, shortcut probe, choice task and option value) is checked as the run that uses it will check it, so
a typo in the last condition fails in seconds instead of after the clean runs ran; and the grid's size is
bounded before anything is expanded (:data:`MAX_RUNS`), so ``--plan-only`` on a 10^6-run grid answers at once.

The checks are those of the runs themselves (``vlbench.run``'s :func:`~vlbench.pipeline.run_config.validate`,
the perturbation registry's :func:`~vlbench.perturbations.resolve`, the image corruptions' and shortcut probes'
spec parsers, the registries of models, datasets and tasks), applied once per distinct value: the work is
O(cells), not O(runs), apart from the final check of each distinct run's options.
"""

from __future__ import annotations

import itertools

from ..errors import OptionError, VlbenchError
from ..shortcuts.conditions import parse_probes
from ..tasks.conditions import plan_conditions
from ..tasks.registry import get_task
from ..tasks.run import SHARED_OPTIONS, TaskConfig
from ..util.io import sha256_json

#: the most runs one plan may expand to: a bigger grid is refused before it is expanded (split it in several
#: plans, or narrow it with exclude); a sweep of this many runs is already days of work on most machines
MAX_RUNS = 20_000


class PlanError(VlbenchError):
    """A bad plan file: the message names the file and the key, the hint the fix."""


def count_runs(plan, limit: int = MAX_RUNS) -> int:
    """The plan's number of runs, counted without building the grid; above ``limit`` the count stops at
    ``limit + 1`` (enough to refuse it)."""
    total = len(plan.models) * len(plan.datasets) * len(plan.conditions) * len(plan.seeds)
    if not plan.exclude or total <= limit:
        return total if not plan.exclude else sum(1 for _ in plan.iter_runs())
    return sum(1 for _ in itertools.islice(plan.iter_runs(), limit + 1))


def check_size(plan, limit: int = MAX_RUNS) -> int:
    """The plan's number of runs; a PlanError naming it and the bound when it is over ``limit``."""
    n = count_runs(plan, limit)
    if n > limit:
        size = len(plan.models) * len(plan.datasets) * len(plan.conditions) * len(plan.seeds)
        raise PlanError(f"plan {plan.path}: its grid has {size:,} runs ({len(plan.models)} model(s) x "
                        f"{len(plan.datasets)} dataset(s) x {len(plan.conditions)} condition(s) x {len(plan.seeds)} "
                        f"seed(s){', before exclusions' if plan.exclude else ''}), over the bound of {limit:,} runs "
                        "a plan may have", "split the study into several plans (one per model or dataset, each with "
                        "its own study folder), or narrow the grid with exclude = [...]")
    return n


def _cell_error(plan, where: str, exc: Exception):
    if isinstance(exc, OptionError):
        message, hint = exc.render(None)
    elif isinstance(exc, VlbenchError):
        message, hint = exc.message, exc.hint
    else:
        message, hint = str(exc), "check the value"
    return PlanError(f"plan {plan.path}: {where}: {message}", hint)


def check_cells(plan) -> None:
    """Each model, dataset and condition of the plan on its own (its names and specs), before any run: a
    PlanError naming the plan, the entry and the fault."""
    from ..models.adapter import parse_model_spec  # lazy: the registries and spec parsers
    from ..registry import close_matches, datasets, models

    for m in plan.models:
        name, _ = parse_model_spec(m.spec)
        if name not in models:
            near = close_matches(name, models.names())
            raise _cell_error(plan, f"models.{m.name}", VlbenchError(
                f"unknown model family {name!r} (spec {m.spec!r})",
                (f"did you mean {near[0]}? " if near else "") + "vlbench ls models lists them"))
    for d in plan.datasets:
        spec = d.spec
        if spec is None or spec.startswith(("custom:", "hf:")) or spec.endswith(".jsonl"):
            continue  # a choice set names its data through its task; files are checked by --plan-only's look-ahead
        name = spec.partition("?")[0]
        task = {**plan.options, **d.options}.get("task")
        if task in (None, "retrieval") and name not in datasets:
            near = close_matches(name, datasets.names())
            raise _cell_error(plan, f"datasets.{d.name}", VlbenchError(
                f"unknown dataset {name!r}", (f"did you mean {near[0]}? " if near else "") +
                "vlbench ls datasets lists them (or custom:<manifest.jsonl>, hf:ORG/NAME)"))
    for where, entry in [("options", None), *((f"conditions.{c.name}", c) for c in plan.conditions),
                         *((f"models.{m.name}", m) for m in plan.models),
                         *((f"datasets.{d.name}", d) for d in plan.datasets)]:
        opts = plan.options if entry is None else entry.options
        try:
            _check_specs(opts)
        except (VlbenchError, ValueError, TypeError) as exc:
            raise _cell_error(plan, where, exc) from None


def _check_specs(opts: dict) -> None:
    """The specs of one entry's options that name registered things: perturbations, image corruptions, shortcut
    probes, the task."""
    from .. import perturbations  # lazy: the registries
    from ..imageperturb.conditions import image_variants

    perturb = opts.get("perturb")
    if perturb:
        perturbations.resolve(",".join(perturb) if isinstance(perturb, (list, tuple)) else perturb)
    images = opts.get("perturb_images")
    if images:
        image_variants(",".join(images) if isinstance(images, (list, tuple)) else images, 0)
    shortcuts = opts.get("shortcuts")
    if shortcuts:
        parse_probes(",".join(shortcuts) if isinstance(shortcuts, (list, tuple)) else shortcuts)
    task = opts.get("task")
    if task is not None and task != "retrieval":
        if not isinstance(task, str):
            raise VlbenchError(f"task must be a task's name, got {task!r}", 'e.g. task = "winoground"')
        get_task(task)


def check_runs(plan, tasks: list) -> None:
    """Every distinct run's options, checked as the run checks them (``vlbench.run``'s validate, a choice task's
    own checks), before any run starts; runs that differ only in their folder and names are checked once."""
    seen: set[str] = set()
    for t in tasks:
        key = sha256_json({k: v for k, v in t.kwargs.items() if k not in ("model_name", "dataset_name")})
        if key in seen:
            continue
        seen.add(key)
        try:
            check_run(t.kwargs, t.folder)
        except (VlbenchError, TypeError, ValueError) as exc:
            raise _cell_error(plan, f"run {t.run_id}", exc) from None


def check_run(kwargs: dict, folder: str) -> None:
    """One run's options (``kwargs`` of :func:`vlbench.run`, or of a choice task when they name one)."""
    from ..pipeline.run_config import RunConfig, validate  # lazy: the pipeline's checks

    if kwargs.get("task") not in (None, "retrieval"):
        cfg = TaskConfig(**{**kwargs, "out": folder})  # a retrieval-only option is refused, named
        validate(RunConfig(model=cfg.model, dataset=cfg.dataset or cfg.task,
                           **{n: getattr(cfg, n) for n in SHARED_OPTIONS}))
        plan_conditions(cfg)
        return
    kw = {k: v for k, v in kwargs.items() if k != "task"}
    validate(RunConfig(**{**kw, "out": folder}))
