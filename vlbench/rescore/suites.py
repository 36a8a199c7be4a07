"""Other suites' retrieval conventions, applied to one similarity matrix (images x captions).

Every suite here scores the dataset's own pairs (caption -> its image; an image -> its captions); extra
ECCV / CxC positives are used by the ``eccv`` and ``cxc`` suites only. The ranking follows vlbench's tie
rule (score descending, then the lower candidate index), which decides only between identical scores
(e.g. duplicate captions); each suite's own tie behaviour is named in its ``ties`` note.

- ``clip_benchmark`` (LAION-AI/CLIP_benchmark, ``metrics/zeroshot_retrieval.py``): ``recall_at_k`` counts
  the positives among the top k over the number of positives, and the suite reports the mean of
  ``recall_at_k > 0``: a query is a hit when any positive is in its top k (hit@k).
  ``image_retrieval_recall@k`` is text -> image, ``text_retrieval_recall@k`` image -> text. Fractions.
- ``mieb`` (MTEB's image extension; its retrieval evaluator scores with pytrec_eval): ``recall_at_k`` is
  the fraction of a query's positives in its top k (for an image with five captions, 0.2 per caption
  found); ``ndcg_at_k`` with binary gains, DCG = sum over ranks r <= k of rel_r / log2(r + 1), divided by
  the DCG of the ideal ranking; ``map_at_k`` (trec_eval map_cut: divided by the number of positives),
  ``precision_at_k`` (positives in the top k / k) and ``mrr_at_k`` (1 / rank of the first positive within k),
  for k = 1, 5, 10: vlbench's built-in ``ndcg_binary``, ``map``, ``precision`` and ``mrr`` (one definition,
  ``metrics.compute.cut_metrics``). Fractions (MTEB's files), the main score is ndcg_at_10.
- ``mmeb`` (MMEB / VLM2Vec): precision@1 over 1,000 candidates per query: the query's positive (t2i: its
  image; i2t: its first caption in dataset order) and 999 negatives. MMEB ships fixed candidate lists;
  here they are drawn without replacement from the candidates that are not positives of the query
  (i2t: none of the image's captions), with ``numpy.random.default_rng(seed)`` for t2i and
  ``default_rng(seed + 1)`` for i2t, one ``choice`` per query in query order (:func:`mmeb_candidates`);
  a gallery with fewer than 1,000 candidates gives every non-positive. Fractions.
- ``eccv`` / ``cxc``: vlbench's official ECCV Caption (mAP@R, R-Precision, R@1) and CxC recall metrics
  (``vlbench.metrics.official``) on the run's official ground truth (a run made with
  ``--extra-positives eccv`` / ``cxc``). Percentages, as vlbench reports them.
"""

from __future__ import annotations

import numpy as np

from ..errors import VlbenchError
from ..metrics.cutoff import cut_metrics
from ..metrics.official import official_values
from .registry import Suite, per_fold, positives, register_suite, similarity  # noqa: F401  positives: re-exported

K_VALUES = (1, 5, 10)
MMEB_CANDIDATES = 1000
BLOCK = 256

#: MTEB's names of vlbench's cut-off metrics (the suite reports them for every k of K_VALUES)
MIEB_CUT_NAMES = {"ndcg_binary": "ndcg_at_{k}", "map": "map_at_{k}", "precision": "precision_at_{k}",
                  "mrr": "mrr_at_{k}"}
#: clip_benchmark's metric names per direction
CLIP_NAMES = {"t2i": "image_retrieval_recall@{k}", "i2t": "text_retrieval_recall@{k}"}


def _rows(sim: np.ndarray, direction: str, queries: list[int]) -> np.ndarray:
    return sim[queries] if direction == "i2t" else sim[:, queries].T


def ranks_of_positives(sim: np.ndarray, direction: str, pos: dict) -> dict[int, np.ndarray]:
    """query -> the 1-based ranks of its positives (tie rule: score desc, then lower candidate index)."""
    out, queries = {}, list(pos)
    for b0 in range(0, len(queries), BLOCK):
        part = queries[b0:b0 + BLOCK]
        rows = np.asarray(_rows(sim, direction, part), dtype=np.float64)
        order = np.argsort(-rows, axis=1, kind="stable")
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(1, rows.shape[1] + 1)[None, :].repeat(len(part), 0), axis=1)
        for r, q in enumerate(part):
            out[q] = rank[r, pos[q]]
    return out


def clip_benchmark(sim, pos) -> list[tuple]:
    """(direction, metric, k, value) records."""
    out = []
    for d in ("t2i", "i2t"):
        ranks = ranks_of_positives(sim, d, pos[d])
        name = CLIP_NAMES[d]
        for k in K_VALUES:
            out.append((d, name.format(k=k), k, float(np.mean([(r <= k).any() for r in ranks.values()]))))
    return out


def ranked_head(ranks: dict[int, np.ndarray], width: int) -> tuple[np.ndarray, np.ndarray]:
    """(queries x width booleans: a positive at rank 1..width, each query's number of positives R) from the ranks
    of its positives, in the order of ``ranks``: the input of vlbench's cut-off metrics (compute.cut_metrics)."""
    head = np.zeros((len(ranks), width), dtype=bool)
    for row, r in enumerate(ranks.values()):
        head[row, r[r <= width] - 1] = True
    return head, np.fromiter((len(r) for r in ranks.values()), dtype=np.int64, count=len(ranks))


def mieb(sim, pos) -> list[tuple]:
    out = []
    for d in ("t2i", "i2t"):
        ranks = ranks_of_positives(sim, d, pos[d])
        for k in K_VALUES:
            out.append((d, f"recall_at_{k}", k, float(np.mean([(r <= k).sum() / len(r) for r in ranks.values()]))))
        n_cand = sim.shape[1] if d == "i2t" else sim.shape[0]
        cut = cut_metrics(*ranked_head(ranks, min(max(K_VALUES), n_cand)), K_VALUES)
        for metric, name in MIEB_CUT_NAMES.items():  # vlbench's own definitions, which are trec_eval's
            for k in K_VALUES:
                out.append((d, name.format(k=k), k, float(np.mean(cut[metric][k]))))
    return out


def mmeb_candidates(n_candidates: int, pos: dict, seed: int) -> dict[int, tuple[int, np.ndarray]]:
    """query -> (its positive, its negatives) as MMEB's lists are built here (see the module text)."""
    rng = np.random.default_rng(seed)
    out = {}
    for q, p in pos.items():
        excluded = np.asarray(sorted(set(p)), dtype=np.int64)
        pool_size = n_candidates - len(excluded)
        size = min(MMEB_CANDIDATES - 1, pool_size)
        draw = np.sort(rng.choice(pool_size, size=size, replace=False))
        # the draw indexes the candidates without the positives: shift past each excluded index
        neg = draw + np.searchsorted(excluded - np.arange(len(excluded)), draw, side="right")
        out[q] = (int(p[0]), neg)
    return out


def mmeb(sim, pos, seed: int = 0) -> list[tuple]:
    out = []
    for d in ("t2i", "i2t"):
        n_cand = sim.shape[1] if d == "i2t" else sim.shape[0]
        cands = mmeb_candidates(n_cand, pos[d], seed if d == "t2i" else seed + 1)
        hits = []
        for q, (p, neg) in cands.items():
            row = np.asarray(_rows(sim, d, [q])[0], dtype=np.float64)
            s, sn = row[p], row[neg]
            hits.append(bool(np.all((s > sn) | ((s == sn) & (p < neg)))))
        out.append((d, "precision_at_1", 1, float(np.mean(hits))))
    return out


def official(sim, official_gt: dict, kind: str) -> list[tuple]:
    vals = official_values(official_gt, sim, K_VALUES)
    return [(d, metric, k, v) for (d, metric, k), v in vals.items()]


def _official_score(kind: str):
    """A suite's ``score`` on the run's official ground truth (the whole matrix: no folds)."""
    def score(gt: dict, img: np.ndarray, txt: np.ndarray, seed: int = 0) -> list[tuple]:
        off = gt.get("official")
        if not off or off.get("kind") != kind:
            raise VlbenchError(f"--as {kind} needs the official {kind.upper()} ground truth, which this run "
                               f"does not hold", f"re-run with --extra-positives {kind} on the COCO 5k test split")
        off = dict(off, gt={d: {int(q): v for q, v in rows.items()} for d, rows in off["gt"].items()})
        return official(similarity(img, txt), off, kind)
    return score


CLIP_BENCHMARK = register_suite(Suite(
    "clip_benchmark", "hit@k: a query counts when any positive is in its top k (mean of recall_at_k > 0); fractions",
    "LAION-AI/CLIP_benchmark clip_benchmark/metrics/zeroshot_retrieval.py",
    "torch.topk (ties unspecified); here score desc, then lower index",
    per_fold(lambda sim, pos, seed: clip_benchmark(sim, pos)), names=CLIP_NAMES))
MIEB = register_suite(Suite(
    "mieb", "recall_at_k = positives in top k / positives (pytrec_eval recall); ndcg_at_k with binary relevance; "
            "map_at_k / positives; precision_at_k / k; mrr_at_k; fractions",
    "embeddings-benchmark/mteb RetrievalEvaluator (pytrec_eval recall.k, ndcg_cut.k, map_cut.k, P.k; mteb's mrr)",
    "trec_eval breaks ties by document id descending; here score desc, then lower index",
    per_fold(lambda sim, pos, seed: mieb(sim, pos)),
    names={"recall": "recall_at_{k}", **MIEB_CUT_NAMES}))
MMEB = register_suite(Suite(
    "mmeb", "precision@1 over 1 positive + 999 sampled negatives per query; fractions",
    "TIGER-Lab/VLM2Vec MMEB evaluation (fixed 1,000-candidate lists per query)",
    "score desc, then lower gallery index among the query's candidates", per_fold(mmeb),
    names={"p1": "precision_at_1"}, seeded=True))
ECCV = register_suite(Suite(
    "eccv", "ECCV Caption: mAP@R, R-Precision, R@1 on its annotated queries; percent",
    "Chun et al. 2022, eccv_caption package definitions (vlbench.metrics.official)", "score desc, then lower index",
    _official_score("eccv"), percent=True))
CXC = register_suite(Suite(
    "cxc", "CxC Recall@K (hit rate) over its ground-truth queries; percent",
    "Parekh et al. 2021, as in the eccv_caption package (vlbench.metrics.official)", "score desc, then lower index",
    _official_score("cxc"), percent=True))
#: suite -> its convention notes and metric names (the name older code read)
CONVENTIONS = {s.name: {**s.describe(), "names": s.names} for s in (CLIP_BENCHMARK, MIEB, MMEB, ECCV, CXC)}
