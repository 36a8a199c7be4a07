"""The tables of ``vlbench analyze``: change by feature bin, the regression on the features, and the paired
fine-grained vs original difference; written as CSV, Markdown and LaTeX.

Every table is computed per run and per condition, and per condition family (the family's conditions pooled:
a query appears once per condition, and the intervals cluster by image, so pooling does not pretend the
repeated queries are independent).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import VlbenchError
from ..util.markdown import md_escape, md_table
from ..util.typeset import tex_escape
from .stats import cluster_bootstrap_means, ols_cluster, paired_difference, quantile_bins

#: the regression's default features: one per aspect of Table 5.1, leaving out the near-duplicates of the
#: caption's length (characters ~ words; concept diversity ~ 0.9 x words), which would make it collinear
REGRESSION_FEATURES = ("words_per_caption", "adjectives", "complement_phrases", "quantifiers", "concept_depth",
                       "sentences")


@dataclass
class Settings:
    outcome: str = "rsum_change"
    n_bins: int = 4
    n_boot: int = 1000
    seed: int = 0
    alpha: float = 0.05


def _groups(table):
    """(label, kind, rows) per condition, then per family with more than one condition."""
    for condition, rows in table.groupby("condition", sort=True):
        yield condition, "condition", rows
    for family, rows in table.groupby("family", sort=True):
        if rows["condition"].nunique() > 1:
            yield f"family:{family}", "family", rows


def bins_table(table, features: list[str], s: Settings):
    """Mean change per quantile bin of each feature, with a cluster-bootstrap interval (by image)."""
    import pandas as pd  # lazy: the command line starts without pandas

    out = []
    for (run, direction), per_run in table.groupby(["run", "direction"], sort=False):
        for label, kind, rows in _groups(per_run):
            y = rows[s.outcome].to_numpy(dtype=np.float64)
            for feature in features:
                x = rows[feature].to_numpy(dtype=np.float64)
                ok = ~np.isnan(x) & ~np.isnan(y)  # e.g. flip@k is empty where clean missed
                if not ok.any():
                    continue
                x_ok = x[ok]
                b = quantile_bins(x_ok, s.n_bins)
                stats = cluster_bootstrap_means(y[ok], b, rows["image"].to_numpy()[ok], s.n_boot, s.seed, s.alpha)
                for k, (mean, lo, hi, n) in enumerate(stats):
                    xs = x_ok[b == k]
                    out.append({"run": run, "model": rows["model"].iat[0], "dataset": rows["dataset"].iat[0],
                                "direction": direction, "condition": label, "scope": kind, "feature": feature,
                                "bin": k + 1, "feature_min": float(xs.min()), "feature_max": float(xs.max()),
                                "n": n, "outcome": s.outcome, "mean": mean, "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(out)


#: the regression table's columns, whether or not a fit succeeded (a condition too small to fit has a row
#: with term "(not fitted)", empty numbers and the reason in ``note``)
REGRESSION_COLUMNS = ("run", "model", "dataset", "direction", "condition", "scope", "outcome", "term", "coef", "se",
                      "ci_low", "ci_high", "per_sd", "n", "n_images", "r2", "note")
NOT_FITTED = "(not fitted)"


def regression_table(table, features: list[str], s: Settings):
    """Per run, direction and condition (or family): the outcome regressed on the features, cluster-robust by image.
    ``per_sd``: the coefficient times the feature's standard deviation (its effect over one SD). The columns are
    :data:`REGRESSION_COLUMNS` even when no condition could be fitted."""
    import pandas as pd  # lazy: see bins_table

    out = []
    for (run, direction), per_run in table.groupby(["run", "direction"], sort=False):
        for label, kind, rows in _groups(per_run):
            x = rows[features].to_numpy(dtype=np.float64)
            try:
                fit = ols_cluster(rows[s.outcome].to_numpy(dtype=np.float64), x, list(features),
                                  rows["image"].to_numpy(), s.alpha)
            except VlbenchError as exc:  # too few queries for this condition: say so in its row, go on
                out.append({"run": run, "model": rows["model"].iat[0], "dataset": rows["dataset"].iat[0],
                            "direction": direction, "condition": label, "scope": kind, "outcome": s.outcome,
                            "term": NOT_FITTED, "note": exc.message})
                continue
            sd = {f: float(np.nanstd(rows[f].to_numpy(dtype=np.float64), ddof=1)) for f in features}
            for j, name in enumerate(fit.names):
                out.append({"run": run, "model": rows["model"].iat[0], "dataset": rows["dataset"].iat[0],
                            "direction": direction, "condition": label, "scope": kind, "outcome": s.outcome,
                            "term": name, "coef": float(fit.coef[j]), "se": float(fit.se[j]),
                            "ci_low": float(fit.ci_low[j]), "ci_high": float(fit.ci_high[j]),
                            "per_sd": float(fit.coef[j] * sd[name]) if name in sd else float("nan"),
                            "n": fit.n, "n_images": fit.n_clusters, "r2": fit.r2,
                            "note": ("constant, left out: " + ",".join(fit.dropped)) if fit.dropped else ""})
    return pd.DataFrame(out, columns=list(REGRESSION_COLUMNS))


def not_fitted_reasons(reg) -> list[str] | None:
    """None when at least one regression was fitted; else the distinct reasons none was (empty: no rows)."""
    if reg.empty:
        return []
    if (reg["term"] != NOT_FITTED).any():
        return None
    return list(dict.fromkeys(str(n) for n in reg["note"]))


def paired_pairs(infos: list[dict]) -> list[tuple[int, int]]:
    """Pairs of runs (a, b) of one model on two datasets of the same images (FG vs original): b is the run whose
    captions are longer (more words per caption), so differences read "finer minus coarser"."""
    pairs = []
    for i, a in enumerate(infos):
        for j in range(i + 1, len(infos)):
            b = infos[j]
            if a["model_hash"] != b["model_hash"] or a["dataset_hash"] == b["dataset_hash"]:
                continue
            if set(a["images"]) == set(b["images"]):
                pairs.append((i, j) if a["mean_words"] <= b["mean_words"] else (j, i))
    return pairs


def paired_table(tables: list, infos: list[dict], s: Settings):
    """Per pair of runs and shared condition: the per-image mean change in each run and their difference (finer
    minus coarser captions), with a bootstrap interval over images."""
    import pandas as pd  # lazy: see bins_table

    out = []
    for i, j in paired_pairs(infos):
        a, b = tables[i], tables[j]
        for direction in sorted(set(a["direction"]) & set(b["direction"])):
            for condition in sorted(set(a["condition"]) & set(b["condition"])):
                ra = a[(a["condition"] == condition) & (a["direction"] == direction)]
                rb = b[(b["condition"] == condition) & (b["direction"] == direction)]
                ma = ra.groupby("image")[s.outcome].mean()
                mb = rb.groupby("image")[s.outcome].mean().reindex(ma.index)
                mean, lo, hi, n = paired_difference(ma.to_numpy(), mb.to_numpy(), s.n_boot, s.seed, s.alpha)
                out.append({"model": infos[i]["model"], "coarser": infos[i]["dataset"], "finer": infos[j]["dataset"],
                            "direction": direction, "condition": condition, "outcome": s.outcome,
                            "coarser_mean": float(ma.mean()), "finer_mean": float(mb.mean()),
                            "difference": mean, "ci_low": lo, "ci_high": hi, "n_images": n})
    return pd.DataFrame(out)


def _fmt(v, digits: int = 3) -> str:
    if isinstance(v, (float, np.floating)):
        return "" if np.isnan(v) else f"{v:.{digits}f}"
    return str(v)


def markdown(df, columns: list[str]) -> str:
    align = "".join("r" if df[c].dtype.kind in "fiu" else "l" for c in columns)
    rows = [[md_escape(_fmt(v)) for v in r] for r in df[columns].itertuples(index=False)]
    return md_table(columns, rows, align)


def latex(df, columns: list[str], caption: str) -> str:
    """A booktabs table (needs ``\\usepackage{booktabs}``)."""
    align = "".join("r" if df[c].dtype.kind in "fiu" else "l" for c in columns)
    lines = [r"\begin{table}[t]", r"\centering", r"\small", rf"\begin{{tabular}}{{{align}}}", r"\toprule",
             " & ".join(tex_escape(c) for c in columns) + r" \\", r"\midrule"]
    lines += [" & ".join(tex_escape(_fmt(v)) for v in r) + r" \\" for r in df[columns].itertuples(index=False)]
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{tex_escape(caption)}}}", r"\end{table}"]
    return "\n".join(lines) + "\n"
