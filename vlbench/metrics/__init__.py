"""Metrics: how a run is scored.

What lives here: the metric registry, one ``Metric`` record per metric, built-in or plug-in (:mod:`.specs`);
the one shared ranking step (:mod:`.ranking`) and every metric's per-query values from it
(:mod:`.compute`); graded relevance (:mod:`.graded`, :mod:`.graded_sources`, :mod:`.rouge`); the official
ECCV Caption / CxC protocols (:mod:`.official`); flips against clean (:mod:`.flips`); the bootstrap and
model-input analysis (:mod:`.stats`); recall conventions (:mod:`.protocols`).

To add a metric: a ``Metric`` with a per-query function over the ranking's ``DirectionResult``, registered
in ``vlbench.registry.metrics`` (a plug-in: an entry point in the group ``vlbench.metrics``; its param and
aggregate are honoured as a built-in's; docs/extending.md). This file holds no logic.
"""
