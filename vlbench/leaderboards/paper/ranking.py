"""The page-only views of a leaderboard (the CSV files stay tidy): the models ranked first, with coverage (a model
without clean results on every dataset is ranked separately and marked) and the largest real drop, and RSUM per
perturbation with a column per model."""

from __future__ import annotations

import math

from ...perturbations import FAMILIES
from ..table_types import Column, Table
from ..tables import LANGUAGE_MEAN


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)



def family_rank(family: str) -> tuple[int, str]:
    """Sort key of a perturbation family: the built-in families in their order (typos, lexical,
    distraction, word-order), then any other family by name."""

    order = list(FAMILIES)
    return (order.index(family), "") if family in order else (len(order), family or "")


def _dicts(t: Table) -> list[dict]:
    keys = [c.key for c in t.columns]
    return [dict(zip(keys, r)) for r in t.rows]


def _mean(xs: list) -> float | None:
    xs = [x for x in xs if _finite(x)]
    return sum(xs) / len(xs) if xs else None


def _drops(changes: Table | None) -> dict[str, list[tuple[float, str, bool]]]:
    """{model: [(change of total RSUM, "condition (dataset)", a real drop?)]} of the caption perturbations
    measured in both directions; a change counts as a drop only when it is below 0 and, where the run has one,
    its interval too."""
    total: dict[tuple, dict[str, float]] = {}
    upper: dict[tuple, float] = {}
    for r in _dicts(changes) if changes is not None else []:
        key = (r["model"], r["dataset"], r["condition"])
        if _finite(r.get("delta")):
            total.setdefault(key, {})[r["direction"]] = r["delta"]
        if r["direction"] == "both" and _finite(r.get("ci_high")):
            upper[key] = r["ci_high"]
    out: dict[str, list[tuple[float, str, bool]]] = {}
    for (m, d, c), by_dir in total.items():
        if {"i2t", "t2i"} <= set(by_dir):
            change = by_dir["i2t"] + by_dir["t2i"]
            real = change < 0 and upper.get((m, d, c), -1.0) < 0
            out.setdefault(m, []).append((change, f"{c} ({d})", real))
    return out


def coverage(t52: Table) -> tuple[list[str], dict[str, dict[str, float]], set[str]]:
    """(datasets, {model: {dataset: clean total RSUM}}, complete models): a model is complete when it has a clean
    total RSUM on every dataset of the table; only complete models are ranked together (and get rank groups)."""
    clean: dict[str, dict[str, float]] = {}
    datasets: list[str] = []
    for r in _dicts(t52):
        if str(r.get("flags") or "").startswith(LANGUAGE_MEAN):  # a mean over languages: not a set to average
            continue
        datasets += [r["dataset"]] if r["dataset"] not in datasets else []
        if _finite(r.get("i2t_rsum")) and _finite(r.get("t2i_rsum")):
            clean.setdefault(r["model"], {})[r["dataset"]] = r["i2t_rsum"] + r["t2i_rsum"]
        else:
            clean.setdefault(r["model"], {})
    return datasets, clean, {m for m, by in clean.items() if all(d in by for d in datasets)}


def ranking_table(t52: Table, changes: Table | None) -> Table:
    """One row per model: clean total RSUM (i2t + t2i) per dataset, their mean (the rank), and the mean
    change of total RSUM over every perturbation x dataset with both directions, and the largest real drop.
    Models without a clean RSUM on every dataset are ranked separately, after the others, and marked."""
    datasets, clean, complete = coverage(t52)
    drops = _drops(changes)
    kinds = {r["model"]: r["stages"] for r in _dicts(t52)} if "stages" in [c.key for c in t52.columns] else {}
    rows: list[list] = []
    for m, by_ds in clean.items():
        real = [x for x in drops.get(m, []) if x[2]]
        worst = min(real, default=None)
        missing = [d for d in datasets if d not in by_ds]
        flag = (f"partial coverage: no clean RSUM on {', '.join(missing)}; ranked separately (mean over its "
                f"{len(by_ds)} dataset{'' if len(by_ds) == 1 else 's'})") if missing else ""
        rows.append([None, m] + [by_ds.get(d) for d in datasets] +
                    [_mean(list(by_ds.values())), _mean([x for x, _, _ in drops.get(m, [])]),
                     worst[1] if worst else None, flag])
    rows.sort(key=lambda r: (r[1] not in complete, r[len(datasets) + 2] is None, -(r[len(datasets) + 2] or 0.0),
                             r[1]))
    for i, row in enumerate(rows):
        row[0] = i + 1 if row[1] in complete else None
    if kinds:  # a board with other kinds than dual encoders: the kind / stages beside the model
        rows = [r[:2] + [kinds.get(r[1])] + r[2:] for r in rows]
    cols = ([Column("rank", "int"), Column("model")] + [c for c in t52.columns if c.key == "stages" and kinds] +
            [Column(f"clean_rsum:{d}", "num", 1, f"clean RSUM {d}") for d in datasets] +
            [Column("mean_clean_rsum", "num", 1, "mean clean RSUM"),
             Column("mean_rsum_change", "num", 1, "mean RSUM change"),
             Column("worst", label="largest drop"), Column("flags")])
    return Table("ranking", "Ranking of the models",
                 "Rank by mean clean RSUM (i2t + t2i, six recalls, 0-600) over the datasets of this board; a model "
                 "without clean results on every one of them is listed after the ranked ones, unranked and marked "
                 "(partial coverage). Mean RSUM change: the mean change of that total over every caption "
                 "perturbation and dataset (negative = less robust); largest drop names the worst change that is a "
                 "real drop (below 0, and its 95% interval too where the run has one). A multilingual set's clean row "
                 "(a mean over its languages, flagged 'language mean') is not one of the datasets averaged here.",
                 cols, rows, list(t52.runs))


def pivot_rsum(t: Table, model_order: list[str]) -> Table:
    """Rows dataset x condition, a column per model (the CSV keeps rows model x condition)."""
    base = {"model", "condition", "family", "rsum", "flags"}
    dsets = [c.key for c in t.columns if c.key not in base]
    cells: dict[tuple, dict[str, float]] = {}
    flags: dict[tuple, set] = {}
    seen = set()
    for r in _dicts(t):
        seen.add(r["model"])
        for d in dsets:
            key = (d, r["family"], r["condition"])
            cells.setdefault(key, {})[r["model"]] = r[d]
            if r.get("flags"):
                flags.setdefault(key, set()).add(f"{r['model']}: {r['flags']}")
    models = [m for m in model_order if m in seen] + sorted(seen - set(model_order))
    first = {k: i for i, k in enumerate(cells)}
    keys = sorted(cells, key=lambda k: (dsets.index(k[0]), k[2] != "clean", family_rank(k[1]), first[k]))
    rows = [[d, fam, cond] + [cells[(d, fam, cond)].get(m) for m in models] +
            ["; ".join(sorted(flags.get((d, fam, cond), ())))] for (d, fam, cond) in keys]
    cols = ([Column("dataset"), Column("family"), Column("condition")] +
            [Column(m, "num", 2) for m in models] + [Column("flags")])
    desc = t.description.replace("Rows: model x condition (clean = no perturbation); columns: datasets.",
                                 "Rows: dataset x condition (clean = no perturbation); columns: models.")
    return Table(t.name, t.title, desc, cols, rows, t.runs)


def summary_long(t: Table) -> Table:
    """The robustness summary on the page: a row per model, dataset and family (the CSV and the paper tables keep a
    column per family), so that many families never make the page scroll sideways."""
    keys = [c.key for c in t.columns]
    fams = [k for k in keys[4:] if not k.endswith(("_ci_low", "_ci_high"))]
    rows = []
    for r in _dicts(t):
        head = [r["dataset"], r["model"], r["clean_rsum"], r["chance_rsum"]]
        rows += [head + [f, r[f], r[f"{f}_ci_low"], r[f"{f}_ci_high"]] for f in fams if r[f] is not None]
        if not any(r[f] is not None for f in fams):
            rows.append(head + ["", None, None, None])
    cols = t.columns[:4] + [Column("family"), Column("retained", "num", 1, "% retained"),
                            Column("ci_low", "num", 1), Column("ci_high", "num", 1)]
    return Table(t.name, t.title, t.description + " On this page: a row per family.", cols, rows, t.runs)
