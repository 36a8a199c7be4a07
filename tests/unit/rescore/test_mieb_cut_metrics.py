"""``rescore --as mieb`` reports MTEB's ndcg_at_k, map_at_k, precision_at_k and mrr_at_k (beside recall_at_k) with
vlbench's built-in definitions: equal to the run's own ``ndcg_binary``, ``map``, ``precision`` and ``mrr`` records
and to pytrec_eval (what MTEB's retrieval evaluator runs), with exact ties and five captions per image."""

from __future__ import annotations

import numpy as np
import pytest
from support.tools import require_package

from vlbench.metrics.compute import EmbeddingSource, evaluate, similarity_matrix
from vlbench.rescore import score_suite
from vlbench.rescore.suites import MIEB_CUT_NAMES


def _case():
    """Unit vectors with a bit-identical duplicate caption and image (exact ties), five captions per image."""
    rng = np.random.default_rng(8)
    img = rng.standard_normal((9, 16)).astype(np.float32)
    img[4] = img[1]
    c2i = np.repeat(np.arange(9), 5)
    txt = (img[c2i] + rng.standard_normal((45, 16))).astype(np.float32)
    txt[[7, 30]] = txt[2]
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    txt /= np.linalg.norm(txt, axis=1, keepdims=True)
    return img, txt, c2i


def _mieb(img, txt, c2i) -> dict:
    gt = {"caption_to_image": c2i.tolist(), "n_gallery": len(img)}
    return {(d, m): v for d, m, _k, v in score_suite("mieb", gt, img, txt)}


def test_mieb_reports_mteb_cut_metrics_equal_to_the_runs_records():
    img, txt, c2i = _case()
    got = _mieb(img, txt, c2i)
    run = {(r["direction"], r["metric"], r["k"]): r["value"]
           for r in evaluate(EmbeddingSource(img, txt), c2i).records()}
    for d in ("i2t", "t2i"):
        for metric, name in MIEB_CUT_NAMES.items():
            for k in (1, 5, 10):
                scale = 1.0 if metric == "ndcg_binary" else 100.0  # the suite's fractions, the run's percent
                assert scale * got[(d, name.format(k=k))] == pytest.approx(run[(d, metric, k)], rel=1e-12), \
                    (d, name, k)
        assert (d, "recall_at_5") in got and (d, "ndcg_at_10") in got  # the records it had before stay


def test_mieb_cut_metrics_equal_pytrec_eval_with_ties():
    require_package("pytrec_eval", "trec_eval's cut metrics")
    import pytrec_eval
    img, txt, c2i = _case()
    got = _mieb(img, txt, c2i)
    sim = similarity_matrix(EmbeddingSource(img, txt)).astype(np.float64)  # the bits the suite ranks
    for d, rows in (("i2t", sim), ("t2i", sim.T)):
        n = rows.shape[1]
        pos = [set(np.flatnonzero(c2i == q)) for q in range(9)] if d == "i2t" else [{int(i)} for i in c2i]
        assert any(len(np.unique(r)) < n for r in rows)  # the duplicates tie
        doc = [f"{n - 1 - j:05d}" for j in range(n)]  # trec_eval: ties by descending id = vlbench's ascending index
        qrels = {str(q): {doc[j]: 1 for j in p} for q, p in enumerate(pos)}
        run = {str(q): {doc[j]: float(s) for j, s in enumerate(row)} for q, row in enumerate(rows)}
        order = np.argsort(-rows, axis=1, kind="stable")
        for k in (1, 5, 10):
            full = pytrec_eval.RelevanceEvaluator(qrels, {f"ndcg_cut.{k}", f"map_cut.{k}", f"P.{k}"}).evaluate(run)
            top = {str(q): {doc[j]: float(rows[q, j]) for j in order[q, :k]} for q in range(len(pos))}
            rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top)
            for name, measure, res in (("ndcg_at", f"ndcg_cut_{k}", full), ("map_at", f"map_cut_{k}", full),
                                       ("precision_at", f"P_{k}", full), ("mrr_at", "recip_rank", rr)):
                want = np.mean([res[str(q)][measure] for q in range(len(pos))])
                assert got[(d, f"{name}_{k}")] == pytest.approx(want, rel=1e-12), (d, name, k)
