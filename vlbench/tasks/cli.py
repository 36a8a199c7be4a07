"""The command-line side of the choice tasks: ``vlbench run --task order|sugarcrepe`` and ``vlbench ls tasks``.

Why an option of ``vlbench run`` rather than a ``vlbench task`` sub-command: a choice task is a run like a
retrieval run (a model, captions, images, the embedding cache, one run folder with results.json, the same
leaderboard), only scored differently; sharing the command keeps every option (--out, --cache-dir,
--device, --precision, --model-name, --config run.toml) the same and documented once.
"""

from __future__ import annotations

from ..errors import VlbenchError
from ..perturbations.cli import parse_params
from ..pipeline.run_options import given_fields
from .registry import get_task, tasks
from .run import SHARED_OPTIONS, TASKS, TaskConfig, refuse_retrieval_options, run_task


def print_tasks() -> None:
    print("tasks (vlbench run --task NAME):")
    print(f"  {'retrieval':<34} image-text retrieval in both directions (the default)")
    for name, desc in TASKS.items():
        print(f"  {name:<34} {desc}")
        task = tasks()[name]
        for label, value in (("size", task.size), ("licence", task.licence), ("citation", task.citation)):
            if value:
                print(f"  {'':<34}   {label}: {value}")


def images_dir_tasks() -> str:
    """The registered tasks that read ``--images-dir``, as a sentence lists them ("a, b or c")."""
    names = [n for n, t in tasks().items() if t.images_dir]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def run_task_from_args(args):
    """``vlbench run --task NAME ...``: a retrieval-only option given (on the command line or in the --config
    file, whatever its value) is an error naming it, never silently ignored. Returns the run's result (the
    command compares it with the published scores: vlbench.published reads the sets' declarations)."""

    refuse_retrieval_options(args.task, given_fields(args))
    if args.images_dir is not None and not get_task(args.task).images_dir:
        raise VlbenchError(f"--images-dir applies to --task {images_dir_tasks()}, not to --task {args.task}",
                           "leave it out")
    shared = {opt: getattr(args, opt) for opt in SHARED_OPTIONS}
    shared["perturb_params"] = parse_params(shared["perturb_params"]) if shared["perturb_params"] else {}
    cfg = TaskConfig(task=args.task, model=args.model, dataset=args.dataset, images_dir=args.images_dir,
                     perturb_options=getattr(args, "perturb_options", None), **shared)
    res = run_task(cfg)
    from ..pipeline.report import print_run_result  # lazy: vlbench ls imports this module; keep it light

    print_run_result(res, as_json=args.json, quiet=args.quiet)
    return res
