"""vlbench.testing.check_metric: every registered metric passes; a metric that breaks one clause fails it, and the
error names the metric and the clause."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from support.conformance import fails_clause

from vlbench import registry
from vlbench.metrics.specs import Metric
from vlbench.testing import ConformanceError, check_metric

GOOD = Metric("reciprocal-rank", unit="ratio", value_range="(0, 1]", higher_is_better=True,
              description="mean reciprocal rank of the best positive", per_query=lambda r, ev: 1.0 / r.best_rank)


@pytest.mark.parametrize("name", registry.metrics.names())
def test_every_registered_metric_passes(name):
    report = check_metric(name)
    assert report.passed and "record" in report.passed


def test_a_good_plugin_passes_by_object_and_reports_its_checks():
    report = check_metric(GOOD)
    assert report.passed == ["load", "record", "per-query values and aggregate", "perfect beats worst"]
    assert report.skipped == {"param honoured": "the metric has no param"}


def test_a_metric_family_checks_its_members():
    from vlbench.metrics.specs import builtins

    family = next(m for m in builtins() if m.expand is not None)
    assert {"ndcg_minilm: param honoured", "ndcg_rouge_l: param honoured"} <= set(check_metric(family).passed)


class _SumsInsteadOfMean(Metric):
    def values(self, r, ev):
        return [(None, float(np.sum(self.raw(r, ev))))]


VALUES = "per-query values and aggregate"
BROKEN = [  # (the clause it breaks, how, the metric)
    ("record", "not-a-slug", replace(GOOD, name="Reciprocal Rank")),
    ("record", "unknown-param-kind", replace(GOOD, param="q")),
    (VALUES, "one-value-short", replace(GOOD, per_query=lambda r, ev: (1.0 / r.best_rank)[:-1])),
    (VALUES, "outside-its-range", replace(GOOD, per_query=lambda r, ev: r.best_rank * 1.0)),
    (VALUES, "nan", replace(GOOD, per_query=lambda r, ev: np.full(len(r.best_rank), np.nan))),
    (VALUES, "random", replace(GOOD, per_query=lambda r, ev: np.random.rand(len(r.best_rank)))),
    (VALUES, "sum-not-mean", _SumsInsteadOfMean(**{f: getattr(GOOD, f) for f in (
        "name", "unit", "value_range", "higher_is_better", "description", "per_query")})),
    ("perfect beats worst", "wrong-direction",
     replace(GOOD, per_query=lambda r, ev: 1.0 - 1.0 / r.best_rank, value_range="[0, 1)")),
    ("param honoured", "k-ignored", replace(GOOD, param="k", per_query=lambda r, ev, k: 1.0 / r.best_rank)),
]


@pytest.mark.parametrize("clause, metric", [(c, m) for c, _, m in BROKEN], ids=[how for _, how, _ in BROKEN])
def test_a_broken_metric_fails_the_clause_it_breaks(clause, metric):
    err = fails_clause(check_metric, metric, "metric", clause)
    assert err.plugin == metric.name and f"{metric.name!r}" in str(err)


def test_a_param_metric_must_give_values_at_its_k():
    bad = replace(GOOD, param="k", per_query=lambda r, ev, k: (r.best_rank <= k) * 1.0,
                  aggregate=lambda r, ev, x: 0.5, value_range="[0, 1]")
    with pytest.raises(ConformanceError, match="perfect beats worst"):  # a constant aggregate ranks nothing
        check_metric(bad)


def test_checking_leaves_no_plugin_marked_as_used(monkeypatch):
    """evaluate() computes installed metric plug-ins; the check must not make them count as used by a run."""
    registry.metrics.names()
    entry = registry.Entry("reciprocal-rank", GOOD, "", "plugin:test")
    monkeypatch.setitem(registry.metrics._entries, "reciprocal-rank", entry)
    check_metric("recall")
    assert "computed" not in entry.meta and "reciprocal-rank" not in str(registry.plugin_versions())
