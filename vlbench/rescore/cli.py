"""``vlbench rescore RUN --as SUITE [--as SUITE ...]``: the command line of vlbench.rescore."""

from __future__ import annotations

from pathlib import Path

from ..runfolder import RESCORE_DIR
from . import format_table, rescore
from .registry import suites


def configure(p) -> None:
    names = list(suites())

    p.description = ("Score a finished run's cached embeddings as other suites do (no model is loaded): "
                     "writes RUN/rescore/<suite>.json beside results.json and prints a table.")
    p.add_argument("run", help="a finished run folder (vlbench run --out)")
    p.add_argument("--as", dest="suites", action="append", choices=names, required=True, metavar="SUITE",
                   help=f"a suite's convention, repeatable: {', '.join(names)}")
    p.add_argument("--cache-dir", default=None, help="the embedding cache, if not where the run kept it")
    p.add_argument("--condition", action="append", default=None,
                   help="score only this condition (repeatable; default: all of the run's conditions)")
    p.add_argument("--seed", type=int, default=0, help="seed of MMEB's sampled candidate lists (default 0)")


def main(args) -> int:
    docs = rescore(args.run, args.suites, cache_dir=args.cache_dir, seed=args.seed, conditions=args.condition)
    print(format_table(docs))
    for suite in docs:
        print(f"wrote {Path(args.run) / RESCORE_DIR / suite}.json")
    return 0
