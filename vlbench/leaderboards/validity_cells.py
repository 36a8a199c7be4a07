"""Validity beside every drop (issue #10): the cells the leaderboard's RSUM-change table shows next to a
perturbation's RSUM change, read from ``results.json`` ``conditions[<perturbation>]["validity"]``
(vlbench.perturbations.validity). Runs written before validity existed give empty cells."""

from __future__ import annotations

from .table_types import Column

COLUMNS = [Column("applicable", "num", 3, "applicable"), Column("drift_mean", "num", 3, "drift mean"),
           Column("drift_p95", "num", 3, "drift p95")]
DESCRIPTION = (" Validity beside the drop: applicable = share of captions the perturbation changed (the "
               "share whose model input changed after the model's truncation is in results.json), drift = 1 - cosine "
               "of all-MiniLM-L6-v2 between original and perturbed caption over (a sample of) the applied captions "
               "(mean, 95th percentile); empty when the run did not measure it.")


def cells(run, cond: str) -> list:
    v = run.condition_meta(cond).get("validity") if cond != "clean" else None
    if not isinstance(v, dict):
        return [None] * len(COLUMNS)
    drift = v.get("drift")
    d = drift if isinstance(drift, dict) else {}
    return [_f(v.get("applicable_rate")), _f(d.get("mean")), _f(d.get("p95"))]


def _f(x):
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def keep_if_measured(cols: list, rows: list) -> tuple[list, list, str]:
    """Drop the validity columns when no run has validity (older runs rebuild byte for byte)."""
    keys = [c.key for c in COLUMNS]
    idx = [i for i, c in enumerate(cols) if c.key in keys]
    if any(r[i] is not None for r in rows for i in idx):
        return cols, rows, DESCRIPTION
    keep = [i for i in range(len(cols)) if i not in idx]
    return [cols[i] for i in keep], [[r[i] for i in keep] for r in rows], ""
