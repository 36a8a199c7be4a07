"""A comparison record that proves what it claims (issue #32): :func:`seal` adds, to what ``compare_runs``
computed, each run's ``results_hash`` and the sha256 of the per-query file the values came from, and a
``record_hash`` over the whole record; :func:`record_problem` says what is wrong with a record read back (a
missing key, a row naming a run the record does not list, an entry that is not an object, a hash that does
not match), and :func:`run_mismatch` whether the runs a reader has are the ones the record was computed from.
The leaderboard (``leaderboard build --comparison``) shows a record's rows only when all three hold."""

from __future__ import annotations

from ..runfolder import FILES, PER_QUERY
from ..util.io import sha256_json

RECORD_HASH = "record_hash"
#: the keys of a record, of each of its runs and of each row that a reader uses
RECORD_KEYS = ("kind", "metric", "test", "correction", "alpha", "family_size", "dataset", "runs", "rows")
RUN_KEYS = ("run_id", "model", "model_hash", "results_hash", "per_query_sha256")
ROW_KEYS = ("run_a", "run_b", "condition", "direction", "kind", "n_queries", "diff", "ci_low", "ci_high", "p_adj",
            "separable")


def record_hash(rec: dict) -> str:
    """The record's hash: sha256 of its strict-JSON form without the hash itself."""
    return sha256_json({k: v for k, v in rec.items() if k != RECORD_HASH})


def seal(rec: dict, runs) -> dict:
    """``rec`` with, per run, the hashes of what it was computed from, and the record's own hash (a new dict;
    ``runs``: the RunData the record was computed from, in its order)."""
    entries = [dict(e, results_hash=r.record.results_hash,
                    per_query_sha256=(r.record.other.get(FILES) or {}).get(PER_QUERY, {}).get("sha256"))
               for e, r in zip(rec["runs"], runs)]
    out = {**rec, "runs": entries}
    out[RECORD_HASH] = record_hash(out)
    return out


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
        if not isinstance(e, dict) or any(k not in e for k in RUN_KEYS):
            return f"run entry {i} is not an object with {', '.join(RUN_KEYS)}"
    ids = {e["run_id"] for e in rec["runs"]}
    for i, r in enumerate(rec["rows"]):
        if not isinstance(r, dict) or any(k not in r for k in ROW_KEYS):
            return f"row {i} is not an object with {', '.join(ROW_KEYS)}"
        if r["run_a"] not in ids or r["run_b"] not in ids:
            return f"row {i} names a run the record does not list ({r['run_a']!r} vs {r['run_b']!r})"
    if rec[RECORD_HASH] != record_hash(rec):
        return "its record_hash does not match its content (the record was edited after 'vlbench compare' wrote it)"
    return None


def run_mismatch(entry: dict, record) -> str | None:
    """Why the run ``record`` (a RunRecord) is not the one the record's run ``entry`` was computed from, or None."""
    if entry["results_hash"] != record.results_hash:
        return f"run {entry['run_id']}'s results_hash differs from the one the comparison was computed from"
    pq = (record.other.get(FILES) or {}).get(PER_QUERY, {}).get("sha256") if isinstance(record.other, dict) else None
    if entry["per_query_sha256"] != pq:
        return f"run {entry['run_id']}'s per-query file is not the one the comparison was computed from"
    return None
