"""MRR@k, Precision@k, mAP@k and binary nDCG@k: built-in records of the one ranking pass (hand-worked cases with
ties at the cut, the --score-block path, the head size, the registry). The peers' values: tests/oracle/
test_cut_metrics_pytrec_eval.py."""

from __future__ import annotations

import numpy as np
import pytest

from vlbench.metrics import specs
from vlbench.metrics.compute import CUT_METRICS, EmbeddingSource, cut_metrics, evaluate
from vlbench.metrics.ranking import build_positives, head_size

# 2 images x 6 captions, captions 0-2 of image 0, 3-5 of image 1. Worked by hand (ties: lower index first):
# i2t image 0 row: 3 (.9), then .5 at 0, 2, 4, then 1 (.2), 5 (.1): positives at ranks 2, 3, 5
# i2t image 1 row: .7 at 0, 1, 3, then 4 (.5), 5 (.3), 2 (.1): positives at ranks 3, 4, 5 (a tie at rank 1)
# t2i (2 candidates): caption ranks of the own image 2, 2, 1, 2, 2 (tie .5/.5: image 0 first), 1
S = np.array([[.5, .2, .5, .9, .5, .1],
              [.7, .7, .1, .7, .5, .3]])
C2I = [0, 0, 0, 1, 1, 1]
L = 1 / np.log2(np.arange(2, 12))  # discount of ranks 1..10


def test_cut_metrics_hand_worked_with_ties_at_the_cut():
    ev = evaluate(S, C2I, k=(1, 5))
    i2t, t2i = ev.i2t.at_k, ev.t2i.at_k
    np.testing.assert_allclose(i2t["mrr"][1], [0, 0])  # image 1: the tie at rank 1 goes to caption 0
    np.testing.assert_allclose(i2t["mrr"][5], [1 / 2, 1 / 3])
    np.testing.assert_allclose(i2t["precision"][1], [0, 0])
    np.testing.assert_allclose(i2t["precision"][5], [3 / 5, 3 / 5])
    np.testing.assert_allclose(i2t["map"][5], [(1 / 2 + 2 / 3 + 3 / 5) / 3, (1 / 3 + 2 / 4 + 3 / 5) / 3])
    np.testing.assert_allclose(i2t["ndcg_binary"][5], [(L[1] + L[2] + L[4]) / L[:3].sum(),
                                                       (L[2] + L[3] + L[4]) / L[:3].sum()])
    best = np.array([2, 2, 1, 2, 2, 1])
    np.testing.assert_allclose(t2i["mrr"][1], best == 1)
    np.testing.assert_allclose(t2i["mrr"][5], 1 / best)
    np.testing.assert_allclose(t2i["precision"][5], np.full(6, 1 / 5))  # / k, even with 2 candidates
    np.testing.assert_allclose(t2i["map"][1], best == 1)
    np.testing.assert_allclose(t2i["ndcg_binary"][5], L[best - 1])
    got = ev.as_dict()
    assert got["i2t_precision@5"] == pytest.approx(60.0) and got["t2i_mrr@5"] == pytest.approx(100 * 4 / 6)
    assert got["t2i_ndcg_binary@1"] == pytest.approx(1 / 3)


def test_map_at_k_divides_by_all_positives_not_those_that_fit():
    """trec_eval's map_cut_k (and MTEB's map_at_k): an image whose 5 captions hold ranks 1..5 has mAP@1 = 1/5."""
    sim = np.array([[.9, .8, .7, .6, .5, .1], [.1, .2, .3, .4, .5, .6]])
    ev = evaluate(sim, [0, 0, 0, 0, 0, 1], k=(1, 5))
    assert ev.i2t.at_k["map"][1][0] == pytest.approx(1 / 5) and ev.i2t.at_k["map"][5][0] == pytest.approx(1.0)
    assert ev.i2t.at_k["ndcg_binary"][1][0] == 1.0 and ev.i2t.at_k["precision"][1][0] == 1.0


def _embeddings(seed: int = 3):
    """Unit vectors with bit-identical duplicates (exact ties), three captions per image; both galleries wider
    than the narrowest score block (256 columns), so --score-block really cuts them."""
    rng = np.random.default_rng(seed)
    img = rng.standard_normal((300, 16)).astype(np.float32)
    img[[7, 270]] = img[3]
    c2i = np.repeat(np.arange(300), 3)
    txt = (img[c2i] + rng.standard_normal((900, 16))).astype(np.float32)
    txt[[11, 60, 650]] = txt[0]
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    txt /= np.linalg.norm(txt, axis=1, keepdims=True)
    return EmbeddingSource(img, txt), c2i


@pytest.mark.parametrize("block", ["2x256", "7x300", "3x999"])
def test_cut_metrics_are_the_same_with_score_block(block):
    """The --score-block path merges the shards' heads into the same head: every per-query value bit for bit."""
    src, c2i = _embeddings()
    one = evaluate(src, c2i, k=(1, 3, 10))
    sharded = evaluate(src, c2i, k=(1, 3, 10), score_block=block)
    for d in ("i2t", "t2i"):
        for name in CUT_METRICS:
            for k in (1, 3, 10):
                np.testing.assert_array_equal(one.direction(d).at_k[name][k], sharded.direction(d).at_k[name][k])
    mine = [[r for r in ev.records() if r["metric"] in CUT_METRICS] for ev in (one, sharded)]
    assert len(mine[0]) == 2 * 4 * 3 and mine[0] == mine[1]


def test_head_covers_the_largest_k_whatever_p():
    """With --dcg-p 1 and one positive per t2i query the head is still k_max long: the cut-off metrics at k = 10
    are those of a run with p = 10, and equal the same formulas on a full stable sort."""
    src, c2i = _embeddings(seed=4)
    _i2t, t2i_pos, _q = build_positives(c2i, 300)
    assert head_size(t2i_pos, 10, 1) >= 10
    small_p, big_p = evaluate(src, c2i, k=(1, 10), p=1), evaluate(src, c2i, k=(1, 10), p=10)
    sim = src.rows("t2i", np.arange(900))
    order = np.argsort(-sim, axis=1, kind="stable")
    full = cut_metrics(order == np.asarray(c2i)[:, None], np.ones(900, dtype=np.int64), (1, 10))
    for name in CUT_METRICS:
        np.testing.assert_array_equal(small_p.t2i.at_k[name][10], big_p.t2i.at_k[name][10])
        np.testing.assert_allclose(small_p.t2i.at_k[name][10], full[name][10], rtol=1e-15)


def test_cut_metrics_are_registered_records_in_both_directions():
    ev = evaluate(S, C2I)
    recs = {(r["direction"], r["metric"], r["k"]) for r in ev.records()}
    for name in CUT_METRICS:
        m = specs.builtin(name)
        assert m.param == "k" and m.table is None  # results.json and per_query; the printed table is unchanged
        for d in ("i2t", "t2i"):
            assert {(d, name, k) for k in (1, 5, 10)} <= recs
    cols = ev.per_query("i2t")
    assert cols["mrr@10"] == pytest.approx(100 * ev.i2t.at_k["mrr"][10])
    assert cols["ndcg_binary@10"] == pytest.approx(ev.i2t.at_k["ndcg_binary"][10])
    # the existing records keep their order: the new ones come between them
    names = [r["metric"] for r in ev.records() if r["direction"] == "i2t"]
    old = ["recall", "rsum", "medr", "meanr", "r_precision", "map_at_r", "ndcg", "dcg_cm", "ndcg_cm"]
    assert [n for n in dict.fromkeys(names) if n in old] == old
