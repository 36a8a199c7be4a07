"""MRR@k, Precision@k, mAP@k and binary nDCG@k against pytrec_eval (trec_eval, what MTEB's retrieval evaluator
runs) and torchmetrics' retrieval metrics, per query, in both directions, on rankings with exact ties and
several positives per query (five captions per image, ragged caption counts, extended t2i positives,
caption-less distractor images, a gallery smaller than k).

Ties: vlbench orders by score descending, then candidate index ascending. trec_eval orders by score descending,
then document id descending (checked below), so each candidate j of n gets the id ``n - 1 - j`` zero-padded:
pytrec_eval then ranks the raw scores, ties included, by vlbench's rule on its own. Its recip_rank is given the
top k of the run only (as MTEB cuts its runs), ranked here by an independent NumPy stable sort. torchmetrics'
sort is not stable, so it gets rank-based scores (n - rank + 1 > 0) from the same NumPy sort.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from support.tools import has_package, needs_package

from vlbench.metrics.compute import EmbeddingSource, evaluate, similarity_matrix

pytestmark = needs_package("pytrec_eval", "trec_eval is the oracle here: pip install pytrec-eval-terrier")
pytrec_eval = importlib.import_module("pytrec_eval") if has_package("pytrec_eval") else None

KS = (1, 5, 10)


def _embeddings_case():
    """Real-valued unit vectors with bit-identical duplicate captions and images (exact ties in both directions),
    ragged caption counts (1..6, one image with five) and two caption-less distractor images."""
    rng = np.random.default_rng(11)
    counts = [5, 1, 6, 3, 5, 2, 4, 5, 1, 3, 0, 0]
    img = rng.standard_normal((len(counts), 16)).astype(np.float32)
    img[5] = img[2]  # duplicate image
    c2i = np.repeat(np.arange(len(counts)), counts)
    txt = (img[c2i] + 0.9 * rng.standard_normal((len(c2i), 16))).astype(np.float32)
    txt[[3, 17, 30]] = txt[8]  # duplicate captions of other images
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    txt /= np.linalg.norm(txt, axis=1, keepdims=True)
    return EmbeddingSource(img, txt), c2i, None


def _quantized_case():
    """Scores on a 0.1 grid (many exact ties), five captions per image, extended t2i positives."""
    rng = np.random.default_rng(5)
    sim = np.round(rng.random((14, 70)), 1)
    return sim, np.repeat(np.arange(14), 5), {"t2i": {0: [3, 5], 7: [1, 2, 9], 33: [0]}}


def _small_gallery_case():
    """Four images (t2i gallery below k = 5, 10), three captions each, scores on a 0.25 grid."""
    rng = np.random.default_rng(2)
    return np.round(4 * rng.random((4, 12))) / 4, np.repeat(np.arange(4), 3), None


CASES = {"embeddings": _embeddings_case, "quantized": _quantized_case, "small-gallery": _small_gallery_case}


def _queries(sim: np.ndarray, c2i: np.ndarray, extra) -> dict:
    """direction -> (query rows of scores, positive sets) in vlbench's query order, from the definitions."""
    extra = extra or {}
    i2t_q = [i for i in range(sim.shape[0]) if (c2i == i).any()]
    t2i_pos = [{int(c2i[j])} | set(extra.get("t2i", {}).get(j, ())) for j in range(sim.shape[1])]
    return {"i2t": (sim[i2t_q], [set(np.flatnonzero(c2i == i).tolist()) for i in i2t_q]),
            "t2i": (sim.T, t2i_pos)}


def _doc(j: int, n: int) -> str:
    return f"{n - 1 - j:07d}"  # descending id = ascending index: trec_eval's tie order becomes vlbench's


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    src, c2i, extra = CASES[request.param]()
    ev = evaluate(src, c2i, extra_positives=extra, k=KS)
    sim = similarity_matrix(src) if isinstance(src, EmbeddingSource) else src  # the bits vlbench ranks
    return request.param, ev, _queries(np.asarray(sim, dtype=np.float64), c2i, extra)


def test_trec_eval_breaks_ties_by_descending_document_id():
    """The premise of the id encoding: with equal scores, trec_eval ranks the larger id first."""
    ev = pytrec_eval.RelevanceEvaluator({"q": {"d1": 1}}, {"recip_rank"})
    assert ev.evaluate({"q": {"d0": 1.0, "d1": 1.0, "d2": 1.0}})["q"]["recip_rank"] == 0.5
    assert ev.evaluate({"q": {"d0": 1.0, "d1": 1.0, "d2": 0.5}})["q"]["recip_rank"] == 1.0


def test_the_cases_have_ties_and_several_positives(case):
    name, _ev, queries = case
    assert max(len(p) for p in queries["i2t"][1]) >= 3
    if name == "quantized":
        assert max(len(p) for p in queries["t2i"][1]) == 3
    for d, (rows, _pos) in queries.items():
        assert any(len(np.unique(r)) < len(r) for r in rows), (name, d)


def test_cut_metrics_equal_pytrec_eval_per_query(case):
    name, ev, queries = case
    measures = {f"P.{','.join(map(str, KS))}", f"map_cut.{','.join(map(str, KS))}",
                f"ndcg_cut.{','.join(map(str, KS))}", "recip_rank"}
    for d, (rows, pos) in queries.items():
        n = rows.shape[1]
        qrels = {str(q): {_doc(j, n): 1 for j in p} for q, p in enumerate(pos)}
        run = {str(q): {_doc(j, n): float(s) for j, s in enumerate(row)} for q, row in enumerate(rows)}
        full = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
        order = np.argsort(-rows, axis=1, kind="stable")  # an independent ranking by vlbench's rule
        # uncut recip_rank on the whole run: pytrec_eval's own ranking of the ties agrees with the stable sort
        first = [1 + min(int(np.flatnonzero(order[q] == j)[0]) for j in p) for q, p in enumerate(pos)]
        assert [full[str(q)]["recip_rank"] for q in range(len(pos))] == [1 / r for r in first]
        r = ev.direction(d)
        for k in KS:
            top = {str(q): {_doc(int(j), n): float(rows[q, j]) for j in order[q, :k]} for q in range(len(pos))}
            cut = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top)  # MTEB: the top k only
            want = {"mrr": [cut[str(q)]["recip_rank"] for q in range(len(pos))],
                    "precision": [full[str(q)][f"P_{k}"] for q in range(len(pos))],
                    "map": [full[str(q)][f"map_cut_{k}"] for q in range(len(pos))],
                    "ndcg_binary": [full[str(q)][f"ndcg_cut_{k}"] for q in range(len(pos))]}
            for metric, values in want.items():
                np.testing.assert_allclose(r.at_k[metric][k], values, rtol=1e-12, atol=0,
                                           err_msg=f"{name} {d} {metric}@{k}")
                assert ev.as_dict()[f"{d}_{metric}@{k}"] == pytest.approx(
                    (100.0 if metric != "ndcg_binary" else 1.0) * np.mean(values), rel=1e-12)
        # the normaliser is R, not min(R, k): at k = 1 a query with R positives scores at most 1 / R
        assert np.all(r.at_k["map"][1] <= 1.0 / np.array([len(p) for p in pos]))


def test_cut_metrics_equal_torchmetrics_where_defined_alike(case):
    """RetrievalMRR, RetrievalPrecision and RetrievalNormalizedDCG with top_k everywhere; RetrievalMAP with top_k
    divides by the positives found in the top k, not by R: alike for the queries that find all their positives
    in the top k (every query with R = 1 that has a hit; the rest have 0 in both)."""
    import torch
    from torchmetrics.functional.retrieval import (
        retrieval_average_precision,
        retrieval_normalized_dcg,
        retrieval_precision,
        retrieval_reciprocal_rank,
    )

    name, ev, queries = case
    fns = {"mrr": retrieval_reciprocal_rank, "precision": retrieval_precision, "map": retrieval_average_precision,
           "ndcg_binary": retrieval_normalized_dcg}
    compared = 0
    for d, (rows, pos) in queries.items():
        n = rows.shape[1]
        order = np.argsort(-rows, axis=1, kind="stable")
        r = ev.direction(d)
        for q, p in enumerate(pos):
            preds = np.empty(n)
            preds[order[q]] = np.arange(n, 0, -1)  # n for rank 1 ... 1 for rank n: no ties, all > 0
            target = np.zeros(n, dtype=bool)
            target[list(p)] = True
            rank_of = {int(j): int(np.flatnonzero(order[q] == j)[0]) + 1 for j in p}
            for k in KS:
                for metric, fn in fns.items():
                    if metric == "map" and sum(x <= k for x in rank_of.values()) not in (0, len(p)):
                        continue  # torchmetrics divides by the positives found in the top k, vlbench by R
                    got = float(fn(torch.tensor(preds), torch.tensor(target), top_k=k))
                    assert r.at_k[metric][k][q] == pytest.approx(got, rel=1e-6, abs=1e-7), (name, d, q, metric, k)
                    compared += 1
    assert compared > 150
