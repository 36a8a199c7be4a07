"""Leaderboard tables (clean retrieval, RSUM per perturbation, model-input analysis, RSUM changes, every value) as
plain data.

Everything here is pure Python on :class:`~vlbench.leaderboards.store.Run` objects: no pandas, no
plotting. Rows are sorted by (dataset label, model label, hashes, condition, ...) so that the tables
never depend on the order of the inputs.
"""

from __future__ import annotations

import re

from ..metrics.specs import metric_order
from ..results import Interval, MetricKey
from .labels import STAGES_COLUMN, STAGES_LABEL, Labels, make_labels  # noqa: F401  (make_labels: for build)
from .store import Run, Selection, condition_key
from .table_types import Column, Table

DIR_ORDER = {"i2t": 0, "t2i": 1, "both": 2}
MIA_GROUPS = ("decreased", "increased", "unchanged")


# ----------------------------------------------------------------------------------------------
# helpers

def _values(run: Run, condition: str) -> dict:
    return run.values(condition)


def is_image(run: Run, condition: str) -> bool:
    """An image-corruption condition (``--perturb-images``) or gallery distractors (``--distractors``): shown in
    their own tables, not beside captions'."""
    return condition != "clean" and run.condition_meta(condition).get("kind") in ("image", "gallery")


def _dcg_p(run: Run) -> int | None:
    """The run's nDCG / DCG_CM cut-off p (``--dcg-p``): settings.p, else the smallest p it recorded."""
    p = run.record.settings.get("p")
    if isinstance(p, int):
        return p
    ks = sorted({v.key.k for v in run.record.values if v.key.metric in ("ndcg", "dcg_cm") and v.key.k is not None})
    return ks[0] if ks else None


class _Ctx:
    """Selection + labels, indexed the way the tables need them."""

    def __init__(self, selection: Selection, labels: Labels):
        self.sel, self.lab = selection, labels
        self.pairs: dict[tuple, dict[str, Run]] = {}  # (model hash, ds name, ds hash) -> condition -> run
        for (mh, dn, dh, cond), run in selection.values.items():
            self.pairs.setdefault((mh, dn, dh), {})[cond] = run

    def model(self, mh: str) -> str:
        return self.lab.model[mh]

    def dataset(self, dn: str, dh: str) -> str:
        return self.lab.dataset[(dn, dh)]

    def sort_key(self, key: tuple) -> tuple:
        mh, dn, dh = key[:3]
        return (self.dataset(dn, dh), dh, self.model(mh), mh)

    def keys(self) -> list[tuple]:
        return sorted(self.pairs, key=self.sort_key)

    def datasets(self) -> list[tuple]:
        return sorted({(dn, dh) for _, dn, dh in self.pairs}, key=lambda d: (self.dataset(*d), d[1]))

    def models(self) -> list[str]:
        return sorted({mh for mh, _, _ in self.pairs}, key=lambda m: (self.model(m), m))

    def family(self, run: Run, cond: str) -> str:
        if cond == "clean":
            return ""
        return str(run.condition_meta(cond).get("family") or "")


# ----------------------------------------------------------------------------------------------
# the tables

#: the flag of a clean row whose R@k are a language set's mean over its languages (the ranking leaves them out)
LANGUAGE_MEAN = "language mean"


def language_mean(run: Run) -> list[str]:
    """The selected languages of a multilingual run (its R@k are their mean: datasets/langsets), else []."""
    sec = run.record.other.get("languages")
    return [str(x) for x in sec.get("selected") or []] if isinstance(sec, dict) else []


def clean_retrieval(ctx: _Ctx) -> Table:
    stages = [Column(STAGES_COLUMN, label=STAGES_LABEL)] if ctx.lab.stages else []  # only beside other kinds
    cols = [Column("dataset"), Column("model"), *stages]
    for d in ("i2t", "t2i"):
        cols += [Column(f"{d}_recall@{k}", "num", 2, f"{d} R@{k}") for k in (1, 5, 10)]
        cols += [Column(f"{d}_ndcg", "num", 3, f"{d} nDCG")]  # the run's printed nDCG@p, in [0, 1]
    cols += [Column("i2t_rsum", "num", 2, "RSUM i2t"), Column("t2i_rsum", "num", 2, "RSUM t2i"),
             Column("dcg_p", "int"), Column("run_id"), Column("model_hash", short=12), Column("dataset_hash", short=12),
             Column("flags")]
    rows, runs = [], set()
    for key in ctx.keys():
        run = ctx.pairs[key].get("clean")
        if run is None:
            continue
        v, p = _values(run, "clean"), _dcg_p(run)
        mh, dn, dh = key
        row: list = [ctx.dataset(dn, dh), ctx.model(mh)] + ([ctx.lab.stages[mh]] if stages else [])
        for d in ("i2t", "t2i"):
            row += [v.get((d, "recall", k)) for k in (1, 5, 10)] + [v.get((d, "ndcg", p))]
        langs = language_mean(run)
        flags = "; ".join(x for x in (f"{LANGUAGE_MEAN}: R@k, nDCG and RSUM are the mean over {len(langs)} "
                                      f"languages ({', '.join(langs)}), not one retrieval problem; not in the "
                                      "ranking" if langs else "", ctx.lab.run_flags(run)) if x)
        row += [v.get(("i2t", "rsum", None)), v.get(("t2i", "rsum", None)), p, run.ref, mh, dh, flags]
        rows.append(row)
        runs.add(run.ref)
    return Table("clean_retrieval", "Clean retrieval",
                 "One row per model and dataset, clean captions: Recall@1/5/10 and nDCG@p (p in column dcg_p; the "
                 "nDCG the run prints, in [0, 1]; the signed DCG_CM is in values.csv) per direction, and RSUM (R@1 + "
                 "R@5 + R@10) per direction. A multilingual set (xm3600, xtd10) is one row whose values are the mean "
                 f"over its selected languages (flag '{LANGUAGE_MEAN}'; each language in the multilingual table); "
                 "the ranking leaves such rows out." + (STAGES_TEXT if stages else ""), cols, rows, sorted(runs))


#: what the stages column says (tables that have it)
STAGES_TEXT = (" Kind / stages: dual (one vector per image and caption), multi-vector (token vectors, MaxSim), MLLM "
               "embedder, pair (a pair scorer); 'dual + blip-itm@K16': a two-stage run's final ranking (the pair "
               "scorer re-ranked each query's top 16), an entry of its own beside its first stage.")


def rsum_per_perturbation(ctx: _Ctx, direction: str = "t2i") -> Table:
    """RSUM per perturbation (rows: model x condition, columns: datasets)."""
    dsets = ctx.datasets()
    cols = [Column("model"), Column("condition"), Column("family"), Column("rsum")]
    cols += [Column(ctx.dataset(*d), "num", 2) for d in dsets]
    cols += [Column("flags")]
    rows, runs = [], set()
    for mh in ctx.models():
        conds: dict[str, dict] = {}
        for (m, dn, dh), by_cond in ctx.pairs.items():
            if m != mh:
                continue
            for cond, run in by_cond.items():
                # choice tasks and image corruptions have their own tables (modalities.py)
                if not cond.startswith("task:") and not is_image(run, cond):
                    conds.setdefault(cond, {})[(dn, dh)] = run
        for cond in sorted(conds, key=lambda c: (c != "clean", _first_family(ctx, conds[c], c), c)):
            cells, used = [], []
            for d in dsets:
                cell_run = conds[cond].get(d)
                cells.append(_values(cell_run, cond).get((direction, "rsum", None)) if cell_run else None)
                if cell_run:
                    used.append(cell_run)
                    runs.add(cell_run.ref)
            rows.append([ctx.model(mh), cond, _first_family(ctx, conds[cond], cond), direction] + cells +
                        [ctx.lab.run_flags(*used)])
    which = "text-to-image RSUM (t2i R@1 + R@5 + R@10)" if direction == "t2i" else \
        "total RSUM (i2t + t2i: six recalls)" if direction == "both" else f"{direction} RSUM"
    name = ("rsum_per_perturbation" if direction == "t2i" else
            f"rsum_per_perturbation_{'total' if direction == 'both' else direction}")
    short = "t2i" if direction == "t2i" else "total" if direction == "both" else direction
    return Table(name, f"RSUM per perturbation ({short})",
                 f"Rows: model x condition (clean = no perturbation); columns: datasets. Cells: {which} "
                 f"(column rsum names the direction: 'both' = total).", cols, rows, sorted(runs))


def _first_family(ctx: _Ctx, runs_by_ds: dict, cond: str) -> str:
    fams = sorted({ctx.family(r, cond) for r in runs_by_ds.values()} - {""})
    return fams[0] if fams else ""


def rsum_changes(ctx: _Ctx) -> Table:
    """Long table of RSUM changes with the runs' paired-bootstrap intervals and the validity cells."""
    cols = [Column("dataset"), Column("model"), Column("condition"), Column("family"), Column("direction"),
            Column("rsum_clean", "num", 2), Column("rsum", "num", 2), Column("delta", "num", 2),
            Column("rel", "num", 4), Column("ci_low", "num", 2), Column("ci_high", "num", 2),
            Column("n_boot", "int")] + VALIDITY_COLUMNS + [Column("run_id"), Column("flags")]
    rows, runs = [], set()
    for key in ctx.keys():
        mh, dn, dh = key
        for cond in sorted(ctx.pairs[key], key=condition_key):
            run = ctx.pairs[key][cond]
            if cond == "clean" or is_image(run, cond):  # image corruptions: the image_corruptions table
                continue
            if run.condition_meta(cond).get("kind") == "sensitivity":  # probes: the sensitivity map, never a loss
                continue
            v = _values(run, cond)
            deltas = {x.key: x for x in run.record.deltas if x.condition == cond}
            boots = {x.get("direction"): x for x in run.record.intervals
                     if x.condition == cond and x.get("metric") == "rsum"}
            for d in ("i2t", "t2i", "both"):
                val = v.get((d, "rsum", None))
                if val is None:
                    continue
                dl = deltas.get(MetricKey(d, "rsum", None))
                b: Interval | dict = boots.get(d, {})
                delta, rel = (dl.abs, dl.rel) if dl else (None, None)
                clean = _values(run, "clean").get((d, "rsum", None))
                if delta is None and clean is not None:
                    delta = val - clean
                rows.append([ctx.dataset(dn, dh), ctx.model(mh), cond, ctx.family(run, cond), d,
                             clean if clean is not None else (val - delta if delta is not None else None),
                             val, delta, rel, b.get("ci_low"), b.get("ci_high"), b.get("n_boot"),
                             *validity_cells(run, cond), run.ref, ctx.lab.run_flags(run)])
                runs.add(run.ref)
    rows.sort(key=lambda r: (r[0], r[1], condition_key(r[2]), DIR_ORDER[r[4]]))
    cols, rows, extra = keep_if_measured(cols, rows)  # runs without validity: the table as before
    return Table("rsum_changes", "RSUM change under each perturbation",
                 "RSUM under the perturbation minus clean RSUM of the same run, relative change, and the "
                 "run's paired-bootstrap 95% interval of the change (queries resampled)." + extra, cols, rows,
                 sorted(runs))


def model_input_similarity(ctx: _Ctx) -> Table:
    cols = [Column("dataset"), Column("model")] + [Column(g, "num", 4) for g in MIA_GROUPS]
    cols += [Column("pairs", "int"), Column("n_perturbations", "int"), Column("perturbations"),
             Column("score"), Column("run_id"), Column("flags")]
    rows, runs = [], set()
    for key in sorted(ctx.sel.mia, key=ctx.sort_key):
        run = ctx.sel.mia[key]
        mia = run.record.model_input_analysis
        assert mia is not None  # the selection keeps only runs with an analysis (store.select)
        mh, dn, dh = key
        perts = sorted((mia.get("groups") or {}).keys())
        jac = mia.get("jaccard") or {}
        rows.append([ctx.dataset(dn, dh), ctx.model(mh)] + [_num(jac.get(g)) for g in MIA_GROUPS] +
                    [mia.get("pairs"), len(perts), " ".join(perts), mia.get("score"), run.ref,
                     ctx.lab.run_flags(run)])
        runs.add(run.ref)
    return Table("model_input_similarity", "Model-input analysis (Jaccard similarity per group)",
                 "For each run with two or more perturbations: t2i caption queries are grouped by whether "
                 "their per-query score decreased, increased or stayed unchanged under each perturbation; "
                 "cells are the Jaccard similarity of those query sets, averaged over perturbation pairs.",
                 cols, rows, sorted(runs))


def _num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


VALUE_COLUMNS = ["dataset", "model", "condition", "family", "direction", "metric", "k", "value", "run_id",
                 "model_spec", "model_hash", "dataset_name", "dataset_hash", "metric_version", "vlbench_version",
                 "schema_version", "created", "perturbation_version", "perturbation_seed", "captions_hash",
                 "flags"]


def long_rows(run: Run, labels: Labels, conditions=None) -> list[dict]:
    """One dict per value of ``run`` (of ``conditions``, else of all its conditions) with the run's
    provenance: the long format behind both the values table and :func:`vlbench.leaderboards.load_results`."""
    rows = []
    dn, dh, mh = run.dataset_name, run.dataset_hash, run.model_hash
    for cond in conditions or run.conditions():
        meta = {} if cond == "clean" else run.condition_meta(cond)
        for key, value in run.values(cond).items():
            rows.append({"dataset": labels.dataset.get((dn, dh), dn), "model": labels.model[mh], "condition": cond,
                         "family": str(meta.get("family") or ""), "direction": key.direction, "metric": key.metric,
                         "k": key.k, "value": value, "run_id": run.ref, "model_spec": labels.spec(run),
                         "model_hash": mh, "dataset_name": dn, "dataset_hash": dh,
                         "metric_version": run.metric_version, "vlbench_version": run.vlbench_version,
                         "schema_version": run.original_schema, "created": run.created,
                         "perturbation_version": meta.get("version"), "perturbation_seed": meta.get("seed"),
                         "captions_hash": meta.get("captions_hash"), "flags": labels.run_flags(run),
                         "source": run.path})
    return rows


def long_order(x: dict) -> tuple:
    """The order of long rows: dataset, model, condition, direction, metric (the metric registry's order,
    then unregistered names alphabetically), k."""
    return (x["dataset"], x["dataset_hash"], x["model"], x["model_hash"], condition_key(x["condition"]),
            DIR_ORDER.get(x["direction"], 9), metric_order().get(x["metric"], 99), x["metric"],
            -1 if x["k"] is None else x["k"])


def value_rows(runs_by_key: dict[tuple, Run], labels: Labels) -> list[list]:
    """Long format: one row per value of each (model, dataset, condition) and the run it came from."""
    rows = [r for (_mh, _dn, _dh, cond), run in runs_by_key.items() for r in long_rows(run, labels, [cond])]
    rows.sort(key=long_order)
    return [[r[c] for c in VALUE_COLUMNS] for r in rows]


def values_table(selection: Selection, labels: Labels) -> Table:
    kinds = {"k": "int", "value": "num", "perturbation_seed": "int"}
    cols = [Column(c, kinds.get(c, "text"), 4 if c == "value" else 2, short=12 if c.endswith("hash") else 0)
            for c in VALUE_COLUMNS]
    rows = value_rows(selection.values, labels)
    return Table("values", "Every value", "Tidy long format: one row per value (model, dataset, condition, "
                 "direction, metric, k) with the run it comes from and its provenance.", cols, rows,
                 sorted({r[8] for r in rows}))


def provenance_table(selection: Selection, labels: Labels) -> Table:
    cols = [Column("run_id"), Column("model"), Column("model_spec"), Column("model_hash", short=12),
            Column("dataset"), Column("dataset_hash", short=12), Column("conditions"), Column("metric_version"),
            Column("vlbench_version"),
            Column("schema_version"), Column("created"), Column("results_hash", short=12), Column("flags"),
            Column("timing")]
    used: dict[str, list[str]] = {}
    for (_mh, _dn, _dh, cond), run in selection.values.items():
        used.setdefault(run.ref, []).append(cond)  # by ref: a two-stage run's final ranking is an entry of its own
    for run in selection.mia.values():
        used.setdefault(run.ref, [])
    rows = []
    for run in selection.used_runs():
        conds = sorted(used[run.ref], key=condition_key)
        if any(r is run for r in selection.mia.values()):
            conds.append("model_input_analysis")
        rows.append([run.ref, labels.model[run.model_hash], labels.spec(run), run.model_hash,
                     labels.dataset[(run.dataset_name, run.dataset_hash)], run.dataset_hash, " ".join(conds),
                     run.metric_version, run.vlbench_version, run.original_schema, run.created, run.results_hash,
                     labels.run_flags(run), *_timing_cells(run)])
    rows.sort(key=lambda r: (r[4], r[1], r[0], r[11]))
    if not any(r[-1] for r in rows):  # runs written before timings were recorded: the table as before
        cols, rows = cols[:-1], [r[:-1] for r in rows]
    return Table("provenance", "Provenance of every row", "One row per run used: what it provides (conditions), "
                 "the exact model spec and hash, the dataset and its content hash, the metric and vlbench "
                 "versions and when it ran.", cols, rows, sorted({r[0] for r in rows}))


def _timing_cells(run: Run) -> list:
    """One cell from results.json's timings / hardware: "wall 12.3 s; slowest image_forward 8.1 s; cuda NVIDIA H100"
    (empty for runs written before they were recorded)."""
    t, h = run.record.timings or {}, run.record.hardware or {}
    stages = [(v.get("seconds") or 0.0, k) for k, v in (t.get("stages") or {}).items()]
    slow = max(stages, default=None)
    parts = ([f"wall {t['wall_seconds']:.1f} s"] if isinstance(t.get("wall_seconds"), (int, float)) else []) + \
        ([f"slowest {slow[1]} {slow[0]:.1f} s"] if slow else []) + \
        [" ".join(str(x) for x in (h.get("device"), h.get("gpu_name")) if x)]
    return ["; ".join(p for p in parts if p)]


# ----------------------------------------------------------------------------------------------
# validity beside every drop: the cells the RSUM-change table shows next to a perturbation's change,
# read from results.json conditions[<perturbation>]["validity"] (vlbench.perturbations.validity); runs written
# before validity existed give empty cells

VALIDITY_COLUMNS = [Column("applicable", "num", 3, "applicable"), Column("drift_mean", "num", 3, "drift mean"),
           Column("drift_p95", "num", 3, "drift p95")]
VALIDITY_DESCRIPTION = (" Validity beside the drop: applicable = share of captions the perturbation changed (the "
               "share whose model input changed after the model's truncation is in results.json), drift = 1 - cosine "
               "of all-MiniLM-L6-v2 between original and perturbed caption over (a sample of) the applied captions "
               "(mean, 95th percentile); empty when the run did not measure it.")


def validity_cells(run, cond: str) -> list:
    v = run.condition_meta(cond).get("validity") if cond != "clean" else None
    if not isinstance(v, dict):
        return [None] * len(VALIDITY_COLUMNS)
    drift = v.get("drift")
    d = drift if isinstance(drift, dict) else {}
    return [_float(v.get("applicable_rate")), _float(d.get("mean")), _float(d.get("p95"))]


def _float(x):
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def keep_if_measured(cols: list, rows: list) -> tuple[list, list, str]:
    """Drop the validity columns when no run has validity (older runs rebuild byte for byte)."""
    keys = [c.key for c in VALIDITY_COLUMNS]
    idx = [i for i, c in enumerate(cols) if c.key in keys]
    if any(r[i] is not None for r in rows for i in idx):
        return cols, rows, VALIDITY_DESCRIPTION
    keep = [i for i in range(len(cols)) if i not in idx]
    return [cols[i] for i in keep], [[r[i] for i in keep] for r in rows], ""


# ----------------------------------------------------------------------------------------------
# fine-grained pairs (for the clean-vs-FG plot)

_FG = re.compile(r"-fg(?=(\.[A-Za-z0-9]+)?$)", re.IGNORECASE)


def fg_base(name: str) -> str | None:
    """The coarse counterpart of a fine-grained dataset name: flickr30k-fg -> flickr30k,
    custom:x-fg.jsonl -> custom:x.jsonl; None when ``name`` is not an FG name."""
    if not _FG.search(name):
        return None
    return _FG.sub("", name, count=1)
