"""``vlbench reproduce hendriksen2024``: run what Tables 5.2-5.4 need and compare with the published values."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vlbench.errors import VlbenchError
from vlbench.runfolder import RESULTS


def _pairs(values: list[str], what: str) -> dict:
    out = {}
    for v in values or []:
        key, sep, spec = v.partition("=")
        if not sep or not key.strip() or not spec.strip():
            raise VlbenchError(f"--{what} {v!r} is not KEY=SPEC", f"e.g. --{what} clip=clip:/path/to/weights")
        out[key.strip()] = spec.strip()
    return out


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Run the 4 models x 4 datasets x 14 conditions of the chapter's Tables 5.2-5.4 under its "
                          "protocol (hendriksen2024), resuming through the cache and existing run folders, and write "
                          "the tables beside the published values with a reproduction verdict (5% relative). "
                          "See docs/reproducing.md.")
    parser.add_argument("--out", default=None, help="folder for the runs and the tables (reused to resume); "
                                                    "required unless --plan-only")
    parser.add_argument("--also-standard", action="store_true", help="also run vlbench's standard protocol")
    parser.add_argument("--model", action="append", default=[], metavar="KEY=SPEC",
                        help="replace a model (align, altclip, clip, groupvit), e.g. clip=clip:/weights/clip")
    parser.add_argument("--dataset", action="append", default=[], metavar="KEY=SPEC",
                        help="replace a dataset (coco, coco-fg, flickr30k, flickr30k-fg), e.g. coco=custom:m.jsonl")
    parser.add_argument("--relevance", default=None, metavar="MODEL",
                        help="fixed relevance model for DCG (default clip:openai/clip-vit-base-patch32)")
    parser.add_argument("--perturb", default="all", help="perturbations (default all 13)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--device", default=None)
    parser.add_argument("--bootstrap", type=int, default=1000, dest="n_boot")
    parser.add_argument("--allow-partial-gallery", action="store_true",
                        help="accept image folders smaller than the chapter's t2i gallery (Flickr30k 31,783, COCO "
                             "val2014 40,504 images); the protocol label then names the size, e.g. "
                             "hendriksen2024[gallery=5000]")
    parser.add_argument("--executor", default="inline", metavar="NAME",
                        help="where the runs execute, as for vlbench sweep: inline (default: in this process, one "
                             "after another), local worker processes, slurm, ray, or an executor plug-in (vlbench "
                             "ls executors; docs/scale.md)")
    parser.add_argument("--workers", type=int, default=None, metavar="N", help="--executor local: worker processes")
    parser.add_argument("--retries", type=int, default=0, metavar="N", help="retry a failed run N more times")
    parser.add_argument("--plan-only", action="store_true",
                        help="check what every run needs (all at once), print the plan and stop; exit 2 when "
                             "something is missing")


def main(args) -> int:
    from . import run  # lazy: vlbench --help imports this module; keep it light

    models, datasets = _pairs(args.model, "model"), _pairs(args.dataset, "dataset")

    def log(m):
        print(m, file=sys.stderr, flush=True)

    kind = "cpu" if args.device == "cpu" else "gpu"

    # lazy: vlbench --help imports this module; keep it light
    from .plan import check_perturb, problems, raise_if_missing

    check_perturb(args.perturb)  # an unknown perturbation is refused before anything else
    if args.plan_only:
        out = Path(args.out) if args.out else None
        jobs = run.plan(models, datasets, args.also_standard)
        print(run.needs(jobs, out, kind, relevance=args.relevance, perturb=args.perturb, data_dir=args.data_dir))
        done = (lambda j: (j.folder(out) / RESULTS).is_file()) if out else None
        found = problems(jobs, out, data_dir=args.data_dir, cache_dir=args.cache_dir, relevance=args.relevance,
                         perturb=args.perturb, allow_partial_gallery=args.allow_partial_gallery, done=done)
        raise_if_missing(found, sum(not (done and done(j)) for j in jobs))
        print("every run has what it needs")
        return 0
    if not args.out:
        raise VlbenchError("vlbench reproduce needs --out (the folder for the runs and the tables)",
                           "e.g. --out repro; --plan-only checks without it")
    kw = {"perturb": args.perturb, "data_dir": args.data_dir, "cache_dir": args.cache_dir, "device": args.device,
          "n_boot": args.n_boot, "quiet": True, "allow_partial_gallery": args.allow_partial_gallery}
    if args.relevance:
        kw["relevance"] = args.relevance
    summary = run.reproduce(args.out, models=models, datasets=datasets, also_standard=args.also_standard, log=log,
                            device_kind=kind, executor=args.executor, workers=args.workers, retries=args.retries,
                            **kw)
    for protocol in summary:
        print(f"{args.out}/{protocol}/table_5_2.md, table_5_3.md, table_5_4.md, comparison.json")
    return 0
