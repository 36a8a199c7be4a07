"""What a run writes besides results.json: the per-query file and the readable table (``table.md``)."""

from __future__ import annotations

from pathlib import Path

from .._markdown import md_table
from . import metrics as M


def write_per_query(out: Path, ds: Dataset, evals_by_cond: dict) -> str:
    import pandas as pd

    frames = []
    for cond, evals in evals_by_cond.items():
        for fold, e in enumerate(evals):
            fold_ds = ds if ds.folds is None else ds.subset(ds.folds[fold])
            for d in M.DIRECTIONS:
                cols = e.per_query(d)
                q = cols.pop("query")
                ids = [fold_ds.images[i] for i in q] if d == "i2t" else [fold_ds.caption_ids[j] for j in q]
                df = pd.DataFrame({"condition": cond, "fold": fold, "direction": d, "query_index": q,
                                   "query_id": ids, **cols})
                frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    name = "per_query.csv.gz"
    tmp = out / f".{name}.tmp"
    df.to_csv(tmp, index=False, float_format="%.6g", compression={"method": "gzip", "mtime": 0})
    tmp.replace(out / name)
    return name


def format_table(results: dict) -> str:
    """A readable Markdown table: one row per condition and direction."""
    recs = results["results"]
    p = results["settings"]["p"]
    conds = list(results["conditions"])
    head = ["condition", "dir", "R@1", "R@5", "R@10", "RSUM", "MedR", "MeanR", "R-P", "mAP@R", f"DCG@{p}", f"nDCG@{p}"]
    rows = []
    for c in conds:
        for d in M.DIRECTIONS:
            get = {(r["metric"], r["k"]): r["value"] for r in recs if r["condition"] == c and r["direction"] == d}
            rows.append([c, d] + [f"{get.get(('recall', k), float('nan')):.2f}" for k in (1, 5, 10)] +
                        [f"{get[('rsum', None)]:.2f}", f"{get[('medr', None)]:g}", f"{get[('meanr', None)]:.2f}",
                         f"{get[('r_precision', None)]:.2f}", f"{get[('map_at_r', None)]:.2f}",
                         f"{get[('dcg_cm', p)]:.3f}", f"{get[('ndcg_cm', p)]:.3f}"])
        tot = [r["value"] for r in recs if r["condition"] == c and r["direction"] == "both" and r["metric"] == "rsum"]
        rows.append([c, "both", "", "", "", f"{tot[0]:.2f}", "", "", "", "", "", ""])
    out = md_table(head, rows, pad=True)
    boots = results.get("bootstrap") or []
    if boots:
        head2 = ["perturbation", "not applicable", "RSUM change [95% CI]", "t2i RSUM change [95% CI]",
                 "i2t RSUM change [95% CI]"]
        rows2 = []
        for c in conds[1:]:
            b = {x["direction"]: x for x in boots if x["condition"] == c}
            fmt = lambda x: f"{x['delta']:+.2f} [{x['ci_low']:+.2f}, {x['ci_high']:+.2f}]"
            rate = results["conditions"][c].get("not_applicable_rate")
            rows2.append([c, "" if rate is None else f"{100 * rate:.1f}%", fmt(b["both"]), fmt(b["t2i"]),
                          fmt(b["i2t"])])
        out += "\n\n" + md_table(head2, rows2, pad=True)
    return out
