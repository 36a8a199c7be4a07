"""The two-stage rerank rule (vlbench.models.pairs.rerank): K = 1 is stage one, K = the gallery is the pair
model's full ranking with ties broken by stage-one rank, candidates below K keep their stage-one order below
every reranked one; checked against an independent recomputation on random data with many ties."""

from __future__ import annotations

import numpy as np
import pytest

from vlbench.errors import VlbenchError
from vlbench.models.pairs import rerank, topk_pair_scores


def _stage_one(rng, queries, n):
    """Random first-stage rankings: a permutation of the gallery per query."""
    return np.stack([rng.permutation(n) for _ in range(queries)])


def _pair_matrix(rng, queries, n, levels=4):
    """Pair scores of every (query, candidate), drawn from a few values so that ties are common."""
    return rng.integers(0, levels, (queries, n)).astype(np.float32) / levels


def _gathered(stage_one, scores, k):
    return np.take_along_axis(scores, stage_one[:, :k], axis=1)


def _recompute(stage_one, scores, k):
    """Python sort of each query's first K by (-pair score, stage-one position), the rest appended as they were."""
    out = []
    for ids, row in zip(stage_one.tolist(), scores):
        top = sorted(range(k), key=lambda pos: (-float(row[ids[pos]]), pos))
        out.append([ids[pos] for pos in top] + ids[k:])
    return np.array(out)


def test_rerank_with_k1_equals_stage_one():
    rng = np.random.default_rng(0)
    s1 = _stage_one(rng, 20, 15)
    scores = _pair_matrix(rng, 20, 15)
    np.testing.assert_array_equal(rerank(s1, _gathered(s1, scores, 1)), s1)


def test_rerank_with_k_gallery_equals_the_pair_models_full_ranking():
    rng = np.random.default_rng(1)
    q, n = 30, 12
    s1 = _stage_one(rng, q, n)
    scores = _pair_matrix(rng, q, n, levels=3)  # many ties
    got = rerank(s1, _gathered(s1, scores, n))
    # the pair model's own ranking of the whole gallery: by score, ties by the first stage's rank of the candidate
    stage_rank = np.argsort(s1, axis=1)  # candidate id -> its stage-one position
    for i in range(q):
        want = sorted(range(n), key=lambda c: (-float(scores[i, c]), stage_rank[i, c]))
        assert got[i].tolist() == want


@pytest.mark.parametrize("k", [2, 5, 9])
def test_rerank_equals_an_independent_recomputation_with_ties(k):
    rng = np.random.default_rng(k)
    q, n = 40, 11
    s1 = _stage_one(rng, q, n)
    scores = _pair_matrix(rng, q, n)
    got = rerank(s1, _gathered(s1, scores, k))
    np.testing.assert_array_equal(got, _recompute(s1, scores, k))


def test_candidates_below_k_keep_their_stage_one_order_below_every_reranked_one():
    s1 = np.array([[4, 2, 0, 3, 1]])
    pair = np.array([[0.1, 0.9]], dtype=np.float32)  # K = 2: candidates 4 and 2 are scored
    got = rerank(s1, pair)
    assert got.tolist() == [[2, 4, 0, 3, 1]]  # 0, 3, 1 stay below, in stage-one order, whatever their pair score


def test_rerank_ties_keep_stage_one_order():
    s1 = np.array([[7, 3, 5, 1]])
    got = rerank(s1, np.array([[0.5, 1.0, 0.5, 1.0]], dtype=np.float32))
    assert got.tolist() == [[3, 1, 7, 5]]


def test_rerank_accepts_a_stage_one_list_cut_at_k():
    rng = np.random.default_rng(3)
    s1 = _stage_one(rng, 5, 10)
    scores = _pair_matrix(rng, 5, 10)
    pair = _gathered(s1, scores, 4)
    np.testing.assert_array_equal(rerank(s1[:, :4], pair), rerank(s1, pair)[:, :4])


def test_rerank_leaves_its_inputs_unchanged():
    s1 = np.array([[0, 1, 2]])
    before = s1.copy()
    rerank(s1, np.array([[0.0, 1.0]], dtype=np.float32))
    np.testing.assert_array_equal(s1, before)


@pytest.mark.parametrize("s1, scores, match", [
    (np.array([[0, 1]]), np.array([[0.1, 0.2, 0.3]]), "only 2 first-stage candidates"),
    (np.array([[0, 1], [1, 0]]), np.array([[0.1]]), "shapes"),
    (np.array([[0, 1]]), np.array([[np.nan, 0.2]]), "query 0, candidate 0 is nan"),
    (np.array([[0.0, 1.0]]), np.array([[0.1, 0.2]]), "not candidate ids"),
])
def test_rerank_refuses_bad_input_naming_it(s1, scores, match):
    with pytest.raises(VlbenchError, match=match):
        rerank(s1, scores)


class _Counting:
    """A deterministic pair scorer that counts the pairs it is asked to score; captions "x" and "x " share a key."""

    def __init__(self):
        self.pairs = 0

    def text_keys(self, texts):
        return [t.strip() for t in texts]

    def score_pairs(self, images, texts):
        self.pairs += len(texts)
        return np.array([(float(im) * 7 + len(t.strip()) * 3) % 5 for im, t in zip(images, texts)],
                        dtype=np.float32)


def _direct(scorer, state, texts, stage_one, direction):
    out = np.empty(stage_one.shape, dtype=np.float32)
    for qi, row in enumerate(stage_one):
        for j, cand in enumerate(row):
            i, t = (qi, cand) if direction == "i2t" else (cand, qi)
            out[qi, j] = scorer.score_pairs(state[[i]], [texts[t]])[0]
    return out


@pytest.mark.parametrize("direction", ["i2t", "t2i"])
@pytest.mark.parametrize("batch_size", [1, 4, 1000])
def test_topk_pair_scores_equal_a_direct_loop_per_pair(direction, batch_size):
    rng = np.random.default_rng(7)
    n_img, n_txt, k = 6, 9, 4
    state = np.arange(n_img, dtype=np.float32)
    texts = ["a" * int(n) for n in rng.integers(1, 9, n_txt)]
    gallery = n_txt if direction == "i2t" else n_img
    queries = n_img if direction == "i2t" else n_txt
    s1 = np.stack([rng.permutation(gallery)[:k] for _ in range(queries)])
    got, scored = topk_pair_scores(_Counting(), state, texts, s1, direction=direction, batch_size=batch_size)
    np.testing.assert_array_equal(got, _direct(_Counting(), state, texts, s1, direction))
    assert got.dtype == np.float32 and scored <= queries * k


def test_topk_pair_scores_score_a_recurring_pair_once():
    scorer = _Counting()
    texts = ["dog", "dog ", "cat"]  # captions 0 and 1 share a key
    s1 = np.array([[0, 1], [1, 0], [0, 1]])  # t2i: every caption's candidates are images 0 and 1
    got, scored = topk_pair_scores(scorer, np.array([0.0, 1.0], np.float32), texts, s1, direction="t2i")
    assert scored == scorer.pairs == 4  # (0, dog), (1, dog), (0, cat), (1, cat): 6 pairs asked, 4 distinct
    np.testing.assert_array_equal(got[0], got[1][::-1])


def test_topk_pair_scores_with_k_gallery_then_rerank_is_the_pair_models_full_ranking():
    rng = np.random.default_rng(3)
    n_img, n_txt = 5, 8
    state = np.arange(n_img, dtype=np.float32)
    texts = ["b" * int(n) for n in rng.integers(1, 6, n_txt)]
    s1 = np.stack([rng.permutation(n_img) for _ in range(n_txt)])  # t2i over the whole gallery
    scores, _ = topk_pair_scores(_Counting(), state, texts, s1, direction="t2i")
    final = rerank(s1, scores)
    stage_rank = np.argsort(s1, axis=1)
    for t in range(n_txt):
        full = _Counting().score_pairs(state, [texts[t]] * n_img)  # every image with caption t
        assert final[t].tolist() == sorted(range(n_img), key=lambda i: (-float(full[i]), stage_rank[t, i]))


@pytest.mark.parametrize("kwargs, match", [
    (dict(direction="x2y"), "unknown direction"),
    (dict(direction="t2i", batch_size=0), "batch size"),
    (dict(direction="i2t", stage_one=np.array([[0, 9]])), "caption id out of range"),
])
def test_topk_pair_scores_refuse_bad_input_naming_it(kwargs, match):
    args = dict(stage_one=np.array([[0, 1]]))
    args.update(kwargs)
    with pytest.raises(VlbenchError, match=match):
        topk_pair_scores(_Counting(), np.zeros(2, np.float32), ["a", "b"], **args)
