"""A comparison record that proves what it claims: :func:`seal` adds, to what ``compare_runs``
computed, each run's ``results_hash`` and the sha256 of the per-query file the values came from, and a
``record_hash`` over the whole record. Reading a record back (what is wrong with it, whether the runs a reader
has are the ones it was computed from) is vlbench.runread's (:func:`~vlbench.runread.record_problem`,
:func:`~vlbench.runread.run_mismatch`): the leaderboard (``leaderboard build --comparison``) shows a record's rows
only when both hold."""

from __future__ import annotations

from ..runfolder import RECORD_HASH, record_hash
from ..runread import per_query_sha256


def seal(rec: dict, runs) -> dict:
    """``rec`` with, per run, the hashes of what it was computed from, and the record's own hash (a new dict;
    ``runs``: the RunData the record was computed from, in its order)."""
    entries = [dict(e, results_hash=r.record.results_hash, per_query_sha256=per_query_sha256(r.record))
               for e, r in zip(rec["runs"], runs)]
    out = {**rec, "runs": entries}
    out[RECORD_HASH] = record_hash(out)
    return out
