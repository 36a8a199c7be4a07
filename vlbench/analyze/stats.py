"""The statistics of ``vlbench analyze``: quantile bins with cluster-bootstrap intervals, least squares with
cluster-robust intervals, and the paired per-image difference of two runs.

Queries of one image share it (five captions of a COCO image are five t2i queries whose changes are not
independent), so every interval here resamples or clusters by image: the bootstrap draws images with
replacement and takes all of their queries; the regression's covariance is the cluster-robust (CR1)
sandwich with the small-sample factor G/(G-1) * (N-1)/(N-K), the definition statsmodels uses for
``OLS(...).fit(cov_type="cluster")``, with normal-quantile intervals as statsmodels gives by default
(tests/oracle checks the coefficients, standard errors and intervals against statsmodels).
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from ..errors import VlbenchError


def _z(alpha: float) -> float:
    return NormalDist().inv_cdf(1 - alpha / 2)


def quantile_bins(x: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin number (0 .. n_bins-1) of each value by its quantile; equal values share a bin, so a feature with
    few distinct values gets fewer bins (never an empty one). NaN -> -1."""
    x = np.asarray(x, dtype=np.float64)
    out = np.full(x.shape, -1, dtype=np.int64)
    ok = ~np.isnan(x)
    if not ok.any():
        return out
    edges = np.unique(np.quantile(x[ok], np.linspace(0, 1, n_bins + 1)[1:-1], method="linear"))
    # a value equal to an edge goes to the lower bin, so the lowest values form bin 0
    raw = np.searchsorted(edges, x[ok], side="left")
    out[ok] = np.unique(raw, return_inverse=True)[1]  # bins numbered 0.. without gaps
    return out


def cluster_bootstrap_means(y: np.ndarray, groups: np.ndarray, cluster: np.ndarray, n_boot: int, seed: int,
                            alpha: float = 0.05) -> list[tuple[float, float, float, int]]:
    """Per group (0..G-1 in ``groups``): (mean, ci_low, ci_high, n) of ``y``, the interval a percentile
    bootstrap over clusters (images): each replicate draws the clusters with replacement and takes every
    query of a drawn cluster, in every group at once."""
    y = np.asarray(y, dtype=np.float64)
    groups = np.asarray(groups)
    _, cl = np.unique(np.asarray(cluster), return_inverse=True)
    n_cl, n_g = int(cl.max()) + 1 if cl.size else 0, int(groups.max()) + 1 if groups.size else 0
    # per cluster and group: sum of y and count, so a replicate is a weighted sum over clusters
    sums = np.zeros((n_cl, n_g))
    counts = np.zeros((n_cl, n_g))
    np.add.at(sums, (cl, groups), y)
    np.add.at(counts, (cl, groups), 1)
    rng = np.random.default_rng(seed)
    reps = np.full((n_boot, n_g), np.nan)
    for b in range(n_boot):
        w = np.bincount(rng.integers(0, n_cl, n_cl), minlength=n_cl).astype(np.float64)
        s, c = w @ sums, w @ counts
        with np.errstate(invalid="ignore", divide="ignore"):
            reps[b] = s / c
    out = []
    for g in range(n_g):
        n = int(counts[:, g].sum())
        mean = float(sums[:, g].sum() / n) if n else float("nan")
        r = reps[:, g][~np.isnan(reps[:, g])]
        lo, hi = (np.quantile(r, [alpha / 2, 1 - alpha / 2]) if r.size else (np.nan, np.nan))
        out.append((mean, float(lo), float(hi), n))
    return out


@dataclass
class Fit:
    """Least squares with cluster-robust (CR1) standard errors; ``names`` include "const" first."""

    names: list[str]
    coef: np.ndarray
    se: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    n: int
    n_clusters: int
    r2: float
    dropped: list[str]


def ols_cluster(y: np.ndarray, x: np.ndarray, names: list[str], cluster: np.ndarray,
                alpha: float = 0.05) -> Fit:
    """Regress ``y`` on ``x`` (columns named ``names``) with an intercept; rows with a NaN are left out;
    columns without variation (a feature constant over the queries) are dropped and named."""
    y = np.asarray(y, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64).reshape(len(y), -1)
    keep_rows = ~(np.isnan(y) | np.isnan(x).any(axis=1))
    y, x, cluster = y[keep_rows], x[keep_rows], np.asarray(cluster)[keep_rows]
    varies = [j for j in range(x.shape[1]) if x.shape[0] and np.ptp(x[:, j]) > 0]
    dropped = [names[j] for j in range(x.shape[1]) if j not in varies]
    design = np.column_stack([np.ones(len(y)), x[:, varies]])
    cols = ["const"] + [names[j] for j in varies]
    n, k = design.shape
    _, cl = np.unique(cluster, return_inverse=True)
    g = int(cl.max()) + 1 if cl.size else 0
    why = (f"{g} image(s): the intervals cluster by image and need at least 2" if g < 2 else
           f"{n} queries for {k} coefficients" if n <= k else
           "the features are collinear" if np.linalg.matrix_rank(design) < k else None)
    if why:
        raise VlbenchError(f"the regression cannot be fitted: {n} queries, {g} images, {k} coefficients "
                           f"({', '.join(cols)}): {why}", "analyse more queries or fewer features (--features)")
    bread = np.linalg.inv(design.T @ design)
    coef = bread @ design.T @ y
    resid = y - design @ coef
    scores = np.zeros((g, k))
    np.add.at(scores, cl, design * resid[:, None])
    meat = scores.T @ scores
    factor = g / (g - 1) * (n - 1) / (n - k)
    cov = factor * bread @ meat @ bread
    se = np.sqrt(np.diag(cov))
    z = _z(alpha)
    tss = float(((y - y.mean()) ** 2).sum())
    r2 = 1 - float((resid ** 2).sum()) / tss if tss > 0 else float("nan")
    return Fit(cols, coef, se, coef - z * se, coef + z * se, n, g, r2, dropped)


def paired_difference(a: np.ndarray, b: np.ndarray, n_boot: int, seed: int,
                      alpha: float = 0.05) -> tuple[float, float, float, int]:
    """Mean of b - a over paired units (images) with a percentile bootstrap interval over the units."""
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    d = d[~np.isnan(d)]
    if not d.size:
        return float("nan"), float("nan"), float("nan"), 0
    rng = np.random.default_rng(seed)
    reps = np.array([d[rng.integers(0, d.size, d.size)].mean() for _ in range(n_boot)])
    lo, hi = np.quantile(reps, [alpha / 2, 1 - alpha / 2]) if n_boot else (np.nan, np.nan)
    return float(d.mean()), float(lo), float(hi), int(d.size)
