"""Paired comparisons of models on the same queries (``vlbench compare``; docs/compare.md).

* :func:`compare_runs` -- differences A - B per condition and direction, bootstrap intervals, randomization /
  bootstrap / t-test p-values with a Holm or Bonferroni correction, and the robustness difference;
* :func:`write_comparison` -- comparison.json / .csv / .md into a folder;
* :mod:`vlbench.compare.paired` -- the statistics (also used by the leaderboard's rank groups).
"""

from __future__ import annotations

from .engine import compare_loaded, compare_runs

__all__ = ["compare_runs", "compare_loaded", "write_comparison"]


def write_comparison(record: dict, out):
    """Write a :func:`compare_runs` record as comparison.json, comparison.csv and comparison.md into ``out``."""
    from .report import write

    return write(record, out)
