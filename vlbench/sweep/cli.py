"""``vlbench sweep PLAN.toml`` / ``vlbench sweep --suite NAME``: a study's grid of runs (docs/scale.md).
Imports nothing heavy until a command runs."""

from __future__ import annotations

import argparse

from ..errors import VlbenchError


def configure(p: argparse.ArgumentParser) -> None:
    p.description = ("Run a study's grid (models x datasets x conditions x seeds, minus exclusions) from a TOML plan "
                     "or a named suite: finished runs (proven by their hashes) are skipped, partial ones resume, a "
                     "failed run does not stop the others; then the study's leaderboard is built from exactly the "
                     "plan's runs. Exit status 0 only when every run finished. See docs/scale.md.")
    p.add_argument("plan", nargs="?", metavar="PLAN.toml", help="the plan file (or --suite)")
    p.add_argument("--suite", default=None, metavar="NAME", help="a registered suite instead of a plan file "
                                                                 "(vlbench ls suites): lite, a study's grid, ...")
    p.add_argument("--model", action="append", default=[], metavar="NAME=SPEC",
                   help="--suite: a model of the grid (repeatable; given ones replace the suite's models)")
    p.add_argument("--dataset", action="append", default=[], metavar="NAME=SPEC",
                   help="--suite: a dataset of the grid (repeatable; given ones replace the suite's datasets)")
    p.add_argument("--out", default=None, metavar="STUDY_DIR", help="the study folder (default: the plan's "
                                                                    "[study] out)")
    p.add_argument("--plan-only", action="store_true",
                   help="print the grid (finished, partial, to do, cached, what each run needs, estimated cost) "
                        "and stop")
    p.add_argument("--executor", default="local", metavar="NAME",
                   help="where the runs execute: local processes (default), inline (this process), slurm (a Slurm "
                        "job array through submitit), ray (a Ray cluster), or an executor plug-in (vlbench ls "
                        "executors)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="local: worker processes (default: one per visible GPU, else one per 4 CPU cores, at most 4)")
    p.add_argument("--retries", type=int, default=0, metavar="N", help="retry a failed run N more times")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="an option of the executor (e.g. partition=gpu for slurm, address=auto for ray); repeatable")
    p.add_argument("--no-leaderboard", action="store_true", help="do not build the study's leaderboard at the end")


def _pairs(values: list[str], flag: str) -> dict:
    out = {}
    for v in values:
        key, sep, spec = v.partition("=")
        if not sep or not key.strip() or not spec.strip():
            raise VlbenchError(f"{flag} {v!r} is not NAME=VALUE", f"e.g. {flag} clip=clip:openai/clip-vit-base-patch32"
                               if flag != "--option" else "e.g. --option partition=gpu")
        out[key.strip()] = spec.strip()
    return out


def _value(text: str):
    """An executor option's value: an integer, a number, true/false, else the text."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def main(args) -> int:
    from .study import sweep  # lazy: vlbench --help imports this module; keep it light
    from .suites import suite

    if bool(args.plan) == bool(args.suite):
        raise VlbenchError("vlbench sweep needs a plan file or --suite NAME (one of them)",
                           "e.g. vlbench sweep plan.toml, or vlbench sweep --suite lite --out studies/lite")
    models, datasets = _pairs(args.model, "--model"), _pairs(args.dataset, "--dataset")
    if args.plan and (models or datasets):
        raise VlbenchError("--model and --dataset apply to --suite; a plan file names its own",
                           "edit the plan's [models] / [datasets], or use --suite")
    plan = suite(args.suite).plan(models, datasets) if args.suite else args.plan
    options = {k: _value(v) for k, v in _pairs(args.option, "--option").items()}
    result = sweep(plan, args.out, executor=args.executor, workers=args.workers, retries=args.retries,
                   plan_only=args.plan_only, executor_options=options, leaderboard=not args.no_leaderboard)
    if args.plan_only:
        return 0
    return 0 if result.ok else 1
