"""``vlbench analyze RUN [RUN...]``: which captions make a model brittle (docs/analyze.md).

Per query, the caption's granularity features joined to its change under each condition; per feature, the
change by quantile bin with cluster-bootstrap intervals; a regression of the change on the features with
cluster-robust intervals (queries of one image are one cluster); for runs of one model on the fine-grained
and original captions of the same images, the paired per-image difference. Correlation, not cause.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import VlbenchError
from . import report
from .join import OUTCOMES, feature_names, join_run


def configure(p: argparse.ArgumentParser) -> None:
    p.description = __doc__.split("\n\n")[1].replace("\n", " ")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folders written by 'vlbench run' with caption "
                                                          "perturbations (or image corruptions)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the tables (CSV, Markdown, LaTeX), "
                                                                "the plots and the joined per-query table")
    p.add_argument("--outcome", default="rsum_change", help="the per-query change analysed: rsum_change (default), "
                                                            "rank_change, log_rank_ratio, flip@K (K one of the "
                                                            "run's cut-offs) or probe_miss (a --probes run's "
                                                            "pairwise probes)")
    p.add_argument("--direction", default="t2i", choices=["t2i", "i2t", "both"],
                   help="queries analysed: t2i (a caption is the query; default), i2t (an image, with the mean "
                        "features of its captions) or both")
    p.add_argument("--conditions", default=None, help="comma-separated conditions (default: all but clean)")
    p.add_argument("--features", default=None,
                   help="comma-separated regression features (default " + ",".join(report.REGRESSION_FEATURES) + ")")
    p.add_argument("--bins", type=int, default=4, help="quantile bins per feature (default 4)")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples of images (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--profile", default=None, help="granularity profile of the features (default per-caption)")
    p.add_argument("--data-dir", default=None, help="where the runs' datasets are (as for 'vlbench run')")
    p.add_argument("--no-plots", action="store_true", help="tables only")


def _check(a: argparse.Namespace) -> None:
    if not (a.outcome in OUTCOMES or (a.outcome.startswith("flip@") and a.outcome[5:].isdigit())):
        raise VlbenchError(f"--outcome {a.outcome!r} is not an outcome", f"use one of {', '.join(OUTCOMES)}, flip@K")
    if not 2 <= a.bins <= 20:
        raise VlbenchError(f"--bins {a.bins} is out of range", "give 2 to 20 bins")
    if not 0 <= a.n_boot <= 100_000:
        raise VlbenchError(f"--n-boot {a.n_boot} is out of range", "give 0 to 100000 resamples")
    if a.seed < 0:
        raise VlbenchError(f"--seed {a.seed} is negative", "give a seed >= 0")
    out = Path(a.out)
    if out.exists() and not out.is_dir():
        raise VlbenchError(f"--out {out} is a file", "give a folder (it is created if absent)")


def main(a: argparse.Namespace) -> int:
    _check(a)
    directions = ("t2i", "i2t") if a.direction == "both" else (a.direction,)
    conditions = {c.strip() for c in a.conditions.split(",") if c.strip()} if a.conditions else None
    tables, infos = [], []
    for run in a.runs:
        print(f"analyze: reading {run} and the granularity of its captions ...", flush=True)
        table, info = join_run(run, directions=directions, conditions=conditions, profile=a.profile,
                               data_dir=a.data_dir)
        if a.outcome not in table.columns:
            raise VlbenchError(f"run {run} has no per-query values for --outcome {a.outcome}",
                               f"use a cut-off of the run ({', '.join(f'flip@{k}' for k in info['k'])}) or "
                               f"{', '.join(OUTCOMES)}")
        tables.append(table)
        infos.append(info)
    features = ([f.strip() for f in a.features.split(",") if f.strip()] if a.features
                else [f for f in report.REGRESSION_FEATURES if f in feature_names(tables[0])])
    unknown = [f for f in features if f not in feature_names(tables[0])]
    if unknown:
        raise VlbenchError(f"unknown feature(s) {', '.join(unknown)}", f"use {', '.join(feature_names(tables[0]))}")
    s = report.Settings(outcome=a.outcome, n_bins=a.bins, n_boot=a.n_boot, seed=a.seed)
    written = write_all(tables, infos, features, s, Path(a.out), plots=not a.no_plots)
    for path in written:
        print(f"wrote {path}")
    return 0


def write_all(tables, infos, features, s, out: Path, plots: bool = True) -> list[Path]:
    import pandas as pd  # lazy: the command line starts without pandas

    out.mkdir(parents=True, exist_ok=True)
    joined = pd.concat(tables, ignore_index=True)
    all_features = feature_names(joined)
    bins = report.bins_table(joined, all_features, s)
    reg = report.regression_table(joined, features, s)
    why = report.not_fitted_reasons(reg)
    if why is not None:  # say so once; the table still holds each condition's reason
        print("analyze: no regression could be fitted (" + ("; ".join(why) or "no condition to fit") + ")")
    paired = report.paired_table(tables, infos, s)
    written = [out / "analysis_queries.csv.gz"]
    joined.to_csv(written[0], index=False)
    specs = [("analysis_bins", bins, ["model", "dataset", "direction", "condition", "feature", "bin", "feature_min",
                                      "feature_max", "n", "mean", "ci_low", "ci_high"],
              f"Mean per-query {s.outcome} by quantile bin of each caption feature; 95% cluster-bootstrap "
              f"intervals over images ({s.n_boot} resamples)."),
             ("analysis_regression", reg, ["model", "dataset", "direction", "condition", "term", "coef", "se",
                                           "ci_low", "ci_high", "per_sd", "n", "n_images", "r2", "note"],
              f"Least squares of per-query {s.outcome} on caption features; 95% intervals cluster-robust by image "
              "(CR1). per_sd: the effect of one standard deviation of the feature."),
             ("analysis_paired", paired, ["model", "coarser", "finer", "direction", "condition", "coarser_mean",
                                          "finer_mean", "difference", "ci_low", "ci_high", "n_images"],
              f"Per-image mean {s.outcome}, finer minus coarser captions of the same images; 95% bootstrap "
              "intervals over images.")]
    for name, df, cols, caption in specs:
        if df.empty:
            continue
        df.to_csv(out / f"{name}.csv", index=False)
        (out / f"{name}.md").write_text(report.markdown(df, cols) + "\n\n" + caption + "\n", encoding="utf-8")
        (out / f"{name}.tex").write_text(report.latex(df, cols, caption), encoding="utf-8")
        written += [out / f"{name}.csv", out / f"{name}.md", out / f"{name}.tex"]
    if plots and not bins.empty:
        from .plots import plot_bins  # lazy: matplotlib loads here

        written += plot_bins(bins, out)
    return written
