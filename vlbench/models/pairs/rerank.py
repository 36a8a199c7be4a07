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


DIRECTIONS = ("i2t", "t2i")


def topk_pair_scores(scorer, image_state, texts, stage_one, *, direction: str, batch_size: int = 64):
    """The pair scores a rerank needs: for each query, its first-stage candidates ``stage_one[:, :K]`` scored
    with ``scorer`` (a :class:`~vlbench.models.pairs.PairScorer`).

    ``image_state``: ``scorer.encode_images`` of the gallery's images (row i: image i, encoded once);
    ``texts``: the captions (index j: caption j); ``direction``: ``"t2i"`` (query q is caption q, its candidates
    image ids) or ``"i2t"`` (query q is image q, its candidates caption ids); ``stage_one``: (queries, K) ids.
    A pair that recurs (one image with two captions of one ``text_keys`` key) is scored once; pairs go to the
    model in batches of ``batch_size`` in a fixed order (by image, then caption). Returns (scores (queries, K)
    float32, the number of pairs scored)."""
    if direction not in DIRECTIONS:
        raise VlbenchError(f"unknown direction {direction!r}", f"use one of {DIRECTIONS}")
    if batch_size < 1:
        raise VlbenchError(f"batch_size {batch_size}", "use a positive batch size")
    ids = np.asarray(stage_one)
    texts = list(texts)
    if ids.ndim != 2:
        raise VlbenchError(f"stage_one of shape {ids.shape}", "pass (queries, K) candidate ids")
    q, k = ids.shape
    query = np.repeat(np.arange(q), k)
    img, txt = (query, ids.ravel()) if direction == "i2t" else (ids.ravel(), query)
    for what, arr, n in (("image", img, len(image_state)), ("caption", txt, len(texts))):
        if arr.size and (arr.min() < 0 or arr.max() >= n):
            raise VlbenchError(f"{direction}: a {what} id out of range (0..{n - 1}): {int(arr.max())}",
                               f"the first stage's ids index the {len(image_state)} images and {len(texts)} "
                               "captions given")
    keys = scorer.text_keys(texts)
    key_id = {key: i for i, key in reversed(list(enumerate(keys)))}  # a key -> its first caption
    canon = np.array([key_id[keys[j]] for j in range(len(texts))], dtype=np.int64)
    pairs = np.stack([img, canon[txt]], axis=1) if img.size else np.zeros((0, 2), dtype=np.int64)
    unique, back = np.unique(pairs, axis=0, return_inverse=True)
    scores = np.empty(len(unique), dtype=np.float32)
    for a in range(0, len(unique), batch_size):
        part = unique[a:a + batch_size]
        out = np.asarray(scorer.score_pairs(image_state[part[:, 0]], [texts[j] for j in part[:, 1]]))
        if out.shape != (len(part),):
            raise VlbenchError(f"the pair scorer returned shape {out.shape} for {len(part)} pairs",
                               "score_pairs must return one score per pair (check_pair_scorer checks it)")
        scores[a:a + len(part)] = out
    return scores[np.asarray(back).ravel()].reshape(q, k), len(unique)
