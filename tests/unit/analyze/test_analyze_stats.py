"""vlbench analyze's statistics: the cluster-robust regression equals statsmodels, a planted
effect is recovered by the regression and shows in the quantile bins, the bins and the paired difference."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from support.tools import require_package

from vlbench.analyze import report
from vlbench.analyze.stats import cluster_bootstrap_means, ols_cluster, paired_difference, quantile_bins
from vlbench.errors import VlbenchError


def clustered(seed: int = 0, n_images: int = 300, per_image: int = 5, slope: float = -2.0):
    """Per-query data with a planted effect: the change falls by ``slope`` per caption word, plus an image
    effect shared by the image's captions (so the queries of one image are correlated) and noise."""
    rng = np.random.default_rng(seed)
    image = np.repeat(np.arange(n_images), per_image)
    words = rng.integers(6, 30, image.size).astype(float)
    adjectives = rng.poisson(1.0, image.size).astype(float)
    y = 5.0 + slope * words + 0.0 * adjectives + rng.normal(0, 6, n_images)[image] + rng.normal(0, 8, image.size)
    return y, words, adjectives, image


@pytest.mark.slow  # imports statsmodels, the peer implementation (~1 s CPU)
def test_cluster_robust_regression_equals_statsmodels():
    require_package("statsmodels")
    import statsmodels.api as sm
    y, words, adjectives, image = clustered(seed=1, n_images=80)
    x = np.column_stack([words, adjectives])
    fit = ols_cluster(y, x, ["words", "adjectives"], image)
    ref = sm.OLS(y, sm.add_constant(x)).fit(cov_type="cluster", cov_kwds={"groups": image})
    np.testing.assert_allclose(fit.coef, ref.params, rtol=1e-10)
    np.testing.assert_allclose(fit.se, ref.bse, rtol=1e-10)
    np.testing.assert_allclose(np.column_stack([fit.ci_low, fit.ci_high]), ref.conf_int(0.05), rtol=1e-10)
    assert fit.r2 == pytest.approx(ref.rsquared, rel=1e-12)
    assert (fit.n, fit.n_clusters) == (400, 80)


def test_the_planted_slope_is_recovered_within_its_interval_and_the_bins_show_the_trend():
    y, words, adjectives, image = clustered(seed=2, slope=-2.0)
    fit = ols_cluster(y, np.column_stack([words, adjectives]), ["words", "adjectives"], image)
    j = fit.names.index("words")
    assert fit.ci_low[j] <= -2.0 <= fit.ci_high[j]
    assert fit.ci_high[j] < 0  # the effect is found, not only admitted
    k = fit.names.index("adjectives")
    assert fit.ci_low[k] <= 0.0 <= fit.ci_high[k]  # no planted effect: the interval covers 0
    # the same data through the table functions, as `vlbench analyze` sees a joined run
    table = pd.DataFrame({"run": "r", "model": "m", "dataset": "d", "direction": "t2i", "condition": "typo",
                          "family": "typos", "image": image, "rsum_change": y, "words_per_caption": words,
                          "adjectives": adjectives})
    s = report.Settings(n_bins=4, n_boot=300, seed=0)
    bins = report.bins_table(table, ["words_per_caption"], s)
    means = bins["mean"].to_numpy()
    assert len(means) == 4 and np.all(np.diff(means) < 0)  # the change falls bin by bin
    assert bins["ci_low"].iat[0] > bins["ci_high"].iat[-1]   # the extreme bins' intervals separate
    reg = report.regression_table(table, ["words_per_caption", "adjectives"], s)
    row = reg[reg["term"] == "words_per_caption"].iloc[0]
    assert row["coef"] == pytest.approx(fit.coef[j]) and row["n_images"] == 300
    assert row["per_sd"] == pytest.approx(fit.coef[j] * np.std(words, ddof=1))


def test_quantile_bins_keep_ties_together_and_leave_no_empty_bin():
    x = np.array([0, 0, 0, 0, 1, 1, 2, 5, np.nan])
    b = quantile_bins(x, 4)
    assert b[-1] == -1
    assert set(b[:4]) == {0}  # equal values share a bin
    assert sorted(set(b[:-1])) == list(range(len(set(b[:-1]))))  # numbered without gaps
    assert all(b[i] <= b[i + 1] for i in range(7))  # ordered like the values


def test_cluster_bootstrap_resamples_whole_images():
    # two images: one with 4 queries of 10, one with 1 query of 0; a replicate either doubles an image or
    # takes both; each image's queries move together, so the only means are 0, 8 and 10
    y = np.array([10, 10, 10, 10, 0.0])
    stats = cluster_bootstrap_means(y, np.zeros(5, dtype=int), np.array([1, 1, 1, 1, 2]), 200, 0)
    mean, lo, hi, n = stats[0]
    assert (mean, n) == (8.0, 5) and lo == 0.0 and hi == 10.0


def test_paired_difference_and_degenerate_regressions():
    mean, lo, hi, n = paired_difference(np.array([1.0, 2, 3, np.nan]), np.array([2.0, 4, 6, 1]), 500, 0)
    assert (mean, n) == (2.0, 3) and lo <= 2.0 <= hi
    with pytest.raises(VlbenchError, match="cannot be fitted"):
        ols_cluster(np.arange(4.0), np.column_stack([np.arange(4.0), 2 * np.arange(4.0)]), ["a", "b"],
                    np.array([0, 0, 1, 1]))
    with pytest.raises(VlbenchError, match="1 image"):  # one image: no cluster-robust interval, whatever n is
        ols_cluster(np.arange(5.0), np.arange(5.0)[:, None] ** 2, ["a"], np.zeros(5))
    fit = ols_cluster(np.arange(6.0), np.column_stack([np.arange(6.0), np.ones(6)]), ["a", "flat"],
                      np.array([0, 0, 1, 1, 2, 2]))
    assert fit.dropped == ["flat"] and fit.names == ["const", "a"]
