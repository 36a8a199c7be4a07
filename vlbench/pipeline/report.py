"""What a run writes besides results.json: the per-query file and the readable table (``table.md``)."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import registry
from ..datasets.folds import fold_captions, fold_index_maps
from ..granularity import budgets
from ..metrics import compute
from ..metrics.flips import COLUMNS, flip_rows, retrieved_arrays
from ..metrics.specs import builtins
from ..results import MetricKey, RunRecord
from ..runfolder import FLIPS, PER_QUERY, RETRIEVED, results_path, write_results
from ..util.io import atomic_write_text
from ..util.markdown import md_table
from .sensitivity.summary import probe_table

if TYPE_CHECKING:
    from ..datasets.core import Dataset


def _column_text(values) -> list[str]:
    """One column as CSV cells: floats as %.6g (NaN empty), everything else as its plain text."""
    import numpy as np

    arr = np.asarray(values)
    if arr.dtype.kind == "f":
        return ["" if v != v else f"{v:.6g}" for v in arr.tolist()]
    if arr.dtype.kind == "b":
        return ["True" if v else "False" for v in arr.tolist()]
    return [str(v) for v in arr.tolist()]


def write_per_query(out: Path, ds: Dataset, evals_by_cond: dict, extra: dict | None = None) -> str:
    """per_query.csv.gz: one row per condition, fold, direction and query (written with the csv module:
    pandas would add a quarter of a second of import to every run, warm runs included). ``extra``: more t2i
    columns, {condition: {column: one value per caption of the dataset}} (the probes' own scores)."""

    header: list[str] = []
    blocks = []  # (n rows, {column: cells})
    for cond, evals in evals_by_cond.items():
        for fold, e in enumerate(evals):
            fold_ds = ds if ds.folds is None else ds.subset(ds.folds[fold])
            for d in compute.DIRECTIONS:
                cols = e.per_query(d)
                q = [int(i) for i in cols.pop("query")]
                ids = [fold_ds.images[i] for i in q] if d == "i2t" else [fold_ds.caption_ids[j] for j in q]
                cells = {"condition": [cond] * len(q), "fold": [str(fold)] * len(q), "direction": [d] * len(q),
                         "query_index": [str(i) for i in q], "query_id": [str(i) for i in ids]}
                cells.update((k, _column_text(v)) for k, v in cols.items())
                more = (extra or {}).get(cond) if d == "t2i" else None
                if more:
                    cells.update((k, _column_text(v[_caption_rows(ds, fold, q)])) for k, v in more.items())
                header.extend(k for k in cells if k not in header)
                blocks.append((len(q), cells))
    name = PER_QUERY
    tmp = out / f".{name}.tmp"
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz, \
            io.TextIOWrapper(gz, encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        for n, cells in blocks:
            cols = [cells.get(h, [""] * n) for h in header]  # a column another condition lacks stays empty
            w.writerows(zip(*cols))
    tmp.replace(out / name)
    return name


def _caption_rows(ds, fold: int, q: list[int]):
    """The dataset caption indices of a fold's t2i queries ``q`` (positions among the fold's captions)."""
    import numpy as np

    if ds.folds is None:
        return np.asarray(q, dtype=np.int64)
    return fold_captions(ds.caption_to_image, ds.folds[fold])[np.asarray(q, dtype=np.int64)]


def write_flips(out: Path, ds, evals_by_cond: dict, ks=None, reranked: dict | None = None) -> dict:
    """flips.csv (hit -> miss, miss -> hit, rank changes, top-10 overlap of every condition against clean) and
    retrieved.npz (every condition's top-10 and first-positive rank per query), from the scoring pass's
    rankings (metrics/flips.py; docs/flips.md). Returns {(condition, direction): why not compared}.
    ``reranked``: a two-stage run's final rankings (condition -> evaluations): their rows as ``rerank:<condition>``,
    each against the final ranking of clean."""

    import numpy as np


    rows, skipped = flip_rows(evals_by_cond, ks)
    if reranked:
        more, _ = flip_rows(reranked, ks)
        rows += [dataclasses.replace(r, condition=f"rerank:{r.condition}") for r in more]
        evals_by_cond = {**evals_by_cond, **{f"rerank:{c}": e for c, e in reranked.items()}}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    w.writerows(r.cells() for r in rows)
    atomic_write_text(out / FLIPS, buf.getvalue())
    to_global = None
    if ds.folds is not None:  # fold-local candidate ids -> dataset indices (images for t2i, captions for i2t)
        maps = fold_index_maps(ds.caption_to_image, ds.folds)

        def to_global(f, d, ids):  # an id past the fold's gallery is injected (--distractors): past the dataset's
            real, total = (maps[f][0], ds.n_images) if d == "t2i" else (maps[f][1], ds.n_captions)
            injected = ids >= len(real)
            return np.where(injected, total + ids - len(real), real[np.where(injected, 0, ids)])

    tmp = out / ".retrieved.tmp.npz"
    arrays: dict[str, Any] = retrieved_arrays(evals_by_cond, to_global)
    np.savez_compressed(tmp, **arrays)
    tmp.replace(out / RETRIEVED)
    return skipped


#: the printed table shows every condition's rows when a run has at most this many conditions (clean included);
#: above it, the clean rows and the per-family summary (every condition stays in table.md)
PRINTED_CONDITIONS = 4


def _printed_extra(rec: RunRecord) -> tuple:
    """The metrics the run's protocol prints beside the default ones (``Protocol.printed_metrics``)."""
    proto = rec.settings.get("protocol")
    base = (proto.get("base") or proto.get("name")) if isinstance(proto, dict) else None
    if not base or base not in registry.protocols:  # an older run, or a protocol whose plug-in is not installed
        return ()
    return tuple(getattr(registry.protocols.get(base), "printed_metrics", ()) or ())


def _table_columns(rec: RunRecord, printed: bool = False) -> list[tuple]:
    """(header, metric, k, format, directions) of the table: the registered metrics with a ``table`` header, in
    registry order, each for the run's k or p; a family member (graded nDCG) or an official metric only where
    the run has a value for it. ``printed``: only the metrics a run prints (``Metric.printed`` or named by the
    protocol's ``printed_metrics``)."""

    p = rec.settings["p"]
    ks = list(rec.settings.get("k") or (1, 5, 10))
    have = {(v.key.metric, v.key.k) for v in rec.values}
    extra = _printed_extra(rec) if printed else ()
    cols = []
    for m in builtins():
        for i in m.instances or (m,):
            if i.table is None or i.kind == "task" or (printed and not i.printed and i.name not in extra):
                continue
            for x in ks if i.param == "k" else (p,) if i.param == "p" else (None,):
                if (i.kind == "retrieval" and not m.instances) or (i.name, x) in have:
                    cols.append((i.table.format(x=x), i.name, x, i.fmt, i.directions))
    return cols


def _metric_table(rec: RunRecord, cols: list, conds: list) -> str:
    totals = {m.name for m in builtins() if m.total}
    head = ["condition", "dir"] + [c[0] for c in cols]
    rows = []
    for c in conds:
        vals = rec.values_of(c)
        for d in compute.DIRECTIONS:
            rows.append([c, d] + [format(vals.get(MetricKey(d, name, x), float("nan")), fmt) if d in dirs else ""
                                  for _h, name, x, fmt, dirs in cols])
        rows.append([c, "both"] + [format(vals[MetricKey("both", name)], fmt) if name in totals else ""
                                   for _h, name, x, fmt, _d in cols])
    return md_table(head, rows, pad=True)


def _ci(x) -> str:
    return f"{x.get('delta'):+.2f} [{x.get('ci_low'):+.2f}, {x.get('ci_high'):+.2f}]"


def _interval_table(rec: RunRecord, conds: list) -> str:
    head = ["perturbation", "not applicable", "RSUM change [95% CI]", "t2i RSUM change [95% CI]",
            "i2t RSUM change [95% CI]"]
    rows = []
    for c in conds[1:]:
        b = {x.get("direction"): x for x in rec.intervals if x.condition == c}
        meta = rec.conditions[c].meta
        rate = meta.get("not_applicable_rate")
        if rate is None and meta.get("kind") == "budget" and meta.get("n_captions"):  # captions it left as they are
            rate = 1 - meta.get("n_cut", 0) / meta["n_captions"]
        rows.append([c, "" if rate is None else f"{100 * rate:.1f}%", _ci(b["both"]), _ci(b["t2i"]), _ci(b["i2t"])])
    return md_table(head, rows, pad=True)


def family_summary(rec: RunRecord) -> str | None:
    """One row per family of conditions (caption perturbation families, image corruption families, ...): how
    many conditions, the mean change of total RSUM against clean, the largest drop (the condition, its change
    and 95% interval; "none" when no condition lowers RSUM) and how many conditions' intervals lie below 0.
    Conditions of kind "sensitivity" (meaning-changing probes) are left out: a lower score there is no loss."""
    clean = rec.value("clean", "both", "rsum")
    if clean is None:
        return None
    fams: dict[str, list] = {}
    for c in rec.condition_names():
        # meaning-changing probes (kind "sensitivity", vlbench.perturbations.probes) are never averaged here
        if c != "clean" and rec.condition(c).meta.get("kind") != "sensitivity":
            fams.setdefault(rec.condition(c).family or "other", []).append(c)
    if not fams:
        return None
    ci = {x.condition: x for x in rec.intervals if x.get("direction") == "both"}
    rows = []
    for fam, names in fams.items():
        rsum = {c: rec.value(c, "both", "rsum") for c in names}
        change = {c: v - clean for c, v in rsum.items() if v is not None}
        if not change:
            continue
        worst = min(change, key=lambda c: (change[c], c))
        drop = "none" if change[worst] >= 0 else f"{worst} " + (_ci(ci[worst]) if worst in ci
                                                                else f"{change[worst]:+.2f}")
        below = sum(1 for c in names if c in ci and ci[c].get("ci_high") < 0)
        rows.append([fam, str(len(names)), f"{sum(change.values()) / len(change):+.2f}", drop,
                     f"{below} of {len(names)}" if ci else ""])
    return md_table(["family", "conditions", "mean RSUM change", "largest drop [95% CI]", "CI below 0"], rows,
                    pad=True)


def budget_table(rec: RunRecord) -> str | None:
    """The caption budgets of a run (--token-budget, --sentence-budget): how many captions each cut (``n_cut``),
    how many the model's context length cuts anyway, and which cut none (its rows are clean's); None without."""
    rows = budgets.budget_rows({name: c.meta for name, c in rec.conditions.items()})
    if not rows:
        return None
    return md_table(["budget", "captions cut (n_cut)", "cut by the context length anyway", "note"], rows, pad=True)


def warning_lines(rec: RunRecord) -> list[str]:
    """The run's warnings (results.json ``warnings``), each on its own line."""
    found = rec.other.get("warnings")
    return [f"warning: {w}" for w in found if isinstance(w, str)] if isinstance(found, list) else []


def _notes(rec: RunRecord) -> str:
    """The budget table and the warnings, for the printed run and table.md."""
    out = ""
    table = budget_table(rec)
    if table:
        out += "\n\n" + table
    warnings = warning_lines(rec)
    if warnings:
        out += "\n\n" + "\n".join(warnings)
    return out


def _definition_lines(rec: RunRecord, cols: list) -> list[str]:
    """One line per printed metric: its header, definition and range (from the metric registry)."""
    seen, rows = set(), []
    for _header, name, x, _fmt, _dirs in cols:
        if name in seen:
            continue
        seen.add(name)
        m = next(i for b in builtins() for i in b.instances or (b,) if i.name == name)
        label = m.table.format(x="k" if m.param == "k" else x) if m.table else name
        rows.append((label + ":", m.description, m.value_range))
    width = max((len(r[0]) for r in rows), default=0)
    return [f"  {label:{width}} {text} (range {rng})" for label, text, rng in rows]


def format_table(rec: RunRecord) -> str:
    """table.md: one row per condition and direction, one column per registered metric with a table header (the
    "both" row holds the totals; the original, signed DCG_CM columns labelled as such), the RSUM change intervals of
    every condition, the per-family summary and the protocol."""

    conds = list(rec.conditions)
    out = _metric_table(rec, _table_columns(rec), conds)
    if rec.intervals:
        out += "\n\n" + _interval_table(rec, conds)
    summary = family_summary(rec)
    if summary:
        out += "\n\n" + summary
    probes = probe_table(rec.other)  # meaning-changing probes: their own section, never in the summary above
    if probes:
        out += "\n\n" + probes
    out += _notes(rec)
    proto = rec.settings.get("protocol")
    if proto:  # runs before protocols were recorded have none
        out += f"\n\nprotocol: {proto['name']}"
    return out


def format_printed(rec: RunRecord) -> str:
    """What ``vlbench run`` prints: the bounded default metrics (plus the protocol's ``printed_metrics``); every
    condition's rows when there are at most :data:`PRINTED_CONDITIONS`, else the clean rows; then the per-family
    summary, one line defining each metric, and the protocol. table.md keeps every row and column."""

    conds = list(rec.conditions)
    cols = _table_columns(rec, printed=True)
    few = len(conds) <= PRINTED_CONDITIONS
    out = _metric_table(rec, cols, conds if few else conds[:1])
    if not few:
        out += f"\n({len(conds) - 1} more conditions: every row in table.md)"
    if rec.intervals and few:
        out += "\n\n" + _interval_table(rec, conds)
    out += _language_lines(rec)
    summary = family_summary(rec)
    if summary:
        out += "\n\n" + summary
    probes = probe_table(rec.other)
    if probes:
        out += "\n\n" + probes
    out += _notes(rec)
    out += "\n\nmetrics:\n" + "\n".join(_definition_lines(rec, cols))
    proto = rec.settings.get("protocol")
    if proto:
        out += f"\n\nprotocol: {proto['name']}"
    return out


def _language_lines(rec: RunRecord) -> str:
    """A multilingual set's clean R@1 per language (results.json ``languages``; the rows above are their mean)."""
    sec = rec.other.get("languages")
    if not isinstance(sec, dict) or not sec.get("values"):
        return ""
    r1 = {(r["language"], r["direction"]): r["value"] for r in sec["values"]
          if r.get("condition") == "clean" and r.get("metric") == "recall" and r.get("k") == 1}
    lines = [f"  {lang:>4}  {r1.get((lang, 'i2t'), float('nan')):6.2f}  {r1.get((lang, 't2i'), float('nan')):6.2f}"
             for lang in sec.get("selected") or []]
    return ("\n\nR@1 per language (clean; the rows above are the mean over these languages):\n"
            "  lang     i2t     t2i\n" + "\n".join(lines))


def write_run_files(out: Path, results: dict, table: str) -> None:
    """results.json (never replaced) and table.md: :func:`vlbench.runfolder.write_results`."""
    write_results(out, results, table)


def print_run_result(res, *, as_json: bool, quiet: bool) -> None:
    """What `vlbench run` prints when a run (retrieval or choice task) finished."""

    if as_json:
        print(json.dumps(res.results["results"], indent=1))
    elif not quiet:
        print(res.printed() if hasattr(res, "printed") else res.table())  # a choice task: its own table
        print(f"\nresults: {results_path(res.out_dir)}")

