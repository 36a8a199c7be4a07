"""Paired comparisons of models on the same queries (``vlbench compare``; docs/compare.md).

* :func:`compare_runs` -- differences A - B per condition and direction, bootstrap intervals, randomization /
  bootstrap / t-test p-values with a Holm or Bonferroni correction, and the robustness difference;
* :func:`write_comparison` -- comparison.json / .csv / .md into a folder;
* :mod:`vlbench.compare.paired` -- the statistics (also used by the leaderboard's rank groups).

What lives here: :mod:`.engine` (the comparison), :mod:`.paired` (tests and intervals), :mod:`.data` (runs'
per-query values), :mod:`.report` (the files) and :mod:`.cli`. To add a test: a function in ``paired`` named
in ``engine.TESTS``. This file holds no logic: it re-exports the public names.
"""

from __future__ import annotations

from .engine import compare_loaded, compare_runs
from .report import write as write_comparison

__all__ = ["compare_runs", "compare_loaded", "write_comparison"]
