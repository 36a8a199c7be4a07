"""Worked example of a vlbench metric plug-in: mean reciprocal rank of the best positive."""

from vlbench import Metric

RECIPROCAL_RANK = Metric(
    "reciprocal-rank", unit="ratio", value_range="(0, 1]", higher_is_better=True,
    description="mean reciprocal rank of the best positive (MRR)",
    per_query=lambda r, ev: 1.0 / r.best_rank)
