"""Statistics over per-query results: the paired bootstrap of a perturbation's metric changes (the metrics
the registry marks ``bootstrap``: RSUM) and the model-input analysis (which queries each perturbation moves, and how
alike those sets are)."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import compute
from .specs import DIRECTIONS, builtins


def per_query_column(evals: list[compute.Evaluation], direction: str, column: str) -> np.ndarray | None:
    """One per-query column over the folds, or None where an evaluation lacks it."""
    cols = [e.per_query(direction).get(column) for e in evals]
    present = [c for c in cols if c is not None]
    return np.concatenate(present) if len(present) == len(cols) else None


def per_query_rsum(evals: list[compute.Evaluation], direction: str) -> np.ndarray:
    col = per_query_column(evals, direction, "rsum")
    assert col is not None  # rsum: a built-in metric, a column of every evaluation
    return col


def _resample(v: np.ndarray, n_boot: int, rng) -> np.ndarray:
    """Means of ``n_boot`` resamples of the queries with replacement, vectorized in chunks of replicates."""
    n = len(v)
    reps = []
    for start in range(0, n_boot, 100):
        m = min(100, n_boot - start)
        reps.append(v[rng.integers(0, n, size=(m, n))].mean(axis=1) if n else np.full(m, np.nan))
    return np.concatenate(reps)


#: public name of the drops' bootstrap draws (vlbench.compare reuses them)
resample_means = _resample


def paired_bootstrap(clean: list[compute.Evaluation], pert: list[compute.Evaluation], n_boot: int,
                     seed: int) -> list[dict]:
    """CIs of the change of every metric the registry marks ``bootstrap`` (RSUM), from per-query values,
    resampling queries (paired: same queries); one generator, metrics in registry order, i2t before t2i;
    "both" for a metric with a total (the sum of the two directions' changes)."""
    rng = np.random.default_rng(seed)
    out = []
    for m in builtins():
        if not m.bootstrap:
            continue
        for x in m.params(clean[0]):
            col = m.column_name(x)
            diffs = {}
            for d in DIRECTIONS:
                a, b = per_query_column(pert, d, col), per_query_column(clean, d, col)
                if a is not None and b is not None:
                    diffs[d] = a - b
            boots = {d: _resample(v, n_boot, rng) for d, v in diffs.items()}
            if m.total and len(diffs) == 2:
                diffs["both"], boots["both"] = None, boots["i2t"] + boots["t2i"]
            for d, dist in boots.items():
                point = sum(diffs[x_].mean() for x_ in DIRECTIONS) if d == "both" else diffs[d].mean()
                out.append({"direction": d, "metric": m.name, **({} if x is None else {"k": x}),
                            "delta": float(point), "ci_low": float(np.quantile(dist, 0.025)),
                            "ci_high": float(np.quantile(dist, 0.975)), "n_boot": n_boot, "alpha": 0.05, "seed": seed})
    return out


def query_scores(evals: list[compute.Evaluation], how: str) -> np.ndarray:
    """Per t2i caption query: the score whose change groups queries in the model-input analysis."""
    if how == "rsum":
        return per_query_rsum(evals, "t2i")
    # "rank" (checked by run_config.validate)
    return -np.concatenate([e.t2i.best_rank for e in evals]).astype(np.float64)


def model_input_analysis(clean_scores: np.ndarray, pert_scores: dict[str, np.ndarray]) -> dict:
    """The model-input analysis, reading documented in docs/metrics.md:
    for each perturbation, t2i caption queries fall into decreased / increased / unchanged by the
    change of their per-query score against clean; for each group, the Jaccard similarity of the
    query sets of every pair of perturbations, averaged over the pairs (pairs where both sets are
    empty are skipped)."""
    groups = {}
    for name, s in pert_scores.items():
        d = s - clean_scores
        groups[name] = {"decreased": set(np.flatnonzero(d < 0).tolist()),
                        "increased": set(np.flatnonzero(d > 0).tolist()),
                        "unchanged": set(np.flatnonzero(d == 0).tolist())}
    names = sorted(groups)
    out: dict[str, Any] = {"groups": {n: {g: len(v) for g, v in groups[n].items()} for n in names}, "jaccard": {},
                           "pairs": 0}
    for g in ("decreased", "increased", "unchanged"):
        vals = []
        for a in range(len(names)):
            for b in range(a + 1, len(names)):
                A, B = groups[names[a]][g], groups[names[b]][g]
                union = len(A | B)
                if union:
                    vals.append(len(A & B) / union)
        out["jaccard"][g] = float(np.mean(vals)) if vals else None
        out["pairs"] = len(names) * (len(names) - 1) // 2
    return out
