"""Randomised comparisons of vlbench's retrieval metrics against independent oracles.

* tests/support/oracles.py: slow loop/sort implementations written from the definitions;
* ECCV Caption style mAP@R / R-Precision (numpy cumsum, stable argsort);
* torchmetrics.functional.retrieval where its semantics match (see the comments there);
* properties: caption / image permutation invariance, block-size invariance, numpy vs torch.

Similarity matrices are float32 (the type vlbench ranks in), so the oracle's float64 view of
them is exact and results can be compared to 1e-9.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from support.oracles import eccv_scores, oracle_score, per_query, positives
from torchmetrics.functional.retrieval import (
    retrieval_hit_rate,
    retrieval_normalized_dcg,
    retrieval_r_precision,
)

import vlbench
from vlbench.metrics.compute import ArraySource, EmbeddingSource, evaluate

TOL = 1e-9


def assert_dicts_close(got: dict, want: dict, tol: float = TOL, context: str = ""):
    assert set(got) == set(want), f"{context} key sets differ: {set(got) ^ set(want)}"
    bad = {k: (float(got[k]), want[k]) for k in want
           if not math.isclose(float(got[k]), want[k], rel_tol=tol, abs_tol=tol)}
    assert not bad, f"{context} got vs oracle: {bad}"


# ------------------------------------------------------------------------------------------
# random case generator
# ------------------------------------------------------------------------------------------

def make_case(seed, *, n_img=None, max_caps=6, levels=None, distractor_p=0.25, extra=False,
              relevance=False, shuffle=True):
    rng = np.random.default_rng(seed)
    if n_img is None:
        n_img = int(rng.integers(1, 9))
    counts = [0 if rng.random() < distractor_p else int(rng.integers(1, max_caps + 1)) for _ in range(n_img)]
    if sum(counts) == 0:
        counts[int(rng.integers(n_img))] = 1
    c2i = np.repeat(np.arange(n_img), counts)
    if shuffle:
        c2i = rng.permutation(c2i)
    n_cap = len(c2i)
    if levels:  # heavy ties: a few quantised levels, including negative ones
        S = (rng.integers(0, levels, size=(n_img, n_cap)) / levels - 0.25).astype(np.float32)
    else:
        S = rng.standard_normal((n_img, n_cap)).astype(np.float32) * np.float32(0.3)
    ex = None
    if extra:
        i2t = {}
        for i in range(n_img):
            if rng.random() < 0.5:  # includes distractors and duplicates of original positives
                i2t[i] = [int(x) for x in rng.integers(0, n_cap, size=int(rng.integers(0, 4)))]
        t2i = {}
        for j in range(n_cap):
            if rng.random() < 0.4:
                t2i[j] = [int(x) for x in rng.integers(0, n_img, size=int(rng.integers(0, 3)))]
        if rng.random() < 0.5:  # the full-list form, one entry per query index
            i2t = [i2t.get(i, []) for i in range(n_img)]
            t2i = [t2i.get(j, []) for j in range(n_cap)]
        ex = {"i2t": i2t, "t2i": t2i}
    rel = None
    if relevance:
        rel = (rng.standard_normal((n_img, n_cap)) * 0.5).astype(np.float32)
    ks = tuple(int(x) for x in rng.choice(np.arange(1, n_cap + 3), size=min(3, n_cap + 2), replace=False))
    p = int(rng.integers(1, 13))
    return S, [int(x) for x in c2i], ex, rel, ks, p


# ------------------------------------------------------------------------------------------
# 1. score() vs the loop oracle
# ------------------------------------------------------------------------------------------

CONFIGS = {
    "continuous": dict(),
    "ties3": dict(levels=3),
    "ties2_ragged10": dict(levels=2, max_caps=10),
    "all_equal": dict(levels=1),
    "extra": dict(extra=True),
    "extra_ties": dict(extra=True, levels=4),
    "relevance": dict(relevance=True, levels=5),
    "everything": dict(extra=True, relevance=True, levels=3, max_caps=8),
}


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_score_matches_oracle(config):
    for seed in range(50):  # loop inside: cheap cases, the message names the failing seed
        S, c2i, ex, rel, ks, p = make_case(1000 * seed + sum(map(ord, config)), **CONFIGS[config])
        got = vlbench.score(S, c2i, extra_positives=ex, k=ks, p=p, relevance=rel)
        want = oracle_score(S, c2i, extra_positives=ex, k=ks, p=p, relevance=rel)
        assert_dicts_close(got, want, context=f"{config} seed={seed} k={ks} p={p}")


def test_default_k_and_p_match_oracle():
    for seed in range(10):
        S, c2i, ex, rel, _, _ = make_case(seed, n_img=12, max_caps=5, levels=4, extra=seed % 2 == 0)
        assert_dicts_close(vlbench.score(S, c2i, extra_positives=ex), oracle_score(S, c2i, extra_positives=ex),
                           context=f"seed={seed}")


@pytest.mark.parametrize("seed", range(4))
def test_per_query_values_match_oracle(seed):
    S, c2i, ex, rel, ks, p = make_case(seed + 77, levels=3, extra=True, relevance=seed % 2 == 1)
    ks = tuple(sorted(set(ks)))
    ev = evaluate(ArraySource(S), c2i, extra_positives=ex, k=ks, p=p,
                  relevance=None if rel is None else ArraySource(rel))
    pq = per_query(S, c2i, extra_positives=ex, k=ks, p=p, relevance=rel)
    for d in ("i2t", "t2i"):
        got = ev.per_query(d)
        queries = [q for q, _ in pq[d]]
        assert list(got["query"]) == queries, d
        i2t_pos, t2i_pos = positives(c2i, S.shape[0], ex)
        npos = [len((i2t_pos if d == "i2t" else t2i_pos)[q]) for q in queries]
        assert list(got["n_positives"]) == npos, d
        assert list(got["best_rank"]) == [m["rank"] for _, m in pq[d]], d
        for name, key in [("r_precision", "r_precision"), ("map_at_r", "map_at_r"),
                          (f"dcg_cm@{p}", "dcg"), (f"ndcg_cm@{p}", "ndcg")] + \
                         [(f"recall@{k}", f"recall@{k}") for k in ks]:
            np.testing.assert_allclose(got[name], [m[key] for _, m in pq[d]], rtol=TOL, atol=TOL,
                                       err_msg=f"{d} {name}")


# ------------------------------------------------------------------------------------------
# 2. ECCV Caption's R-Precision and mAP@R (independent numpy implementation)
# ------------------------------------------------------------------------------------------

def test_eccv_map_at_r_and_r_precision():
    for seed in range(30):
        S, c2i, ex, _, _, _ = make_case(seed + 5000, levels=[None, 3, 2][seed % 3], extra=seed % 4 != 0,
                                        max_caps=7)
        got = vlbench.score(S, c2i, extra_positives=ex)
        want = eccv_scores(S, c2i, ex)
        assert_dicts_close({k: got[k] for k in want}, want, context=f"seed={seed}")


# ------------------------------------------------------------------------------------------
# 3. torchmetrics where the semantics match.
#
#  - retrieval_hit_rate(preds, target, top_k): 1 if any relevant item is in the top k of
#    argsort(preds) -> exactly vlbench's Recall@k hit rate, for one or several positives.
#  - retrieval_r_precision(preds, target): relevant items in the top R / R, R = #relevant ->
#    exactly vlbench's R-precision (per query, before x100).
#  - retrieval_normalized_dcg(preds, target, top_k) with a float *graded* target: gain is the
#    target itself (linear, not 2^rel - 1), discount 1/log2(i+1), ideal = targets sorted
#    descending, 0 when the ideal is 0. With target = (1 for positives, relevance otherwise)
#    this is vlbench's ndcg_cm@p -- except (a) torchmetrics averages DCG over tied preds
#    (sklearn style) where vlbench breaks ties by index, (b) it computes in float32, and
#    (c) it returns 0 only when the ideal is exactly 0 (vlbench: <= 0). So: no ties, positive
#    relevance values, tolerance 1e-5.
#  - Not used: retrieval_average_precision (full AP, or AP over the top k normalised by the
#    number of relevant items retrieved, not mAP@R's 1/R), retrieval_recall (true recall, not
#    hit rate), and there is no public unnormalised DCG. Torchmetrics' argsort is not stable, so
#    ties are avoided everywhere here; scores are kept > 0 (recent torchmetrics versions drop
#    relevant items whose score is <= 0 in some metrics).
# ------------------------------------------------------------------------------------------

def _tm_case(seed, extra):
    rng = np.random.default_rng(seed + 9000)
    n_img = int(rng.integers(2, 10))
    counts = rng.integers(1, 6, size=n_img)
    counts[rng.random(n_img) < 0.2] = 0  # a few distractors
    if counts.sum() == 0:
        counts[0] = 3
    c2i = [int(x) for x in rng.permutation(np.repeat(np.arange(n_img), counts))]
    n_cap = len(c2i)
    # distinct positive scores: a random permutation of a grid in (0, 1]
    S = (rng.permutation(n_img * n_cap).reshape(n_img, n_cap) + 1).astype(np.float32) / np.float32(n_img * n_cap)
    ex = None
    if extra:
        ex = {"i2t": {i: [int(x) for x in rng.integers(0, n_cap, size=2)] for i in range(n_img) if rng.random() < .5},
              "t2i": {j: [int(x) for x in rng.integers(0, n_img, size=1)] for j in range(n_cap) if rng.random() < .5}}
    rel = (rng.random((n_img, n_cap)) * 0.9 + 0.05).astype(np.float32)
    return S, c2i, ex, rel


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("extra", [False, True], ids=["orig", "extra"])
def test_torchmetrics_hit_rate_r_precision_ndcg(seed, extra):
    S, c2i, ex, rel = _tm_case(seed, extra)
    n_img, n_cap = S.shape
    ks = (1, 2, 5)
    p = 4
    got = vlbench.score(S, c2i, extra_positives=ex, k=ks, p=p, relevance=rel)
    got_default_rel = vlbench.score(S, c2i, extra_positives=ex, k=ks, p=p)
    i2t_pos, t2i_pos = positives(c2i, n_img, ex)
    St, Rt = torch.from_numpy(S), torch.from_numpy(rel)
    for d, pos, scores, relv in (("i2t", i2t_pos, St, Rt), ("t2i", t2i_pos, St.T, Rt.T)):
        hits = {k: [] for k in ks}
        rps, ndcgs, ndcgs_sim = [], [], []
        for q, pset in sorted(pos.items()):
            preds = scores[q].clone()
            assert len(torch.unique(preds)) == len(preds)
            target = torch.zeros(len(preds), dtype=torch.long)
            target[sorted(pset)] = 1
            for k in ks:
                hits[k].append(float(retrieval_hit_rate(preds, target, top_k=k)))
            rps.append(float(retrieval_r_precision(preds, target)))
            graded = torch.where(target.bool(), torch.ones_like(preds), relv[q])
            ndcgs.append(float(retrieval_normalized_dcg(preds, graded, top_k=p)))
            graded_sim = torch.where(target.bool(), torch.ones_like(preds), preds)
            ndcgs_sim.append(float(retrieval_normalized_dcg(preds, graded_sim, top_k=p)))
        for k in ks:
            assert got[f"{d}_recall@{k}"] == pytest.approx(100 * np.mean(hits[k]), abs=1e-9)
        assert got[f"{d}_r_precision"] == pytest.approx(100 * np.mean(rps), abs=1e-4)  # fp32 division in tm
        assert got[f"{d}_ndcg_cm@{p}"] == pytest.approx(np.mean(ndcgs), abs=1e-5)
        assert got_default_rel[f"{d}_ndcg_cm@{p}"] == pytest.approx(np.mean(ndcgs_sim), abs=1e-5)


# ------------------------------------------------------------------------------------------
# 4. Properties
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(10))
def test_caption_permutation_invariance(seed):
    # no ties -> permuting the caption columns together with caption_to_image changes nothing
    S, c2i, _, rel, ks, p = make_case(seed + 300, n_img=10, relevance=True)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(S.shape[1])  # new column c holds old caption perm[c]
    c2i_p = [c2i[o] for o in perm]
    base = vlbench.score(S, c2i, k=ks, p=p, relevance=rel)
    assert_dicts_close(vlbench.score(S[:, perm], c2i_p, k=ks, p=p, relevance=rel[:, perm]), base)
    # with extra positives remapped through the same permutation
    new_of_old = np.argsort(perm)
    ex = {"i2t": {0: [1, 2]}, "t2i": {0: [S.shape[0] - 1], 1: [0]}}
    ex_p = {"i2t": {0: [int(new_of_old[1]), int(new_of_old[2])]},
            "t2i": {int(new_of_old[0]): ex["t2i"][0], int(new_of_old[1]): ex["t2i"][1]}}
    assert_dicts_close(vlbench.score(S[:, perm], c2i_p, extra_positives=ex_p, k=ks, p=p),
                       vlbench.score(S, c2i, extra_positives=ex, k=ks, p=p))


@pytest.mark.parametrize("seed", range(6))
def test_image_permutation_invariance(seed):
    S, c2i, _, _, ks, p = make_case(seed + 400, n_img=9)
    perm = np.random.default_rng(seed).permutation(S.shape[0])  # new row r holds old image perm[r]
    new_of_old = np.argsort(perm)
    c2i_p = [int(new_of_old[i]) for i in c2i]
    assert_dicts_close(vlbench.score(S[perm], c2i_p, k=ks, p=p), vlbench.score(S, c2i, k=ks, p=p))


def test_numpy_and_torch_agree():
    S, c2i, ex, rel, ks, p = make_case(11, n_img=8, levels=4, extra=True, relevance=True)
    a = vlbench.score(S, c2i, extra_positives=ex, k=ks, p=p, relevance=rel)
    b = vlbench.score(torch.from_numpy(S), torch.tensor(c2i), extra_positives=ex, k=ks, p=p,
                      relevance=torch.from_numpy(rel))
    assert_dicts_close(b, a, tol=0)


def test_embedding_source_matches_matrix():
    # small-integer embeddings: float32 dot products are exact, ties are frequent
    rng = np.random.default_rng(3)
    img = rng.integers(-2, 3, size=(20, 6)).astype(np.float32)
    txt = rng.integers(-2, 3, size=(70, 6)).astype(np.float32)
    c2i = [int(x) for x in rng.permutation(np.repeat(np.arange(20), [3, 4] * 10)[:70])]
    S = img @ txt.T
    ev = evaluate(EmbeddingSource(img, txt), c2i, block_bytes=1024).as_dict()
    assert_dicts_close(ev, oracle_score(S, c2i))


# ------------------------------------------------------------------------------------------
# 5. Larger matrices and block boundaries
# ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def big_case():
    # 300 images x 1500 captions (5 each), COCO-5k-like structure, scores quantised to 64
    # levels so that ties occur in every row.
    rng = np.random.default_rng(2024)
    n_img = 300
    c2i = [int(x) for x in np.repeat(np.arange(n_img), 5)]
    S = rng.integers(0, 64, size=(n_img, 5 * n_img)).astype(np.float32) / np.float32(64)
    S[np.array(c2i), np.arange(5 * n_img)] += np.float32(0.25)  # positives score a bit higher
    return S, c2i


def test_big_matches_oracle(big_case):
    S, c2i = big_case
    assert_dicts_close(vlbench.score(S, c2i), oracle_score(S, c2i))


@pytest.mark.parametrize("block_bytes", [4096, 50_000, 777_777])
def test_big_block_size_invariance(big_case, block_bytes):
    S, c2i = big_case
    ref = vlbench.score(S, c2i)
    assert_dicts_close(evaluate(ArraySource(S), c2i, block_bytes=block_bytes).as_dict(), ref)


@pytest.mark.parametrize("block_bytes", [1, 64, 300, 4096])
def test_small_blocks_with_extras_and_relevance(block_bytes):
    for seed in range(8):
        S, c2i, ex, rel, ks, p = make_case(seed + 700, n_img=int(30 + 7 * seed), levels=3, extra=True,
                                           relevance=True, max_caps=7)
        got = evaluate(ArraySource(S), c2i, extra_positives=ex, k=ks, p=p, relevance=ArraySource(rel),
                       block_bytes=block_bytes).as_dict()
        ctx = f"seed={seed} block_bytes={block_bytes}"
        assert_dicts_close(got, vlbench.score(S, c2i, extra_positives=ex, k=ks, p=p, relevance=rel), context=ctx)
        if block_bytes == 64:
            assert_dicts_close(got, oracle_score(S, c2i, extra_positives=ex, k=ks, p=p, relevance=rel),
                               context=ctx)
