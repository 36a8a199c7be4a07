"""``vlbench explain RUN``: the command line of vlbench.explain (the failure browser)."""

from __future__ import annotations

import sys

from . import explain


def configure(p) -> None:
    p.description = ("Write a static HTML page (one file, opens offline) of the queries a run's perturbations flip "
                     "at k=1: captions with the edit marked, images retrieved before and after, and the ranks.")
    p.add_argument("run", help="a finished run folder (vlbench run --out)")
    p.add_argument("--out", default=None, help="the page to write (default: RUN/explain.html)")
    p.add_argument("--per-perturbation", type=int, default=5, metavar="N",
                   help="queries shown per condition: hit->miss first, then miss->hit (default 5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample of flipped queries (default 0)")
    p.add_argument("--images-dir", default=None, metavar="DIR",
                   help="the folder of the run's images, if they are no longer where the dataset says")
    p.add_argument("--data-dir", default=None, metavar="DIR", help="the datasets folder the run used (--data-dir)")
    p.add_argument("--dataset", default=None, metavar="SPEC",
                   help="the run's dataset spec, if it cannot be found from results.json (e.g. custom:set.jsonl)")
    p.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="the cache that holds the run's perturbed captions (default: the run's own)")
    p.add_argument("--thumb-size", type=int, default=96, metavar="PX",
                   help="longer side of the thumbnails in pixels (query images 1.5 times that; default 96)")


def main(args) -> int:
    path = explain(args.run, args.out, per_perturbation=args.per_perturbation, seed=args.seed,
                   images_dir=args.images_dir, data_dir=args.data_dir, dataset=args.dataset,
                   cache_dir=args.cache_dir, thumb_size=args.thumb_size,
                   log=lambda m: print(m, file=sys.stderr, flush=True))
    print(path)
    return 0
