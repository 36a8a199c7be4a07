"""The command-line side of the choice tasks: ``vlbench run --task order|sugarcrepe`` and ``vlbench ls tasks``.

Why an option of ``vlbench run`` rather than a ``vlbench task`` sub-command: a choice task is a run like a
retrieval run (a model, captions, images, the embedding cache, one run folder with results.json, the same
leaderboard), only scored differently; sharing the command keeps every option (--out, --cache-dir,
--device, --precision, --model-name, --config run.toml) the same and documented once.
"""

from __future__ import annotations


from ..errors import VlbenchError

#: options of 'vlbench run' (by RunConfig field) that a choice task does not use, with their defaults
#: (given: refused)
_RETRIEVAL_ONLY = {"perturb": None, "perturb_params": [], "gallery": "test", "extra_positives": None,
                   "graded": (), "mia_score": "rsum"}


def print_tasks() -> None:
    from .run import TASKS

    print("tasks (vlbench run --task NAME):")
    print(f"  {'retrieval':<34} image-text retrieval in both directions (the default)")
    for name, desc in TASKS.items():
        print(f"  {name:<34} {desc}")


def run_task_from_args(args) -> int:
    from ..pipeline.run_options import flag_of
    from .run import SHARED_OPTIONS, TaskConfig, run_task

    for opt, default in _RETRIEVAL_ONLY.items():
        if getattr(args, opt) != default:
            raise VlbenchError(f"{flag_of(opt)} applies to retrieval runs, not to --task {args.task}",
                               "leave it out (a choice task scores each item's candidates against its image)")
    for opt in ("perturb_images", "shortcuts", "mce_reference"):
        if getattr(args, opt, None):
            raise VlbenchError(f"{flag_of(opt)} applies to retrieval runs, not to --task {args.task}",
                               "leave it out")
    cfg = TaskConfig(task=args.task, model=args.model, dataset=args.dataset, images_dir=args.images_dir,
                     **{opt: getattr(args, opt) for opt in SHARED_OPTIONS})
    res = run_task(cfg)
    from ..pipeline.report import print_run_result

    print_run_result(res, as_json=args.json, quiet=args.quiet)
    return 0
