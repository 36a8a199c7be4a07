"""A finished run, read back: the one module the applications (analyze, compare, explain, leaderboards) read a
run folder through, so that none of them imports another.

* per-query values (``per_query.csv.gz``): :func:`read_per_query`, :func:`proven_per_query` (the run's own file,
  agreeing with its record), :func:`load_run` (record + values: :class:`RunData`), :func:`check_against_record`;
* retrieved lists and flips (``retrieved.npz``, ``flips.csv``): :func:`read_retrieved`, :func:`flip_rows`,
  :func:`read_flips`;
* the run's dataset, loaded again and checked against the recorded content hash: :func:`load_run_dataset`;
* comparison records (``vlbench compare``'s comparison.json, read back by the leaderboard):
  :func:`record_problem`, :func:`run_mismatch` (sealed with runfolder's :func:`~vlbench.runfolder.record_hash`).

Why a module of its own, and not vlbench/runfolder.py: runfolder.py is the foundation every writer uses (names,
claim, the results writer, the file manifest and its proof) and imports only the standard library and
vlbench.util; reading a run back needs the typed record, the metric specs (which per-query columns are recorded
means), numpy, and for the dataset the loaders and the run's gallery (vlbench.datasets, vlbench.pipeline), all of
which sit above the foundation. So it is one layer of its own, above the pipeline and below the applications
(docs/architecture.md). Every file it reads is proven by the run's file hashes first (runfolder.run_file).
"""

from __future__ import annotations

import csv
import gzip
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from .errors import DataError, VlbenchError
from .metrics.specs import builtins
from .results import MetricKey, RunRecord, SchemaTooNew, UnreadableResults
from .runfolder import (
    FILES,
    FLIPS,
    PER_ITEM,
    PER_QUERY,
    RECORD_HASH,
    RESULTS,
    RETRIEVED,
    per_query_file,
    record_hash,
    run_file,
)

_KEY_COLUMNS = ("condition", "fold", "direction", "query_index", "query_id")


# ----------------------------------------------------------------------------------------------
# per-query values

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


def run_folder_of(path) -> str:
    """The run folder of ``path`` (a run folder, or its results.json)."""
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


def proven_per_query(folder: str, record: RunRecord, conditions: set[str] | None = None) -> dict | None:
    """{(condition, direction): QueryTable} of the run's own per-query file (proven by its file hashes, never a
    path elsewhere) agreeing with its record (:func:`check_against_record`); None when the run wrote none.
    VlbenchError (or the reader's OSError, ValueError, ...) when the file is not the run's or does not agree."""
    path = per_query_file(folder, record.other)
    if path is None:
        return None
    _, tables = read_per_query(str(path), conditions)
    check_against_record(folder, record, tables)
    return tables


def load_run(path, conditions: set[str] | None = None) -> RunData:
    """A run folder (or its results.json) with its per-query values; refused by name when unreadable."""
    folder = run_folder_of(path)
    try:
        record = RunRecord.load(folder)
    except (UnreadableResults, SchemaTooNew) as exc:
        raise VlbenchError(f"run {folder} cannot be read: {exc}", "pass run folders written by 'vlbench run'") \
            from None
    pq = per_query_file(folder, record.other)  # proven by the run's file hashes; never a path elsewhere
    if pq is None and record.other.get("task"):  # a choice task: its items are its queries
        header, tables = read_per_item(folder, record, conditions)
        check_against_record(folder, record, tables)
        return RunData(folder, record, tables, header)
    if pq is None:
        raise VlbenchError(f"run {folder} has no {PER_QUERY}: a comparison needs the per-query values",
                           "re-run the model with 'vlbench run' (it writes per_query.csv.gz into the run folder)")
    try:
        header, tables = read_per_query(str(pq), conditions)
    except (OSError, EOFError, ValueError, csv.Error) as exc:
        raise VlbenchError(f"{pq} cannot be read ({exc})", "re-run the model with 'vlbench run'") from None
    check_against_record(folder, record, tables)
    return RunData(folder, record, tables, header)


def read_per_item(folder: str, record: RunRecord, conditions: set[str] | None = None) -> tuple[list[str], dict]:
    """(header, {(condition, "i2t"): QueryTable}) of a choice-task run's per_item.csv.gz (proven by its file hashes):
    one query per item (its id), every numeric column, and ``accuracy`` = 100 x correct (whose mean is the recorded
    accuracy), so ``vlbench compare --metric accuracy`` pairs two models item by item."""
    path = run_file(folder, record.other, PER_ITEM)
    if path is None:
        raise VlbenchError(f"run {folder} has no {PER_ITEM}: a comparison needs the per-item values",
                           "re-run the task with 'vlbench run --task ...' (it writes per_item.csv.gz)")
    raw: dict[str, list[dict]] = {}
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
            for row in csv.DictReader(fh):
                if conditions is None or row.get("condition") in conditions:
                    raw.setdefault(str(row.get("condition")), []).append(row)
    except (OSError, EOFError, ValueError, csv.Error) as exc:
        raise VlbenchError(f"{path} cannot be read ({exc})", "re-run the task with 'vlbench run --task ...'") from None
    header = ["condition", "item_id", "accuracy"]
    out = {}
    for cond, rows in raw.items():
        cols = {"accuracy": 100.0 * _floats([r.get("correct") or "" for r in rows])}
        for name in rows[0]:
            if name not in ("condition", "item_id", "image", "scores", "set", "flip"):
                cols.setdefault(name, _floats([r.get(name) or "" for r in rows]))
                header += [name] if name not in header else []
        out[(cond, "i2t")] = QueryTable([("", str(i), str(r.get("item_id"))) for i, r in enumerate(rows)], cols)
    return header, out


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
        raise VlbenchError(f"run {folder}: {bad.size} per-query value(s) of {column} for {cond} {d} in {PER_QUERY} "
                           f"are infinite (first: query {keys[bad[0]][2]}); {column} is finite for every query, so the "
                           "file was changed or damaged",
                           "use intact run folders (re-run the model with 'vlbench run' and a new --out)")


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


# ----------------------------------------------------------------------------------------------
# retrieved lists and flips

def read_retrieved(folder: Path, results: dict | None = None) -> dict:
    """Array name -> array of the run's retrieved.npz (its top lists and first-positive ranks per condition and
    direction), proven by its file hashes; VlbenchError naming the fix for a choice-task run or a missing file."""
    task = (results or {}).get("task")
    if task:
        name = task.get("name") if isinstance(task, dict) else task
        raise VlbenchError(f"run {folder} is a choice-task run (--task {name}): it ranks no gallery, so no query "
                           "flips", "explain a retrieval run (vlbench run without --task); a task run's items are "
                           "in its per_item.csv.gz")
    path = run_file(folder, results or {}, RETRIEVED)  # the run's own lists, proven by its file hashes
    if path is None:
        raise VlbenchError(f"run {folder} has no {RETRIEVED} (the top-10 lists the failure browser shows): it was "
                           "written by a vlbench that did not keep them, or the file was removed",
                           "re-run the same 'vlbench run' command with a new --out: the embedding cache makes it "
                           "cheap (nothing is encoded again)")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {name: z[name] for name in z.files}
    except (OSError, ValueError) as exc:
        raise VlbenchError(f"{path} cannot be read ({type(exc).__name__}: {exc})",
                           "re-run the 'vlbench run' command with a new --out to write it again") from None


def flip_rows(folder, results: dict | None = None) -> list[dict]:
    """The rows of the run's flips.csv (empty when the run wrote none or it cannot be read); VlbenchError when
    the file is not the one the run wrote (runfolder.run_file)."""
    path = run_file(folder, results or {}, FLIPS)  # proven by the run's file hashes
    if path is None:
        return []
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))
    except (OSError, ValueError, csv.Error):  # UnicodeDecodeError is a ValueError
        return []


def read_flips(folder: Path, results: dict | None = None) -> dict:
    """(condition, direction) -> rows of the run's flips.csv in k order (empty when the run has none)."""
    out: dict = {}
    try:
        for row in flip_rows(folder, results):
            out.setdefault((row["condition"], row["direction"]), []).append(row)
    except KeyError:
        return {}  # the page's own counts stand without it
    for rows in out.values():
        rows.sort(key=lambda r: int(r.get("k") or 0))
    return out


# ----------------------------------------------------------------------------------------------
# the run's dataset

def _dataset_spec(results: dict, dataset: str | None) -> str:
    if dataset:
        return dataset
    info = results.get("dataset") or {}
    source = info.get("source") or {}
    manifest, hub = source.get("manifest"), source.get("spec")  # hub: hf:ORG/NAME?...&revision=<the commit read>
    return f"custom:{manifest}" if manifest else hub if isinstance(hub, str) else str(info.get("name") or "")


def load_run_dataset(results: dict, *, dataset: str | None = None, data_dir=None):
    """The run's dataset, loaded from the recorded spec (or ``dataset``), its content hash checked."""
    from . import registry  # lazy: the leaderboard reads per-query values through this module; keep it light
    from .datasets.core import limited, load_dataset  # lazy: as above
    from .pipeline.galleries import apply_gallery  # lazy: as above

    info = results.get("dataset") or {}
    spec = _dataset_spec(results, dataset)
    gallery = info.get("gallery") or "test"
    try:
        ds = load_dataset(spec, data_dir=data_dir, gallery=registry.galleries.get(gallery).loader_gallery,
                          require_images=False, download=False, extra_positives=info.get("extra_positives"))
    except VlbenchError as exc:
        raise DataError(f"the dataset of run {results.get('run_id')} ({spec!r}) cannot be loaded: {exc.message}",
                        "pass --dataset SPEC (and --data-dir DIR) naming where the run's dataset is now") from None
    # the run's gallery as it was (a smaller folder than the dataset's full one was allowed by the run itself)
    ds = apply_gallery(ds, SimpleNamespace(gallery=gallery, allow_partial_gallery=True, dataset=spec, protocol=None))
    ds = limited(ds, info.get("limit"))  # --limit: the run's first N images, cut after the gallery as the run did
    if info.get("hash") and ds.content_hash() != info["hash"]:
        raise DataError(f"the dataset loaded from {spec!r} is not the one run {results.get('run_id')} evaluated "
                        f"(content hash {ds.content_hash()[:12]}, the run's {info['hash'][:12]})",
                        "pass --dataset SPEC and --data-dir DIR naming the run's own captions and images")
    return ds


# ----------------------------------------------------------------------------------------------
# comparison records: what `vlbench compare` computed from runs, read back by the leaderboard; sealed as a run's
# results.json is (runfolder.record_hash over every field but ``record_hash``)

#: the keys of a record, of each of its runs and of each row that a reader uses
RECORD_KEYS = ("kind", "metric", "test", "correction", "alpha", "family_size", "dataset", "runs", "rows")
RECORD_RUN_KEYS = ("run_id", "model", "model_hash", "results_hash", "per_query_sha256")
RECORD_ROW_KEYS = ("run_a", "run_b", "condition", "direction", "kind", "n_queries", "diff", "ci_low", "ci_high",
                   "p_adj", "separable")


def record_problem(rec) -> str | None:
    """Why ``rec`` (a comparison.json read back) cannot be shown as measured, or None when it can."""
    if not isinstance(rec, dict):
        return "not a JSON object: not a record written by 'vlbench compare'"
    missing = [k for k in RECORD_KEYS if k not in rec]
    if missing:
        return f"no {missing[0]!r}: not a record written by 'vlbench compare'"
    if RECORD_HASH not in rec:
        return ("no record_hash (written by a vlbench before comparison records were hashed): run 'vlbench compare' "
                "again")
    if not isinstance(rec["runs"], list) or not isinstance(rec["rows"], list) or not isinstance(rec["dataset"], dict):
        return "'runs', 'rows' or 'dataset' has the wrong type"
    for i, e in enumerate(rec["runs"]):
        if not isinstance(e, dict) or any(k not in e for k in RECORD_RUN_KEYS):
            return f"run entry {i} is not an object with {', '.join(RECORD_RUN_KEYS)}"
    ids = {e["run_id"] for e in rec["runs"]}
    for i, r in enumerate(rec["rows"]):
        if not isinstance(r, dict) or any(k not in r for k in RECORD_ROW_KEYS):
            return f"row {i} is not an object with {', '.join(RECORD_ROW_KEYS)}"
        if r["run_a"] not in ids or r["run_b"] not in ids:
            return f"row {i} names a run the record does not list ({r['run_a']!r} vs {r['run_b']!r})"
    if rec[RECORD_HASH] != record_hash(rec):
        return "its record_hash does not match its content (the record was edited after 'vlbench compare' wrote it)"
    return None


def per_query_sha256(record) -> str | None:
    """The sha256 of the per-query file a run's record lists (results.json ``files``), or None."""
    other = record.other if isinstance(record.other, dict) else {}
    return (other.get(FILES) or {}).get(PER_QUERY, {}).get("sha256")


def run_mismatch(entry: dict, record) -> str | None:
    """Why the run ``record`` (a RunRecord) is not the one the record's run ``entry`` was computed from, or None."""
    if entry["results_hash"] != record.results_hash:
        return f"run {entry['run_id']}'s results_hash differs from the one the comparison was computed from"
    if entry["per_query_sha256"] != per_query_sha256(record):
        return f"run {entry['run_id']}'s per-query file is not the one the comparison was computed from"
    return None
