"""Paired statistics of two models scored on the same queries (docs/compare.md): what ``vlbench compare`` and the
leaderboard's rank groups test with.

A comparison is a weighted sum of per-query means, ``T = sum_s w_s * mean(d_s)``, over one or more strata of
paired per-query differences ``d_s`` (one stratum: a direction; two: i2t + t2i for total RSUM; more: the
leaderboard's mean over datasets). Every function here takes the strata and weights and a numpy Generator:

* :func:`bootstrap_dist` / :func:`percentile_ci` / :func:`bootstrap_p` -- ``T`` when the queries of each
  stratum are resampled with replacement, drawn exactly as the runs' drop intervals draw them
  (:func:`vlbench.metrics.stats.resample_means`): its percentile interval and a two-sided bootstrap p-value;
* :func:`sign_flip_p` -- the two-sided paired randomization test: if the two models
  are exchangeable on every query, each difference keeps or flips its sign with probability 1/2. Exact (every
  sign pattern of the nonzero differences) when there are at most ``n_resamples`` patterns, else a Monte Carlo
  test with the +1 correction (Phipson & Smyth 2010): ``p = (1 + #{|T_b| >= |T|}) / (n_resamples + 1)``;
* :func:`ttest_p` -- the paired two-tailed t-test (scipy.stats.ttest_rel), one stratum only;
* :func:`adjust` -- Holm / Bonferroni adjusted p-values over a family;
* :func:`letters` -- a compact letter display of which models are separable.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

CHUNK = 100  # replicates drawn per block (memory: CHUNK x queries)
EXACT_BLOCK = 4096  # sign patterns enumerated per block (memory: EXACT_BLOCK x nonzero differences)


def generator(seed: int, key: str, what: str) -> np.random.Generator:
    """The generator of one comparison: seeded by (seed, CRC-32 of "key|what"), so a row's values do not
    depend on which other rows are computed."""
    return np.random.default_rng([int(seed), zlib.crc32(f"{key}|{what}".encode())])


def statistic(strata: list[np.ndarray], weights: list[float]) -> float:
    return float(sum(w * float(np.mean(d)) for d, w in zip(strata, weights)))


def bootstrap_dist(strata: list[np.ndarray], weights: list[float], n_resamples: int,
                   rng: np.random.Generator) -> np.ndarray:
    """T over ``n_resamples`` bootstrap resamples: each stratum's queries resampled with replacement, strata in
    order, from one generator (the draws of :func:`vlbench.metrics.stats.resample_means`)."""
    from .stats import resample_means  # lazy: vlbench --help imports this module; keep it light

    return np.asarray(sum(w * resample_means(np.asarray(d, dtype=np.float64), n_resamples, rng)
                          for d, w in zip(strata, weights)))


def percentile_ci(dist: np.ndarray, alpha: float = 0.05) -> tuple[float, float]:
    """The percentile interval (numpy's default linear quantiles)."""
    return float(np.quantile(dist, alpha / 2)), float(np.quantile(dist, 1 - alpha / 2))


def bootstrap_p(dist: np.ndarray) -> float:
    """Two-sided bootstrap p-value of T = 0: twice the smaller share of resamples on either side of 0, with the
    +1 correction: min(1, 2 min(1 + #{T_b <= 0}, 1 + #{T_b >= 0}) / (B + 1))."""
    below, above = int(np.count_nonzero(dist <= 0)), int(np.count_nonzero(dist >= 0))
    return min(1.0, 2 * min(1 + below, 1 + above) / (len(dist) + 1))


def _terms(strata, weights) -> np.ndarray:
    """Each query's contribution w_s / n_s * d_q to T, nonzero ones only (a zero difference has no sign)."""
    v = np.concatenate([np.asarray(d, dtype=np.float64) * (w / len(d)) for d, w in zip(strata, weights)])
    return v[v != 0]


def sign_flip_p(strata: list[np.ndarray], weights: list[float], n_resamples: int,
                rng: np.random.Generator) -> tuple[float, bool]:
    """(two-sided p-value, exact?) of the paired sign-flip randomization test of T = 0."""
    v = _terms(strata, weights)
    if len(v) == 0:
        return 1.0, True
    obs = abs(float(v.sum()))
    tol = 1e-9 * float(np.abs(v).sum())  # sums of the same terms in another order: equal up to rounding
    if 2 ** len(v) <= n_resamples:
        return _exact_count(v, obs - tol) / 2 ** len(v), True
    hits = 0
    for start in range(0, n_resamples, CHUNK):
        m = min(CHUNK, n_resamples - start)
        signs = np.where(rng.random((m, len(v))) < 0.5, -1.0, 1.0)
        hits += int(np.count_nonzero(np.abs(signs @ v) >= obs - tol))
    return (1 + hits) / (n_resamples + 1), False


def _exact_count(v: np.ndarray, threshold: float) -> int:
    """How many of the 2^n sign patterns of ``v`` give |sum| >= threshold, enumerated in blocks of ``EXACT_BLOCK``
    patterns (pattern i flips term j when bit j of i is set), so memory stays bounded whatever n."""
    n = len(v)
    bits = np.arange(n, dtype=np.int64)
    hits = 0
    for start in range(0, 2 ** n, EXACT_BLOCK):
        idx = np.arange(start, min(start + EXACT_BLOCK, 2 ** n), dtype=np.int64)
        signs = 1.0 - 2.0 * ((idx[:, None] >> bits) & 1)
        hits += int(np.count_nonzero(np.abs(signs @ v) >= threshold))
    return hits


def ttest_p(d: np.ndarray) -> float:
    """Two-tailed paired t-test of mean(d) = 0 (scipy.stats.ttest_rel on the two sides is the same test).
    Differences that are all equal have no variance: p = 1 when they are all 0, else 0."""
    d = np.asarray(d, dtype=np.float64)
    if len(d) < 2 or np.all(d == d[0]):
        return 1.0 if len(d) == 0 or d[0] == 0 else 0.0
    from scipy import stats

    return float(stats.ttest_1samp(d, 0.0).pvalue)


def adjust(pvalues: list[float | None], method: str) -> list[float | None]:
    """Family-wise adjusted p-values. holm: the i-th smallest of m becomes max over j <= i of
    min(1, (m - j + 1) p_(j)); bonferroni: min(1, m p); none: p. None (not tested) stays None."""
    tested = {i: p for i, p in enumerate(pvalues) if p is not None and not math.isnan(p)}
    idx = list(tested)
    m = len(idx)
    out: list[float | None] = [None] * len(pvalues)
    if method == "none":
        for i in idx:
            out[i] = tested[i]
    elif method == "bonferroni":
        for i in idx:
            out[i] = min(1.0, m * tested[i])
    elif method == "holm":
        running = 0.0
        for rank, i in enumerate(sorted(idx, key=lambda i: (tested[i], i))):
            running = max(running, min(1.0, (m - rank) * tested[i]))
            out[i] = running
    else:
        raise ValueError(f"unknown correction {method!r}")
    return out


def letters(order: list[str], separable: set[frozenset]) -> dict[str, str]:
    """Compact letter display (insert-and-absorb, Piepho 2004): models sharing a letter are not separable.
    ``order``: models best first; ``separable``: the pairs whose difference is significant. Letters are given
    to the groups in the order of their best member (a = the group of the top model)."""
    groups = [set(order)]
    for a, b in sorted((tuple(sorted(p, key=order.index)) for p in separable), key=lambda p: (
            order.index(p[0]), order.index(p[1]))):
        new = []
        for g in groups:
            new += [g - {a}, g - {b}] if a in g and b in g else [g]
        groups = [g for g in new if g and not any(g < h for h in new)]
        groups = [g for i, g in enumerate(groups) if g not in groups[:i]]
    groups.sort(key=lambda g: sorted(order.index(x) for x in g))
    out = {m: "" for m in order}
    for i, g in enumerate(groups):
        for m in g:
            out[m] += _letter(i)
    return out


def _letter(i: int) -> str:
    return "abcdefghijklmnopqrstuvwxyz"[i] if i < 26 else f"[{i + 1}]"
