"""``vlbench compare RUN_A RUN_B [RUN...]``: paired model comparisons (docs/compare.md)."""

from __future__ import annotations

import argparse

from . import report
from .engine import CORRECTIONS, TESTS, compare_runs


def configure(p: argparse.ArgumentParser) -> None:
    p.description = ("Compare runs of different models on the same dataset (same content hash and queries): "
                     "for each condition and direction, the paired difference A - B of a per-query metric with "
                     "a paired bootstrap interval (95%% with the default --alpha 0.05) and a p-value corrected over "
                     "all comparisons, and the robustness difference (A's change under a perturbation minus B's). See "
                     "docs/compare.md.")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folders written by 'vlbench run' (two or more)")
    p.add_argument("--metric", default="rsum", help="per-query column of per_query.csv.gz (default rsum: the "
                                                    "per-query sum of the Recall@k hits; also recall@1, map_at_r, ...)")
    p.add_argument("--test", default="randomization", choices=TESTS,
                   help="p-value: paired sign-flip randomization (default), paired bootstrap, or the paired t-test")
    p.add_argument("--correction", default="holm", choices=CORRECTIONS,
                   help="family-wise correction over every comparison (default holm)")
    p.add_argument("--n-resamples", type=int, default=10000, metavar="N",
                   help="bootstrap and randomization resamples (default 10000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the resampling (default 0)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write comparison.json, comparison.csv and comparison.md into DIR")


def main(a: argparse.Namespace) -> int:
    rec = compare_runs(a.runs, metric=a.metric, test=a.test, correction=a.correction, n_resamples=a.n_resamples,
                       seed=a.seed, alpha=a.alpha)
    print(report.to_markdown(rec), end="")
    if a.out:
        for path in report.write(rec, a.out):
            print(f"wrote {path}")
    return 0
