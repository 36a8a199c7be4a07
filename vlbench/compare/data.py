"""Reading what a comparison needs from run folders: the typed results.json and the per-query values of
per_query.csv.gz, keyed by (condition, direction) and aligned by query."""

from __future__ import annotations

import csv
import gzip
import math
import os
from dataclasses import dataclass, field

import numpy as np

from ..errors import VlbenchError
from ..metrics.specs import builtins
from ..results import MetricKey, RunRecord, SchemaTooNew, UnreadableResults
from ..runfolder import PER_QUERY, RESULTS, per_query_file

_KEY_COLUMNS = ("condition", "fold", "direction", "query_index", "query_id")


@dataclass
class QueryTable:
    """One (condition, direction) of a run: the query keys (fold, index, id) in file order and every
    per-query column as floats (an empty cell is NaN)."""

    keys: list[tuple[str, str, str]]
    columns: dict[str, np.ndarray]


@dataclass
class RunData:
    folder: str
    record: RunRecord
    tables: dict[tuple[str, str], QueryTable] = field(default_factory=dict)
    header: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.record.model.spec} ({self.record.run_id})"

    @property
    def conditions(self) -> list[str]:
        return sorted({c for c, _ in self.tables}, key=lambda c: (c != "clean", c))


def _folder(path) -> str:
    p = os.fspath(path)
    return os.path.dirname(p) or "." if os.path.basename(p) == RESULTS else p


def read_per_query(path: str, conditions: set[str] | None = None) -> tuple[list[str], dict]:
    """(header, {(condition, direction): QueryTable}) of a per_query.csv.gz; ``conditions``: read only these."""
    raw: dict[tuple[str, str], tuple[list, list]] = {}
    with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if not header or any(c not in header for c in _KEY_COLUMNS):
            raise VlbenchError(f"{path} is not a per-query file of a vlbench run (its header lacks "
                               f"{', '.join(c for c in _KEY_COLUMNS if c not in (header or []))})",
                               "re-run the model with 'vlbench run' to write it again")
        ci, fi, di, qi, ii = (header.index(c) for c in _KEY_COLUMNS)
        for row in reader:
            if conditions is not None and row[ci] not in conditions:
                continue
            keys, rows = raw.setdefault((row[ci], row[di]), ([], []))
            keys.append((row[fi], row[qi], row[ii]))
            rows.append(row)
    values = [i for i, h in enumerate(header) if h not in _KEY_COLUMNS]
    out = {}
    for key, (keys, rows) in raw.items():
        out[key] = QueryTable(keys, {header[i]: _floats([r[i] if i < len(r) else "" for r in rows]) for i in values})
    return header, out


def _floats(cells: list[str]) -> np.ndarray:
    """A column of cells as floats: an empty cell is NaN, True/False are 1/0, other text is NaN."""
    try:
        return np.array([c or "nan" for c in cells], dtype=np.float64)
    except ValueError:
        def one(c):
            try:
                return float(c)
            except ValueError:
                return {"True": 1.0, "False": 0.0}.get(c, np.nan)
        return np.array([one(c) for c in cells], dtype=np.float64)


def load_run(path, conditions: set[str] | None = None) -> RunData:
    """A run folder (or its results.json) with its per-query values; refused by name when unreadable."""
    folder = _folder(path)
    try:
        record = RunRecord.load(folder)
    except (UnreadableResults, SchemaTooNew) as exc:
        raise VlbenchError(f"run {folder} cannot be read: {exc}", "pass run folders written by 'vlbench run'") \
            from None
    pq = per_query_file(folder, record.other)  # proven by the run's file hashes; never a path elsewhere
    if pq is None:
        raise VlbenchError(f"run {folder} has no {PER_QUERY}: a comparison needs the per-query values",
                           "re-run the model with 'vlbench run' (it writes per_query.csv.gz into the run folder)")
    try:
        header, tables = read_per_query(str(pq), conditions)
    except (OSError, EOFError, ValueError, csv.Error) as exc:
        raise VlbenchError(f"{pq} cannot be read ({exc})", "re-run the model with 'vlbench run'") from None
    check_against_record(folder, record, tables)
    return RunData(folder, record, tables, header)


def _recorded_key(column: str, means: set) -> MetricKey | None:
    """The record key whose value is the mean of a per-query column (``recall@5`` -> recall, k 5), or None for a
    column that is no such mean (ranks, counts, a plug-in's own aggregate). ``means``: the metric names whose
    value is the mean of their column."""
    name, _, x = column.partition("@")
    if name not in means or (x and not x.isdigit()):
        return None
    return MetricKey("i2t", name, int(x) if x else None)


def _refuse_infinite(folder, cond: str, d: str, column: str, values: np.ndarray, keys) -> None:
    bad = np.flatnonzero(np.isinf(values))
    if bad.size:
        raise VlbenchError(f"run {folder}: {bad.size} per-query value(s) of {column} for {cond} {d} in {PER_QUERY} are "
                           f"infinite (first: query {keys[bad[0]][2]}); {column} is finite for every query, so the file "
                           "was changed or damaged", "use intact run folders (re-run the model with 'vlbench run' and "
                                                     "a new --out)")


def check_against_record(folder: str, record: RunRecord, tables: dict) -> None:
    """Every per-query column whose mean is a recorded value (fold by fold, then the mean over folds, as the
    run aggregated) agrees with results.json to the rounding of the file's cells (%.6g), with a finite tolerance;
    else the per-query file is refused by name: it does not hold the values the run reported. An infinite cell in
    such a column (a built-in mean, finite for every query) is refused by name too."""
    means = {m.name for m in builtins() if m.aggregate == "mean" and not m.instances} | {"rsum"}
    for (cond, d), table in tables.items():
        folds = np.array([k[0] for k in table.keys])
        for column, values in table.columns.items():
            key = _recorded_key(column, means)
            want = None if key is None else record.value(cond, d, key.metric, key.k)
            if key is not None:  # a built-in mean's per-query value is finite (an empty cell, NaN, is no value)
                _refuse_infinite(folder, cond, d, column, values, table.keys)
            parts = [p for p in (values[folds == f] for f in dict.fromkeys(folds.tolist())) if (p == p).any()]
            if want is None or not parts:
                continue
            with np.errstate(over="ignore", invalid="ignore"):  # an overflowing mean is refused just below
                got = float(np.mean([np.nanmean(p) for p in parts]))
                tol = 1e-5 * max(float(np.nanmean(np.abs(p))) for p in parts) + 1e-9  # %.6g: 5e-6 relative per cell
            if not (math.isfinite(got) and math.isfinite(tol)):  # finite cells whose mean overflows
                tol = 0.0
            if not abs(got - want) <= tol:
                raise VlbenchError(
                    f"run {folder}: the per-query {column} of {cond} {d} in {PER_QUERY} averages {got:.6g}, but its "
                    f"{RESULTS} reports {want:.6g}: the per-query file does not hold the values the run reported",
                    "compare intact run folders (re-run the model with 'vlbench run' and a new --out)")


def _protocol(rec: RunRecord) -> dict:
    s = rec.settings or {}
    proto = s.get("protocol")
    proto = proto if isinstance(proto, dict) else {}
    return {"k": s.get("k"), "protocol": proto.get("name"), "i2t_recall": proto.get("i2t_recall"),
            "gallery": proto.get("gallery"), "relevance": s.get("relevance")}


def _image_identity(meta: dict) -> dict:
    """What makes an image corruption the same condition in two runs: the corruption, severity, seed, the
    geometry it was made at (the model's input size, whichever it is, or the original size, as the leaderboard
    groups them) and the implementation that made it (a backend, where recorded)."""
    if meta.get("kind") != "image":
        return {}
    at = meta.get("corrupted_at")
    geometry = "input" if isinstance(at, int) and not isinstance(at, bool) else "original" if \
        at == "original size" else str(at)
    return {"corruption": meta.get("corruption"), "severity": meta.get("severity"), "seed": meta.get("seed"),
            "geometry": geometry, **{k: v for k, v in meta.items() if "backend" in k}}


def check_comparable(runs: list[RunData]) -> None:
    """Refuse runs on different datasets (content hash), scored differently (k, protocol), or whose shared image
    condition was corrupted differently (geometry, seed, backend: :func:`_image_identity`)."""
    first = runs[0]
    for r in runs[1:]:
        a, b = first.record.dataset, r.record.dataset
        if a.hash != b.hash:
            raise VlbenchError(
                f"runs {first.folder} and {r.folder} are on different datasets: {a.name} [{str(a.hash)[:12]}] vs "
                f"{b.name} [{str(b.hash)[:12]}] (content hash differs), so their queries cannot be paired",
                "compare runs of the same dataset (same images and captions)")
        pa, pb = _protocol(first.record), _protocol(r.record)
        diff = [f"{k}: {pa[k]} vs {pb[k]}" for k in pa if pa[k] != pb[k]]
        if diff:
            raise VlbenchError(f"runs {first.folder} and {r.folder} were scored differently ({'; '.join(diff)})",
                               "compare runs made with the same --k, protocol and relevance options")
        for c in sorted(set(first.conditions) & set(r.conditions)):
            ia, ib = _image_identity(first.record.condition(c).meta), _image_identity(r.record.condition(c).meta)
            diff = [f"{k}: {ia[k]} vs {ib[k]}" for k in sorted(set(ia) | set(ib)) if ia.get(k) != ib.get(k)]
            if diff:
                raise VlbenchError(
                    f"runs {first.folder} and {r.folder} both have image condition {c!r}, but its corrupted images "
                    f"were made differently ({'; '.join(diff)}), so it is not the same condition",
                    "compare runs made with the same --corrupt-at and --seed (the leaderboard refuses the same mix)")


def check_same_queries(runs: list[RunData], condition: str, direction: str) -> None:
    """Refuse a (condition, direction) whose queries differ between runs, naming the first difference."""
    base = runs[0].tables[(condition, direction)].keys
    for r in runs[1:]:
        keys = r.tables[(condition, direction)].keys
        if keys != base:
            where = next((i for i, (x, y) in enumerate(zip(base, keys)) if x != y), min(len(base), len(keys)))
            what = (f"{len(base)} vs {len(keys)} queries" if len(base) != len(keys) else
                    f"query {where}: {base[where][2]} (fold {base[where][0]}) vs {keys[where][2]}")
            raise VlbenchError(f"runs {runs[0].folder} and {r.folder} do not share the queries of {condition} "
                               f"{direction} ({what}); paired comparisons need the same queries in the same order",
                               "compare runs of the same dataset, folds and perturbation settings")
