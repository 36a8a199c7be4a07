"""Slow, deliberately naive reference implementations of vlbench's retrieval metrics.

Written from the definitions (vlbench docs / shared spec section 2), NOT from
vlbench/benchmark/metrics.py. Everything here is plain Python loops over Python floats
(float64) with a full sort per query, so it is easy to check by eye:

* ranking: similarity descending, ties broken by candidate index ascending
  (``sorted(range(n), key=lambda c: (-score[c], c))``); ranks are 1-based;
* i2t queries: image rows with at least one positive caption (original or extra);
  candidates: all captions; positives: the image's captions plus extra positives;
* t2i queries: every caption; candidates: all image rows; positives: its image plus extras;
* Recall@k: hit rate of the best-ranked positive, in percent;
* MedR: ``np.median`` of best ranks (plain median, can end in .5); MeanR: mean;
* R-precision: #positives in the top R / R (R = number of distinct positives), percent;
* mAP@R: (1/R) * sum_{i<=R} P@i * rel(i), percent;
* DCG_CM@p: sum_{i<=p} rel_i / log2(i+1), rel_i = 1 for a positive else the relevance value
  (default: the similarity); nDCG = DCG / IDCG (IDCG: all candidates sorted by relevance
  value, top p), 0 when IDCG <= 0.

Also: independent re-implementations of ECCV Caption's R-Precision and mAP@R in the style of
the eccv_caption package (numpy cumsum over the top R), used as a second opinion.
"""

from __future__ import annotations

import math

import numpy as np

DIRECTIONS = ("i2t", "t2i")


def to_float64_matrix(x):
    """Any array-like (numpy, torch incl. float16) -> nested Python floats via float64."""
    try:
        import torch

        if isinstance(x, torch.Tensor):
            x = x.detach().cpu().to(torch.float64).numpy()
    except ImportError:  # pragma: no cover
        pass
    a = np.asarray(x, dtype=np.float64)
    return [[float(v) for v in row] for row in a]


def _extra_for(extra_positives, direction, n_queries_total):
    """Normalise extra positives of one direction to a dict {query index: set(candidates)}."""
    if not extra_positives:
        return {}
    e = extra_positives.get(direction)
    if e is None:
        return {}
    if isinstance(e, dict):
        return {int(q): {int(c) for c in cands} for q, cands in e.items()}
    # full list: one entry per query index
    assert len(e) == n_queries_total
    return {q: {int(c) for c in cands} for q, cands in enumerate(e)}


def positives(caption_to_image, n_images, extra_positives=None):
    """Return (i2t, t2i): dicts query index -> set of positive candidate indices.

    i2t only contains images with at least one positive (the others are distractors)."""
    n_captions = len(caption_to_image)
    i2t = {i: set() for i in range(n_images)}
    for j, i in enumerate(caption_to_image):
        i2t[int(i)].add(j)
    for i, cands in _extra_for(extra_positives, "i2t", n_images).items():
        i2t[i] |= cands
    i2t = {i: s for i, s in i2t.items() if s}
    t2i = {j: {int(caption_to_image[j])} for j in range(n_captions)}
    for j, cands in _extra_for(extra_positives, "t2i", n_captions).items():
        t2i[j] |= cands
    return i2t, t2i


def ranking(scores):
    """Candidate indices in rank order: score descending, then index ascending."""
    return sorted(range(len(scores)), key=lambda c: (-scores[c], c))


def query_metrics(scores, pos, rel, ks, p):
    """Per-query metric values. scores/rel: lists over candidates; pos: set of candidates."""
    order = ranking(scores)
    rank_of = {c: r + 1 for r, c in enumerate(order)}
    best = min(rank_of[c] for c in pos)
    out = {"rank": best}
    for k in ks:
        out[f"recall@{k}"] = 100.0 if best <= k else 0.0
    R = len(pos)
    top_r = order[:R]
    out["r_precision"] = 100.0 * sum(1 for c in top_r if c in pos) / R
    ap = 0.0
    hits = 0
    for i, c in enumerate(top_r, start=1):
        if c in pos:
            hits += 1
            ap += hits / i  # precision@i * rel(i), rel(i) = 1
    out["map_at_r"] = 100.0 * ap / R
    gains = [1.0 if c in pos else rel[c] for c in range(len(scores))]
    dcg = 0.0
    for i, c in enumerate(order[:p], start=1):
        dcg += gains[c] / math.log2(i + 1)
    ideal = sorted(gains, reverse=True)
    idcg = 0.0
    for i, g in enumerate(ideal[:p], start=1):
        idcg += g / math.log2(i + 1)
    out["dcg"] = dcg
    out["ndcg"] = dcg / idcg if idcg > 0 else 0.0
    # the default nDCG: the same with every non-positive gain clipped at 0 (a positive exists, so ideal >= 1)
    clipped = [1.0 if c in pos else max(0.0, rel[c]) for c in range(len(scores))]
    cdcg = sum(clipped[c] / math.log2(i + 1) for i, c in enumerate(order[:p], start=1))
    cideal = sum(g / math.log2(i + 1) for i, g in enumerate(sorted(clipped, reverse=True)[:p], start=1))
    out["ndcg_clipped"] = cdcg / cideal
    # the cut-off metrics (trec_eval's recip_rank of the top k, P_k, map_cut_k / R, ndcg_cut_k with binary gains)
    for k in ks:
        hits = [c in pos for c in order[:k]]
        first = next((i for i, h in enumerate(hits, start=1) if h), None)
        out[f"mrr@{k}"] = 100.0 / first if first else 0.0
        out[f"precision@{k}"] = 100.0 * sum(hits) / k
        found, ap_k = 0, 0.0
        for i, h in enumerate(hits, start=1):
            if h:
                found += 1
                ap_k += found / i
        out[f"map@{k}"] = 100.0 * ap_k / R
        bdcg = sum(1.0 / math.log2(i + 1) for i, h in enumerate(hits, start=1) if h)
        out[f"ndcg_binary@{k}"] = bdcg / sum(1.0 / math.log2(i + 1) for i in range(1, min(R, k) + 1))
    return out


def per_query(similarity, caption_to_image, *, extra_positives=None, k=(1, 5, 10), p=10, relevance=None):
    """{direction: list of (query index, per-query dict)} in query-index order."""
    S = to_float64_matrix(similarity)
    Rel = S if relevance is None else to_float64_matrix(relevance)
    n_images = len(S)
    n_captions = len(S[0])
    assert len(caption_to_image) == n_captions
    ks = sorted({int(x) for x in k})
    i2t, t2i = positives(caption_to_image, n_images, extra_positives)
    res = {"i2t": [], "t2i": []}
    for i in sorted(i2t):
        res["i2t"].append((i, query_metrics(S[i], i2t[i], Rel[i], ks, p)))
    for j in sorted(t2i):
        col = [S[i][j] for i in range(n_images)]
        rcol = [Rel[i][j] for i in range(n_images)]
        res["t2i"].append((j, query_metrics(col, t2i[j], rcol, ks, p)))
    return res


def _mean(xs):
    return sum(xs) / len(xs)


def oracle_score(similarity, caption_to_image, *, extra_positives=None, k=(1, 5, 10), p=10, relevance=None):
    """Aggregate dict with the same keys as vlbench.score."""
    ks = sorted({int(x) for x in k})
    pq = per_query(similarity, caption_to_image, extra_positives=extra_positives, k=ks, p=p,
                   relevance=relevance)
    out = {}
    total = 0.0
    for d in DIRECTIONS:
        qs = [m for _, m in pq[d]]
        dsum = 0.0
        for kk in ks:
            v = _mean([m[f"recall@{kk}"] for m in qs])
            out[f"{d}_recall@{kk}"] = v
            dsum += v
        out[f"{d}_rsum"] = dsum
        total += dsum
        ranks = [m["rank"] for m in qs]
        out[f"{d}_medr"] = float(np.median(ranks))
        out[f"{d}_meanr"] = _mean(ranks)
        out[f"{d}_r_precision"] = _mean([m["r_precision"] for m in qs])
        out[f"{d}_map_at_r"] = _mean([m["map_at_r"] for m in qs])
        out[f"{d}_ndcg@{p}"] = _mean([m["ndcg_clipped"] for m in qs])
        out[f"{d}_dcg_cm@{p}"] = _mean([m["dcg"] for m in qs])
        out[f"{d}_ndcg_cm@{p}"] = _mean([m["ndcg"] for m in qs])
        for name in ("mrr", "precision", "map", "ndcg_binary"):
            for kk in ks:
                out[f"{d}_{name}@{kk}"] = _mean([m[f"{name}@{kk}"] for m in qs])
    out["rsum"] = total
    return out


# ---------------------------------------------------------------------------------------------
# Second opinion: ECCV Caption style (Chun et al. 2022, eccv_caption package): take the
# predicted ids of the top R, make a 0/1 label vector, precision via cumsum.
# Ranking here uses numpy's stable argsort on the negated score (stable => index tie-break).
# ---------------------------------------------------------------------------------------------

def eccv_rank_ids(scores):
    s = np.asarray(scores, dtype=np.float64)
    return np.argsort(-s, kind="stable")


def eccv_r_precision(pred_ids, gt_ids):
    R = len(gt_ids)
    return len(set(pred_ids[:R].tolist()) & set(gt_ids)) / R


def eccv_map_at_r(pred_ids, gt_ids):
    R = len(gt_ids)
    gt = set(gt_ids)
    labels = np.array([1.0 if x in gt else 0.0 for x in pred_ids[:R].tolist()])
    precisions = np.cumsum(labels) / np.arange(1, R + 1)
    return float(np.sum(precisions * labels) / R)


def eccv_scores(similarity, caption_to_image, extra_positives=None):
    """{'i2t_map_at_r', 'i2t_r_precision', 't2i_map_at_r', 't2i_r_precision'} in percent."""
    S = np.asarray(to_float64_matrix(similarity))
    i2t, t2i = positives(caption_to_image, S.shape[0], extra_positives)
    out = {}
    for d, gts, mat in (("i2t", i2t, S), ("t2i", t2i, S.T)):
        maps, rps = [], []
        for q, gt in sorted(gts.items()):
            ids = eccv_rank_ids(mat[q])
            maps.append(eccv_map_at_r(ids, sorted(gt)))
            rps.append(eccv_r_precision(ids, sorted(gt)))
        out[f"{d}_map_at_r"] = 100.0 * float(np.mean(maps))
        out[f"{d}_r_precision"] = 100.0 * float(np.mean(rps))
    return out


# ---------------------------------------------------------------------------------------------
# Third opinion: from embeddings, in plain NumPy, whole matrices at a time (written from docs/metrics.md and
# the shared spec, not from vlbench/metrics): the scores are the exact cosines (float64 dot products of the
# float32 vectors, each distinct pair of vectors scored once, so bit-identical duplicates tie exactly), the
# order is score descending then candidate index ascending (np.lexsort), and every metric is read off the
# 0/1 matrix of positives in that order.
# ---------------------------------------------------------------------------------------------

def exact_cosines(img, txt):
    """(n_images, n_captions) float64 scores: each distinct (image vector, caption vector) pair scored once, so
    equal vectors get equal scores whatever their position."""
    ui, inv_i = np.unique(np.asarray(img, dtype=np.float32), axis=0, return_inverse=True)
    ut, inv_t = np.unique(np.asarray(txt, dtype=np.float32), axis=0, return_inverse=True)
    scores = ui.astype(np.float64) @ ut.astype(np.float64).T
    return scores[np.ravel(inv_i)][:, np.ravel(inv_t)]


def numpy_direction(scores, positive, ks=(1, 5, 10), p=10):
    """Per-query metrics of one direction. scores: (queries, candidates) float64; positive: the same shape, bool.
    Gains of nDCG@p: 1 for a positive, max(0, score) otherwise (the default relevance: the similarity)."""
    scores = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    nq, nc = scores.shape
    index = np.broadcast_to(np.arange(nc), scores.shape)
    order = np.lexsort((index, -scores), axis=-1)  # last key first: score descending, then index ascending
    hit = np.take_along_axis(positive, order, axis=1)  # hit[q, r]: the candidate at rank r + 1 is a positive
    n_pos = positive.sum(axis=1)
    best = hit.argmax(axis=1) + 1
    out = {"best_rank": best, "n_positives": n_pos}
    for k in ks:
        out[f"recall@{k}"] = np.where(best <= k, 100.0, 0.0)
    within_r = np.arange(nc)[None, :] < n_pos[:, None]  # the top R of each query
    hits_so_far = np.cumsum(hit, axis=1)
    out["r_precision"] = 100.0 * (hit & within_r).sum(axis=1) / n_pos
    precision_at = hits_so_far / np.arange(1, nc + 1)[None, :]
    out["map_at_r"] = 100.0 * (precision_at * (hit & within_r)).sum(axis=1) / n_pos
    gains = np.where(positive, 1.0, np.maximum(scores, 0.0))
    discount = 1.0 / np.log2(np.arange(2, min(p, nc) + 2))
    dcg = (np.take_along_axis(gains, order, axis=1)[:, :p] * discount).sum(axis=1)
    idcg = (-np.sort(-gains, axis=1)[:, :p] * discount).sum(axis=1)
    out[f"ndcg@{p}"] = dcg / idcg
    return out


def numpy_evaluate(img, txt, caption_to_image, ks=(1, 5, 10), p=10):
    """{direction: per-query dict} and {(direction, metric, k): value} records, from the embeddings."""
    scores = exact_cosines(img, txt)
    c2i = np.asarray(caption_to_image)
    n_images = scores.shape[0]
    pos = np.zeros(scores.shape, dtype=bool)
    pos[c2i, np.arange(len(c2i))] = True
    queries = np.flatnonzero(pos.any(axis=1))  # i2t: the images with a caption
    per = {"i2t": numpy_direction(scores[queries], pos[queries], ks, p), "t2i": numpy_direction(scores.T, pos.T, ks, p)}
    per["i2t"]["query"], per["t2i"]["query"] = queries, np.arange(len(c2i))
    records = {}
    for d, q in per.items():
        for k in ks:
            records[(d, "recall", k)] = float(np.mean(q[f"recall@{k}"]))
        records[(d, "medr", None)] = float(np.median(q["best_rank"]))
        records[(d, "meanr", None)] = float(np.mean(q["best_rank"]))
        records[(d, "r_precision", None)] = float(np.mean(q["r_precision"]))
        records[(d, "map_at_r", None)] = float(np.mean(q["map_at_r"]))
        records[(d, "ndcg", p)] = float(np.mean(q[f"ndcg@{p}"]))
    assert n_images == len(img)
    return per, records
