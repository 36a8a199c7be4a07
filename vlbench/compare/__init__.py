"""Paired comparisons of models on the same queries (``vlbench compare``; docs/compare.md).

* :func:`compare_runs` -- differences A - B per condition and direction, bootstrap intervals, randomization /
  bootstrap / t-test p-values with a Holm or Bonferroni correction, and the robustness difference;
* :func:`write_comparison` -- comparison.json / .csv / .md into a folder;
* :mod:`vlbench.metrics.paired` -- the statistics (shared with the leaderboard's rank groups, so it lives below
  both).

What lives here: :mod:`.engine` (the comparison), :mod:`.plan` (the questions asked), :mod:`.data` (whether runs
can be compared), :mod:`.record` (the sealed record), :mod:`.report` (the files) and :mod:`.cli`; the runs'
per-query values are read by :mod:`vlbench.runread`. To add a test: a function in ``vlbench.metrics.paired``
named in ``engine.TESTS``. This file holds no logic: it re-exports the public names.
"""

from __future__ import annotations

from .engine import compare_loaded, compare_runs
from .report import write as write_comparison

__all__ = ["compare_runs", "compare_loaded", "write_comparison"]
