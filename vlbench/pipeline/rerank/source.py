"""The two stages as similarity sources: each query's first-stage head (its top K, exact, in the suite's tie
order) and the final ranking after the pair model re-ordered that head, given to the suite's own metric code.

:class:`RerankedSource` answers ``rows(direction, queries)`` with the first stage's similarities in which each
query's K reranked candidates are lifted above every other candidate, in their final order: the metric code
(``metrics.compute.evaluate``) then ranks them first, in that order, and every candidate below K keeps its
first-stage similarity and therefore its first-stage place and tie rule. The lifted values are
``top1 + (K - j) * max(1, |top1|)`` for the candidate at final place ``j`` (``top1``: the query's best first-stage
similarity), float64, so they are distinct, strictly ordered and above every first-stage value of the row.
The relevance of non-positives in DCG_CM stays the first stage's (the evaluated similarity, or the run's
relevance model): the metrics of the final ranking give candidates the same gains as the first stage's.
"""

from __future__ import annotations

import numpy as np

from ...metrics.ranking import SimilaritySource, rank_blocks


def stage_one_heads(source: SimilaritySource, direction: str, queries: np.ndarray, pos,
                    k: int) -> tuple[np.ndarray, np.ndarray]:
    """((len(queries), k) candidate ids, (len(queries),) best similarities): each query's first k candidates in
    the first stage's exact order (score desc, then candidate index asc), from the same similarity bits the
    first stage's metrics read, and the similarity of its first one (float64)."""
    ids = np.zeros((len(queries), k), dtype=np.int64)
    top1 = np.zeros(len(queries), dtype=np.float64)
    for b in rank_blocks(source, direction, queries, pos, k):
        ids[b.b0:b.b1] = b.top_ix[:, :k]
        top1[b.b0:b.b1] = b.top_v[:, 0]
    return ids, top1


class RerankedSource(SimilaritySource):
    """The final ranking of both directions as similarities (see the module's doc). ``final``: direction ->
    (query ids, (queries, K) reranked candidate ids, the queries' best first-stage similarity)."""

    def __init__(self, base: SimilaritySource, final: dict):
        self.base = base
        self.n_images, self.n_captions = base.n_images, base.n_captions
        self.final = {}
        for d, (queries, ids, top1) in final.items():
            where = np.full(self.n_images if d == "i2t" else self.n_captions, -1, dtype=np.int64)
            where[np.asarray(queries, dtype=np.int64)] = np.arange(len(queries))
            self.final[d] = (where, np.asarray(ids, dtype=np.int64), np.asarray(top1, dtype=np.float64))

    def rows(self, direction, queries):
        blk = np.array(self.base.rows(direction, queries), dtype=np.float64)
        where, ids, top1 = self.final[direction]
        at = where[np.asarray(queries, dtype=np.int64)]
        if (at < 0).any():
            raise ValueError(f"{direction} query {int(np.asarray(queries)[at < 0][0])} has no reranked list")
        k = ids.shape[1]
        scale = np.maximum(1.0, np.abs(top1[at]))
        lifted = top1[at, None] + np.arange(k, 0, -1, dtype=np.float64)[None, :] * scale[:, None]
        np.put_along_axis(blk, ids[at], lifted, axis=1)
        return blk
