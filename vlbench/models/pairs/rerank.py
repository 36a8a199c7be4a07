"""The two-stage rerank: a pair model re-orders the top K of an exact first-stage ranking.

The rule (BLIP's own retrieval code does the same): the first stage ranks the whole gallery, its ties already
resolved by its own rule; the pair model scores the first K candidates of each query; the final list is those
K in descending pair score, then every candidate below K in its first-stage order. So a candidate outside the
top K never rises above one inside it, K = 1 gives the first stage's ranking, and K = the gallery size gives the
pair model's full ranking. Ties among pair scores (equal float32 values, e.g. match probabilities that saturate
at 1.0) keep their first-stage order: the candidate the first stage ranked higher stays higher.
"""

from __future__ import annotations

import numpy as np

from ...errors import VlbenchError


def rerank(stage_one, pair_scores) -> np.ndarray:
    """The final ranking of each query.

    ``stage_one``: (queries, n) candidate ids in first-stage order, best first (n >= K; the first K are the
    ones scored, the rest keep their order); ``pair_scores``: (queries, K) the pair model's scores of
    ``stage_one[:, :K]``, higher better. Returns (queries, n) ids: the top K re-ordered by pair score (ties by
    first-stage rank), then the rest as the first stage had them.
    """
    ids = np.asarray(stage_one)
    scores = np.asarray(pair_scores)
    if ids.ndim != 2 or scores.ndim != 2 or len(ids) != len(scores):
        raise VlbenchError(f"rerank needs stage_one (queries, n) and pair_scores (queries, K); got shapes "
                           f"{ids.shape} and {scores.shape}", "pass one row of each per query")
    k = scores.shape[1]
    if k > ids.shape[1]:
        raise VlbenchError(f"rerank: {k} pair scores per query but only {ids.shape[1]} first-stage candidates",
                           "score the first K candidates with K at most the first stage's list length")
    if ids.dtype.kind not in "iu":
        raise VlbenchError(f"rerank: stage_one holds {ids.dtype} values, not candidate ids",
                           "pass the first stage's ranked ids (integers)")
    if scores.dtype.kind not in "fiu":
        raise VlbenchError(f"rerank: pair_scores of dtype {scores.dtype}", "pass numeric pair scores")
    bad = ~np.isfinite(scores) if scores.dtype.kind == "f" else np.zeros(scores.shape, bool)
    if bad.any():
        q, j = map(int, np.argwhere(bad)[0])
        raise VlbenchError(f"rerank: the pair score of query {q}, candidate {int(ids[q, j])} is {scores[q, j]}",
                           "a pair scorer must return finite scores; check the model's precision and inputs")
    # a stable sort of the negated scores keeps equal scores in first-stage order (float64 holds every float32
    # and int32 exactly, and negation is exact)
    order = np.argsort(-scores.astype(np.float64), axis=1, kind="stable")
    out = ids.copy()
    out[:, :k] = np.take_along_axis(ids[:, :k], order, axis=1)
    return out
