"""The one exact scan over the tile grid (metrics/tiles.py), which every scoring schedule runs.

* :mod:`.duplicates`: the duplicate search (a vector that repeats an earlier one bit for bit takes its scores);
* :mod:`.reducers`: what one tile contributes to its queries: the count of candidates above the best positive,
  the exact top-k head, the relevances and graded gains that travel with it (one code path for NumPy and torch);
* :mod:`.walk`: the walk of a slice of the gallery tile by tile, a few tiles in flight, with per-query state.

metrics/sharded.py runs the walk for ``--score-block``, torchrun ranks (each rank walks its slice; heads merge and
counts add) and devices, and the one-piece pass runs it for galleries too wide for whole rows; the whole-row pass
(metrics/ranking.py) reads rows of the same grid for the usual sizes and is the reference the scan is tested
against.

Where a reranking stage plugs in (a pair-scoring model re-scoring each query's top K): after the walk and the
rank merge, on the ``RankedBlock`` s the metrics read (``metrics.compute._direction``), where every schedule's
head is final and exact in the tie order. It reorders the first K of ``top_ix`` / ``top_v`` / ``is_pos`` (and
the best positive's rank where it falls among them); a rank beyond K stays the scan's count, so the scan need not
change. Reranking inside the walk is not possible: a tile's head is only a candidate list until every tile of
every rank has been merged.
"""
