"""Statistics over per-query results: the paired bootstrap of a perturbation's RSUM change and the
model-input analysis of the chapter (Table 5.4)."""

from __future__ import annotations

import numpy as np

from . import compute as M


def per_query_rsum(evals: list[M.Evaluation], direction: str) -> np.ndarray:
    return np.concatenate([e.per_query(direction)["rsum"] for e in evals])


def paired_bootstrap(clean: list[M.Evaluation], pert: list[M.Evaluation], n_boot: int, seed: int) -> list[dict]:
    """CI of the RSUM change from per-query values, resampling queries (paired: same queries)."""
    rng = np.random.default_rng(seed)
    diffs = {d: per_query_rsum(pert, d) - per_query_rsum(clean, d) for d in M.DIRECTIONS}
    boots = {}
    for d, v in diffs.items():  # resample queries with replacement, vectorized in chunks of replicates
        n = len(v)
        reps = []
        for start in range(0, n_boot, 100):
            m = min(100, n_boot - start)
            reps.append(v[rng.integers(0, n, size=(m, n))].mean(axis=1) if n else np.full(m, np.nan))
        boots[d] = np.concatenate(reps)
    out = []
    for d in ("i2t", "t2i", "both"):
        point = sum(diffs[x].mean() for x in M.DIRECTIONS) if d == "both" else diffs[d].mean()
        dist = boots["i2t"] + boots["t2i"] if d == "both" else boots[d]
        out.append({"direction": d, "metric": "rsum", "delta": float(point),
                    "ci_low": float(np.quantile(dist, 0.025)), "ci_high": float(np.quantile(dist, 0.975)),
                    "n_boot": n_boot, "alpha": 0.05, "seed": seed})
    return out


def query_scores(evals: list[M.Evaluation], how: str) -> np.ndarray:
    """Per t2i caption query: the score whose change groups queries in the model-input analysis."""
    if how == "rsum":
        return per_query_rsum(evals, "t2i")
    return -np.concatenate([e.t2i.best_rank for e in evals]).astype(np.float64)  # "rank" (checked by run_config.validate)


def model_input_analysis(clean_scores: np.ndarray, pert_scores: dict[str, np.ndarray]) -> dict:
    """Chapter 5.5.4 / Table 5.4, reading documented in docs/metrics.md:
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
    out = {"groups": {n: {g: len(v) for g, v in groups[n].items()} for n in names}, "jaccard": {}, "pairs": 0}
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
