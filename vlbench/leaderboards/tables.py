"""Leaderboard tables (Tables 5.2, 5.3, 5.4 of the chapter, RSUM changes, every value) as plain data.

Everything here is pure Python on :class:`~vlbench.leaderboards.store.Run` objects: no pandas, no
plotting. Rows are sorted by (dataset label, model label, hashes, condition, ...) so that the tables
never depend on the order of the inputs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import VlbenchError
from .store import Run, Selection, condition_key

DIR_ORDER = {"i2t": 0, "t2i": 1, "both": 2}
METRIC_ORDER = {m: i for i, m in enumerate(
    ["recall", "rsum", "medr", "meanr", "r_precision", "map_at_r", "dcg_cm", "ndcg_cm"])}
MIA_GROUPS = ("decreased", "increased", "unchanged")


@dataclass(frozen=True)
class Column:
    key: str  # CSV header and HTML data-key
    kind: str = "text"  # text | num | int
    digits: int = 2  # decimals in Markdown / HTML (CSV always uses the fixed 6-decimal format)
    label: str | None = None  # Markdown / HTML header (default: key)
    short: int = 0  # show only the first N characters in Markdown / HTML (hashes); CSV keeps all

    @property
    def title(self) -> str:
        return self.label or self.key


@dataclass
class Table:
    name: str  # file stem
    title: str
    description: str
    columns: list[Column]
    rows: list[list]
    runs: list[str] = field(default_factory=list)  # run ids the rows come from

    def column(self, key: str) -> int:
        return [c.key for c in self.columns].index(key)


# ----------------------------------------------------------------------------------------------
# labels and the mixed-results check

@dataclass
class Labels:
    model: dict[str, str]  # model hash -> label
    dataset: dict[tuple, str]  # (name, hash) -> label
    mixed: list[dict]  # what is mixed (empty when nothing is)
    flags: dict[str, list[str]]  # run path -> flags

    def run_flags(self, *runs: Run) -> str:
        out = set()
        for r in runs:
            if r is not None:
                out.update(self.flags.get(r.path, []))
        return "; ".join(sorted(out))


def _short(h: str) -> str:
    return h[:8]


def make_labels(runs: list[Run], selection: Selection, allow_mixed: bool) -> Labels:
    """Display labels for models and datasets, and the refusal to mix incomparable results.

    Runs are comparable when every run of one dataset name has the same dataset content hash and all
    runs share one metric version. Otherwise the build stops, naming the runs, unless ``allow_mixed``:
    then datasets with several hashes are shown as ``name [hash8]`` and rows are flagged.
    """
    used = selection.used_runs()
    # model labels: the spec of the newest run with that hash; collisions get the short hash
    newest: dict[str, Run] = {}
    for r in runs:
        if r.model_hash not in newest or r.newness() > newest[r.model_hash].newness():
            newest[r.model_hash] = r
    by_label: dict[str, list[str]] = {}
    for h, r in newest.items():
        by_label.setdefault(r.model_label, []).append(h)
    model = {}
    for lab, hashes in by_label.items():
        precisions = {h: str(newest[h].doc["settings"].get("precision") or "") for h in hashes}
        by_precision = len(set(precisions.values())) == len(hashes)  # e.g. the same spec in fp32 and fp16
        for h in hashes:
            model[h] = lab if len(hashes) == 1 else f"{lab} [{precisions[h] if by_precision else _short(h)}]"

    hashes: dict[str, dict[str, list[Run]]] = {}
    versions: dict[str, list[Run]] = {}
    for r in used:
        hashes.setdefault(r.dataset_name, {}).setdefault(r.dataset_hash, []).append(r)
        versions.setdefault(r.metric_version, []).append(r)
    mixed, flags = [], {}
    for name in sorted(hashes):
        if len(hashes[name]) > 1:
            mixed.append({"what": "dataset_hash", "dataset": name,
                          "variants": {h: sorted(x.ref for x in rs) for h, rs in sorted(hashes[name].items())}})
            for h, rs in hashes[name].items():
                for x in rs:
                    flags.setdefault(x.path, []).append(f"mixed: dataset hash {_short(h)}")
    if len(versions) > 1:
        mixed.append({"what": "metric_version",
                      "variants": {v: sorted(x.ref for x in rs) for v, rs in sorted(versions.items())}})
        for v, rs in versions.items():
            for x in rs:
                flags.setdefault(x.path, []).append(f"mixed: metric version {v}")
    if mixed and not allow_mixed:
        lines = []
        for m in mixed:
            if m["what"] == "dataset_hash":
                lines.append(f"dataset {m['dataset']!r} has {len(m['variants'])} different content hashes "
                             "(its captions or images changed between runs):")
                for h, ids in m["variants"].items():
                    lines.append(f"    {_short(h)}: " + _name_runs(hashes[m["dataset"]][h]))
            else:
                lines.append(f"the runs use {len(m['variants'])} different metric versions:")
                for v, ids in m["variants"].items():
                    lines.append(f"    metric version {v}: " + _name_runs(versions[v]))
        raise VlbenchError("refusing to put incomparable results side by side:\n  " + "\n  ".join(lines),
                           "if these are different datasets (e.g. two manifests that share a file name), give each "
                           "its own name: vlbench run --dataset-name NAME; otherwise build these runs into separate "
                           "leaderboards, re-run the old ones, or pass --allow-mixed to show them side by side, marked")
    dataset = {}
    for name, hs in hashes.items():
        for h in hs:
            dataset[(name, h)] = name if len(hs) == 1 else f"{name} [{_short(h)}]"
    return Labels(model, dataset, mixed, flags)


def _name_runs(runs: list[Run]) -> str:
    return ", ".join(f"{r.ref} ({r.path})" for r in sorted(runs, key=lambda r: (r.ref, r.path)))


# ----------------------------------------------------------------------------------------------
# helpers

def _values(run: Run, condition: str) -> dict:
    return {(r["direction"], r["metric"], r["k"]): r["value"] for r in run.records(condition)}


def _dcg_p(run: Run) -> int | None:
    p = run.doc["settings"].get("p")
    if isinstance(p, int):
        return p
    ks = sorted({r["k"] for r in run.doc["results"] if r["metric"] == "dcg_cm" and r["k"] is not None})
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

def table_5_2(ctx: _Ctx) -> Table:
    cols = [Column("dataset"), Column("model")]
    for d in ("i2t", "t2i"):
        cols += [Column(f"{d}_recall@{k}", "num", 2, f"{d} R@{k}") for k in (1, 5, 10)]
        cols += [Column(f"{d}_dcg_cm", "num", 2, f"{d} DCG")]
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
        row = [ctx.dataset(dn, dh), ctx.model(mh)]
        for d in ("i2t", "t2i"):
            row += [v.get((d, "recall", k)) for k in (1, 5, 10)] + [v.get((d, "dcg_cm", p))]
        row += [v.get(("i2t", "rsum", None)), v.get(("t2i", "rsum", None)), p, run.ref, mh, dh,
                ctx.lab.run_flags(run)]
        rows.append(row)
        runs.add(run.ref)
    return Table("table_5_2", "Table 5.2: clean retrieval performance",
                 "One row per model and dataset, clean captions: Recall@1/5/10 and DCG_CM@p (p in column "
                 "dcg_p) per direction, and RSUM (R@1 + R@5 + R@10) per direction.", cols, rows, sorted(runs))


def table_5_3(ctx: _Ctx, direction: str = "t2i") -> Table:
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
                conds.setdefault(cond, {})[(dn, dh)] = run
        for cond in sorted(conds, key=lambda c: (c != "clean", _first_family(ctx, conds[c], c), c)):
            cells, used = [], []
            for d in dsets:
                run = conds[cond].get(d)
                cells.append(_values(run, cond).get((direction, "rsum", None)) if run else None)
                if run:
                    used.append(run)
                    runs.add(run.ref)
            rows.append([ctx.model(mh), cond, _first_family(ctx, conds[cond], cond), direction] + cells +
                        [ctx.lab.run_flags(*used)])
    which = "text-to-image RSUM (t2i R@1 + R@5 + R@10), as in the chapter" if direction == "t2i" else \
        "total RSUM (i2t + t2i: six recalls)" if direction == "both" else f"{direction} RSUM"
    name = "table_5_3" if direction == "t2i" else f"table_5_3_{'total' if direction == 'both' else direction}"
    short = "t2i" if direction == "t2i" else "total" if direction == "both" else direction
    return Table(name, f"Table 5.3: RSUM per perturbation ({short})",
                 f"Rows: model x condition (clean = no perturbation); columns: datasets. Cells: {which} "
                 f"(column rsum names the direction: 'both' = total).", cols, rows, sorted(runs))


def _first_family(ctx: _Ctx, runs_by_ds: dict, cond: str) -> str:
    fams = sorted({ctx.family(r, cond) for r in runs_by_ds.values()} - {""})
    return fams[0] if fams else ""


def rsum_changes(ctx: _Ctx) -> Table:
    """Long table of RSUM changes with the runs' paired-bootstrap intervals and the validity cells."""
    from . import validity_cells as VC
    cols = [Column("dataset"), Column("model"), Column("condition"), Column("family"), Column("direction"),
            Column("rsum_clean", "num", 2), Column("rsum", "num", 2), Column("delta", "num", 2),
            Column("rel", "num", 4), Column("ci_low", "num", 2), Column("ci_high", "num", 2),
            Column("n_boot", "int")] + VC.COLUMNS + [Column("run_id"), Column("flags")]
    rows, runs = [], set()
    for key in ctx.keys():
        mh, dn, dh = key
        for cond in sorted(ctx.pairs[key], key=condition_key):
            if cond == "clean":
                continue
            run = ctx.pairs[key][cond]
            v = _values(run, cond)
            deltas = {(x.get("direction"), x.get("metric"), x.get("k")): x for x in run.doc["deltas"]
                      if x.get("condition") == cond}
            boots = {x.get("direction"): x for x in run.doc["bootstrap"]
                     if x.get("condition") == cond and x.get("metric") == "rsum"}
            for d in ("i2t", "t2i", "both"):
                val = v.get((d, "rsum", None))
                if val is None:
                    continue
                dl = deltas.get((d, "rsum", None), {})
                b = boots.get(d, {})
                delta = dl.get("abs")
                clean = _values(run, "clean").get((d, "rsum", None))
                if delta is None and clean is not None:
                    delta = val - clean
                rows.append([ctx.dataset(dn, dh), ctx.model(mh), cond, ctx.family(run, cond), d,
                             clean if clean is not None else (val - delta if delta is not None else None),
                             val, delta, dl.get("rel"), b.get("ci_low"), b.get("ci_high"), b.get("n_boot"),
                             *VC.cells(run, cond), run.ref, ctx.lab.run_flags(run)])
                runs.add(run.ref)
    rows.sort(key=lambda r: (r[0], r[1], condition_key(r[2]), DIR_ORDER[r[4]]))
    cols, rows, extra = VC.keep_if_measured(cols, rows)  # runs without validity: the table as before
    return Table("rsum_changes", "RSUM change under each perturbation",
                 "RSUM under the perturbation minus clean RSUM of the same run, relative change, and the "
                 "run's paired-bootstrap 95% interval of the change (queries resampled)." + extra, cols, rows,
                 sorted(runs))


def table_5_4(ctx: _Ctx) -> Table:
    cols = [Column("dataset"), Column("model")] + [Column(g, "num", 4) for g in MIA_GROUPS]
    cols += [Column("pairs", "int"), Column("n_perturbations", "int"), Column("perturbations"),
             Column("score"), Column("run_id"), Column("flags")]
    rows, runs = [], set()
    for key in sorted(ctx.sel.mia, key=ctx.sort_key):
        run = ctx.sel.mia[key]
        mia = run.doc["model_input_analysis"]
        mh, dn, dh = key
        perts = sorted((mia.get("groups") or {}).keys())
        jac = mia.get("jaccard") or {}
        rows.append([ctx.dataset(dn, dh), ctx.model(mh)] + [_num(jac.get(g)) for g in MIA_GROUPS] +
                    [mia.get("pairs"), len(perts), " ".join(perts), mia.get("score"), run.ref,
                     ctx.lab.run_flags(run)])
        runs.add(run.ref)
    return Table("table_5_4", "Table 5.4: model-input analysis (Jaccard similarity per group)",
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


def value_rows(runs_by_key: dict[tuple, Run], labels: Labels) -> list[list]:
    """Long format: one row per value of each (model, dataset, condition) and the run it came from."""
    rows = []
    for (mh, dn, dh, cond), run in runs_by_key.items():
        meta = run.condition_meta(cond)
        fam = "" if cond == "clean" else str(meta.get("family") or "")
        for r in run.records(cond):
            rows.append([labels.dataset[(dn, dh)], labels.model[mh], cond, fam, r["direction"], r["metric"],
                         r["k"], r["value"], run.ref, run.model_spec, mh, dn, dh, run.metric_version,
                         run.vlbench_version, run.original_schema, run.created,
                         None if cond == "clean" else meta.get("version"),
                         None if cond == "clean" else meta.get("seed"),
                         None if cond == "clean" else meta.get("captions_hash"), labels.run_flags(run)])
    rows.sort(key=lambda x: (x[0], x[12], x[1], x[10], condition_key(x[2]), DIR_ORDER.get(x[4], 9),
                             METRIC_ORDER.get(x[5], 99), x[5], -1 if x[6] is None else x[6]))
    return rows


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
            Column("schema_version"), Column("created"), Column("results_hash", short=12), Column("flags")]
    used: dict[str, list[str]] = {}
    for (mh, dn, dh, cond), run in selection.values.items():
        used.setdefault(run.path, []).append(cond)
    for run in selection.mia.values():
        used.setdefault(run.path, [])
    rows = []
    for run in selection.used_runs():
        conds = sorted(used[run.path], key=condition_key)
        if any(r is run for r in selection.mia.values()):
            conds.append("model_input_analysis")
        rows.append([run.ref, labels.model[run.model_hash], run.model_spec, run.model_hash,
                     labels.dataset[(run.dataset_name, run.dataset_hash)], run.dataset_hash, " ".join(conds),
                     run.metric_version, run.vlbench_version, run.original_schema, run.created, run.results_hash,
                     labels.run_flags(run)])
    rows.sort(key=lambda r: (r[4], r[1], r[0], r[11]))
    return Table("provenance", "Provenance of every row", "One row per run used: what it provides (conditions), "
                 "the exact model spec and hash, the dataset and its content hash, the metric and vlbench "
                 "versions and when it ran.", cols, rows, sorted({r[0] for r in rows}))


def build_tables(selection: Selection, labels: Labels) -> list[Table]:
    ctx = _Ctx(selection, labels)
    return [table_5_2(ctx), table_5_3(ctx, "t2i"), table_5_3(ctx, "both"), table_5_4(ctx), rsum_changes(ctx),
            values_table(selection, labels), provenance_table(selection, labels)]


# ----------------------------------------------------------------------------------------------
# fine-grained pairs (for the clean-vs-FG plot)

_FG = re.compile(r"-fg(?=(\.[A-Za-z0-9]+)?$)", re.IGNORECASE)


def fg_base(name: str) -> str | None:
    """The coarse counterpart of a fine-grained dataset name: flickr30k-fg -> flickr30k,
    custom:x-fg.jsonl -> custom:x.jsonl; None when ``name`` is not an FG name."""
    if not _FG.search(name):
        return None
    return _FG.sub("", name, count=1)
