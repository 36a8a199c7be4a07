"""``vlbench compare RUN_A RUN_B [RUN...]``: paired model comparisons (docs/compare.md)."""

from __future__ import annotations

import argparse
import os

from ..errors import OptionError
from . import report
from .engine import compare_runs
from .plan import CORRECTIONS, DEFAULT_CONDITIONS, MAX_RESAMPLES, TESTS


def configure(p: argparse.ArgumentParser) -> None:
    p.description = ("Compare runs of different models on the same dataset (same content hash and queries). By "
                     "default it answers the first question: is A better than B on clean data, and does A lose more "
                     "than B under each family of perturbations (total RSUM, i2t + t2i). Each row: the paired "
                     "difference A - B of a per-query metric with a paired bootstrap interval (95% with the default "
                     "--alpha 0.05) and a p-value corrected over every row printed (the family is stated under the "
                     "table). Per-condition detail: --conditions all. See docs/compare.md.")
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="run folders written by 'vlbench run' (two or more); a two-stage run (--rerank) is compared on "
                        "its final ranking, RUN@first names its first stage alone (RUN@final the final ranking)")
    p.add_argument("--conditions", default=DEFAULT_CONDITIONS, metavar="LIST",
                   help="comma-separated rows to compare: clean, a family (typos, lexical, distraction, word-order, "
                        "image-noise, ...: one robustness row, its conditions averaged per query), families (every "
                        "family), a condition name (a difference and a robustness row), all (clean and every "
                        f"condition). Default: {DEFAULT_CONDITIONS}")
    p.add_argument("--directions", default=None, metavar="LIST",
                   help="comma-separated: i2t, t2i, both (= i2t + t2i, RSUM only). Default: both for --metric rsum, "
                        "else i2t,t2i")
    p.add_argument("--metric", default="rsum", help="per-query column of per_query.csv.gz (default rsum: the "
                                                    "per-query sum of the Recall@k hits; also recall@1, map_at_r, ...)")
    p.add_argument("--model-name", action="append", default=None, metavar="NAME",
                   help="the name of each run's model in the table, once per RUN in order (default: the run's own "
                        "--model-name, else its model spec)")
    p.add_argument("--test", default="randomization", choices=TESTS,
                   help="p-value: paired sign-flip randomization (default), paired bootstrap, or the paired t-test")
    p.add_argument("--correction", default="holm", choices=CORRECTIONS,
                   help="family-wise correction over every row printed (default holm)")
    p.add_argument("--n-resamples", type=int, default=10000, metavar="N",
                   help=f"bootstrap and randomization resamples, 100 to {MAX_RESAMPLES:,} (default 10000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the resampling, 0 or more (default 0)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level, between 0 and 1 (default 0.05)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write comparison.json, comparison.csv and comparison.md into DIR")


def main(a: argparse.Namespace) -> int:
    if a.out and os.path.exists(a.out) and not os.path.isdir(a.out):
        raise OptionError("out", f"{{opt}} {a.out} exists and is not a folder", "give a new or existing folder")
    rec = compare_runs(a.runs, metric=a.metric, test=a.test, correction=a.correction, n_resamples=a.n_resamples,
                       seed=a.seed, alpha=a.alpha, conditions=a.conditions, directions=a.directions,
                       names=a.model_name)
    print(report.to_markdown(rec), end="")
    if a.out:
        for path in report.write(rec, a.out):
            print(f"wrote {path}")
    return 0
