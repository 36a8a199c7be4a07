"""``compare_runs``: paired differences between runs of different models on the same dataset, per condition
and direction, with a bootstrap interval, a p-value and a family-wise correction (docs/compare.md)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..errors import OptionError, VlbenchError
from ..results import DIRECTIONS
from . import paired
from .data import RunData, check_comparable, check_same_queries, load_run
from .record import seal

TESTS = ("randomization", "bootstrap", "ttest")
CORRECTIONS = ("holm", "bonferroni", "none")
RECORD_KIND = "vlbench-comparison"
ROW_KEYS = ("run_a", "run_b", "model_a", "model_b", "condition", "direction", "kind", "n_queries", "a", "b", "diff",
            "ci_low", "ci_high", "p", "p_adj", "separable", "exact")


def _check_options(runs, metric, test, correction, n_resamples, alpha) -> None:
    if len(runs) < 2:
        raise OptionError("RUN", f"compare needs at least two runs, got {len(runs)}", "vlbench compare RUN_A RUN_B")
    if test not in TESTS:
        raise OptionError("--test", f"unknown test {test!r}; choose one of {', '.join(TESTS)}")
    if correction not in CORRECTIONS:
        raise OptionError("--correction", f"unknown correction {correction!r}; choose one of "
                                          f"{', '.join(CORRECTIONS)}")
    if not isinstance(n_resamples, int) or n_resamples < 100:
        raise OptionError("--n-resamples", f"must be an integer of at least 100, got {n_resamples!r}")
    if not 0 < alpha < 1:
        raise OptionError("--alpha", f"must be between 0 and 1, got {alpha!r}")


def _shared_conditions(runs: list[RunData], notes: list[str]) -> list[str]:
    """Conditions every run has, minus perturbations whose output (captions hash) differs between runs."""
    sets = [set(r.conditions) for r in runs]
    shared = set.intersection(*sets)
    for c in sorted(set.union(*sets) - shared):
        notes.append(f"condition {c} is not in every run (only in "
                     f"{', '.join(r.folder for r in runs if c in r.conditions)})"
                     ": not compared")
    out = []
    for c in sorted(shared, key=lambda c: (c != "clean", c)):
        hashes = {str(r.record.condition(c).meta.get("captions_hash")) for r in runs}
        if c != "clean" and len(hashes) > 1:
            notes.append(f"condition {c}: the perturbed captions differ between runs (captions_hash), so its "
                         "queries are not the same: not compared")
            continue
        out.append(c)
    return out


def _column(run: RunData, cond: str, d: str, metric: str) -> np.ndarray:
    cols = run.tables[(cond, d)].columns
    if metric not in cols:
        have = ", ".join(c for c in run.header if c in cols)
        raise OptionError("--metric", f"run {run.folder} has no per-query column {metric!r} for {cond} {d}; its "
                                      f"columns: {have}")
    return cols[metric]


def _strata(a: RunData, b: RunData, cond: str, dirs: tuple, metric: str, robust: bool):
    """(paired differences per direction, means of A and B) with queries where a value is missing dropped."""
    strata, ma, mb = [], 0.0, 0.0
    for d in dirs:
        xa, xb = _column(a, cond, d, metric), _column(b, cond, d, metric)
        if robust:
            xa, xb = xa - _column(a, "clean", d, metric), xb - _column(b, "clean", d, metric)
        ok = ~(np.isnan(xa) | np.isnan(xb))
        strata.append(xa[ok] - xb[ok])
        ma, mb = (ma + float(xa[ok].mean()) if ok.any() else math.nan,
                  mb + float(xb[ok].mean()) if ok.any() else math.nan)
    return strata, ma, mb


def _row(a: RunData, b: RunData, cond: str, direction: str, kind: str, opts: dict) -> dict | None:
    dirs = DIRECTIONS if direction == "both" else (direction,)
    if any((c, d) not in r.tables for r in (a, b) for d in dirs for c in ({cond, "clean"} if kind == "robustness"
                                                                             else {cond})):
        return None
    strata, ma, mb = _strata(a, b, cond, dirs, opts["metric"], kind == "robustness")
    if any(len(s) == 0 for s in strata):
        return None
    weights = [1.0] * len(strata)
    key = "|".join([a.record.run_id, b.record.run_id, cond, direction, kind, opts["metric"]])
    dist = paired.bootstrap_dist(strata, weights, opts["n_resamples"], paired.generator(opts["seed"], key, "ci"))
    lo, hi = paired.percentile_ci(dist, opts["alpha"])
    exact = None
    if opts["test"] == "randomization":
        p, exact = paired.sign_flip_p(strata, weights, opts["n_resamples"], paired.generator(opts["seed"], key, "p"))
    elif opts["test"] == "bootstrap":
        p = paired.bootstrap_p(dist)
    else:
        p = paired.ttest_p(strata[0])
    return {"run_a": a.record.run_id, "run_b": b.record.run_id, "model_a": a.record.model.spec,
            "model_b": b.record.model.spec, "condition": cond, "direction": direction, "kind": kind,
            "n_queries": int(sum(len(s) for s in strata)), "a": ma, "b": mb, "diff": paired.statistic(strata, weights),
            "ci_low": lo, "ci_high": hi, "p": p, "p_adj": None, "separable": None, "exact": exact}


def compare_loaded(runs: list[RunData], metric: str = "rsum", test: str = "randomization", correction: str = "holm",
                   n_resamples: int = 10000, seed: int = 0, alpha: float = 0.05) -> dict:
    """The comparison record of loaded runs (see :func:`compare_runs`)."""
    _check_options(runs, metric, test, correction, n_resamples, alpha)
    check_comparable(runs)
    notes: list[str] = []
    conds = _shared_conditions(runs, notes)
    for c in conds:
        for d in DIRECTIONS:
            if all((c, d) in r.tables for r in runs):
                check_same_queries(runs, c, d)
    opts = {"metric": metric, "test": test, "n_resamples": n_resamples, "seed": seed, "alpha": alpha}
    dirs = DIRECTIONS + (("both",) if metric == "rsum" and test != "ttest" else ())
    rows = []
    for a, b in itertools.combinations(runs, 2):
        for c in conds:
            for d in dirs:
                for kind in ("difference",) if c == "clean" else ("difference", "robustness"):
                    row = _row(a, b, c, d, kind, opts)
                    if row is not None:
                        rows.append(row)
    for row, adj in zip(rows, paired.adjust([r["p"] for r in rows], correction)):
        row["p_adj"], row["separable"] = adj, adj is not None and adj < alpha
    if not rows:
        raise VlbenchError("the runs share no condition and direction with per-query values to compare",
                           "compare runs of the same dataset made with the same conditions")
    return {"kind": RECORD_KIND, "format_version": 1, "metric": metric, "test": test, "correction": correction,
            "alpha": alpha, "n_resamples": n_resamples, "seed": seed, "family_size": len(rows),
            "dataset": {"name": runs[0].record.dataset.name, "hash": runs[0].record.dataset.hash},
            "runs": [{"run_id": r.record.run_id, "folder": r.folder, "model": r.record.model.spec,
                      "model_hash": r.record.model.hash} for r in runs],
            "rows": rows, "notes": notes}


def compare_runs(paths, metric: str = "rsum", test: str = "randomization", correction: str = "holm",
                 n_resamples: int = 10000, seed: int = 0, alpha: float = 0.05) -> dict:
    """Compare runs of different models on the same dataset (same content hash, same queries).

    For every pair of runs (in the given order, A before B), every condition they share and every direction
    (and ``both`` = i2t + t2i for RSUM): the mean paired difference A - B of the per-query ``metric``
    ("rsum": the per-query sum of the Recall@k hits, whose mean is the run's RSUM), its paired bootstrap
    interval and a p-value (``test``); for every perturbation also the robustness difference, per query
    (A_cond - A_clean) - (B_cond - B_clean). p-values are adjusted over the whole family (``correction``).
    Deterministic for a ``seed``. Returns the comparison record (docs/compare.md)."""
    runs = [load_run(p) for p in paths]
    return seal(compare_loaded(runs, metric, test, correction, n_resamples, seed, alpha), runs)  # record.py
