"""The cut-off metrics of the ranked head: MRR@k, Precision@k, mAP@k and nDCG@k with binary gains.

MTEB's retrieval evaluator reports them through pytrec_eval (trec_eval's recip_rank of the top k, P_k, map_cut_k,
ndcg_cut_k); here they are small functions of the positives in the tie-broken head that the one ranking pass
gives (compute._direction reads them per block; ``vlbench rescore --as mieb`` reads them too). docs/metrics.md
has the definitions, the mAP normaliser (R) and the checks against pytrec_eval and torchmetrics.
"""

from __future__ import annotations

import numpy as np

#: the cut-off metrics read off the ranked head, per query and k (fractions): MRR@k, Precision@k, mAP@k, nDCG@k
#: with binary gains (registered as ``mrr``, ``precision``, ``map``, ``ndcg_binary``; docs/metrics.md)
CUT_METRICS = ("mrr", "precision", "map", "ndcg_binary")


def cut_metrics(is_pos: np.ndarray, n_pos: np.ndarray, ks) -> dict[str, dict[int, np.ndarray]]:
    """{name: {k: per-query fraction}} of ``CUT_METRICS`` from each query's ranked head.

    ``is_pos`` (queries x K, bool): whether the candidate at rank 1..K (the tie rule's order: score desc, index
    asc) is a positive; K >= every k, or K = the number of candidates. ``n_pos``: each query's R (>= 1).
    MRR@k = 1 / rank of the first positive when it is <= k, else 0; Precision@k = positives in the top k / k
    (k, not the number of candidates, as trec_eval's P_k); mAP@k = the sum over the positives ranked <= k of
    the precision at their rank, / R (trec_eval's map_cut_k); nDCG@k = sum over positives ranked i <= k of
    1 / log2(i + 1), / the same sum for min(R, k) positives ranked first (trec_eval's ndcg_cut_k)."""
    ks = tuple(int(k) for k in ks)
    out: dict[str, dict[int, np.ndarray]] = {name: {} for name in CUT_METRICS}
    if not ks:
        return out
    is_pos = is_pos[:, :max(ks)]  # a longer head (R, p + R) is not read: no temporaries of its size
    n_q, K = is_pos.shape
    if K == 0:  # no candidates to rank: nothing is found
        for name in CUT_METRICS:
            out[name] = {k: np.zeros(n_q) for k in ks}
        return out
    hit = is_pos.astype(np.float64)
    ranks = np.arange(1, K + 1, dtype=np.float64)
    found = np.cumsum(hit, axis=1)  # positives in the top i
    ap = np.cumsum(np.where(is_pos, found / ranks, 0.0), axis=1)  # sum of precision@i at the positives
    dcg = np.cumsum(hit / np.log2(ranks + 1.0), axis=1)
    ideal = np.cumsum(1.0 / np.log2(np.arange(2, max(ks) + 2, dtype=np.float64)))  # DCG of j positives first
    first = np.where(is_pos.any(axis=1), np.argmax(is_pos, axis=1) + 1, K + 1)  # K + 1: none in the head
    R = np.asarray(n_pos, dtype=np.int64)
    for k in ks:
        c = min(k, K) - 1
        out["mrr"][k] = np.where(first <= k, 1.0 / first, 0.0)
        out["precision"][k] = found[:, c] / k
        out["map"][k] = ap[:, c] / R
        out["ndcg_binary"][k] = dcg[:, c] / ideal[np.minimum(R, k) - 1]
    return out


def fraction_recall(is_pos: np.ndarray, n_pos: np.ndarray, K: int, ks) -> dict:
    """Per query and k: positives in the top k / min(R, k) (the fraction i2t recall, --i2t-recall fraction)."""
    cum = np.cumsum(is_pos, axis=1)
    return {k: cum[:, min(k, K) - 1] / np.minimum(n_pos, k) for k in ks}
