"""Identical model inputs get bitwise-identical scores, so the tie rule (lower index first) holds for duplicate
captions and images; ECCV / CxC on an exact-tie case equal the eccv_caption package; --dcg-p above the gallery."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from support.oracles import oracle_score
from support.tools import require_package

from vlbench.metrics import compute as M
from vlbench.metrics.ranking import EmbeddingSource, duplicate_rows

N = 60  # images; caption i belongs to image i
L = N - 1  # the second copy of caption 0 and of image 0


def _unit(x):
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def tied():
    """Every image lies near one direction t; captions 0 and L = N - 1 are both exactly t (a duplicate caption,
    far apart: the plain product rounds them differently), the others random; images 0 and L are exactly t
    too (a duplicate image). For every image query the top two candidates are the duplicate pair, a tie."""
    rng = np.random.default_rng(7)
    t = _unit(rng.standard_normal(64))
    img = _unit(t + 0.3 * _unit(rng.standard_normal((N, 64))))
    img[0] = img[L] = t
    txt = _unit(rng.standard_normal((N, 64)))
    txt[0] = txt[L] = t
    # the exact-tie matrix, computed independently: float64 products of the distinct vectors, then expanded
    u_img, inv_i = np.unique(img, axis=0, return_inverse=True)
    u_txt, inv_t = np.unique(txt, axis=0, return_inverse=True)
    exact = (u_img.astype(np.float64) @ u_txt.astype(np.float64).T)[inv_i.reshape(-1)][:, inv_t.reshape(-1)]
    extra = {"i2t": {i: [L] for i in range(1, L)}}  # caption L is also a positive of images 1..L-1
    return img, txt, exact, extra


def test_duplicate_rows_finds_the_first_copy():
    x = np.array([[1, 2], [3, 4], [1, 2], [5, 6], [3, 4], [1, 2]], dtype=np.float32)
    dup, first = duplicate_rows(x)
    assert dup.tolist() == [2, 4, 5] and first.tolist() == [0, 1, 0]
    assert [a.tolist() for a in duplicate_rows(x[:1])] == [[], []]


def test_duplicates_score_bitwise_identically(tied):
    img, txt, _, _ = tied
    # the plain block product (OpenBLAS here): columns 0 and L differ in 25 of 60 rows, 12 put the copy first,
    # so without the sharing i2t R@1 is 18.33 instead of 1.67 (the hand value below)
    naive = img @ txt.T
    src = EmbeddingSource(img, txt)
    i2t = src.rows("i2t", np.arange(N))
    assert np.array_equal(i2t[:, 0], i2t[:, L])  # duplicate caption columns, bit for bit
    assert np.array_equal(i2t[0], i2t[L])  # duplicate image rows within the block
    t2i = src.rows("t2i", np.arange(N))
    assert np.array_equal(t2i[:, 0], t2i[:, L]) and np.array_equal(t2i[0], t2i[L])
    # only the duplicates are touched: every other score is the plain product's
    assert np.array_equal(i2t[:L, 1:L], naive[:L, 1:L])
    # the duplicate caption is never ranked before its first copy
    assert (np.argsort(-i2t, axis=1, kind="stable")[:, :2] == [0, L]).all()


def test_tie_rule_holds_for_duplicate_captions(tied):
    img, txt, exact, extra = tied
    ev = M.evaluate(EmbeddingSource(img, txt), np.arange(N), extra_positives=extra)
    # i2t: image 0's positive caption 0 is first; every other image's best positive (caption L)
    # ties with caption 0, which comes first: rank 2 (images 1..L-1 rank their own random caption far below)
    assert ev.i2t.best_rank.tolist() == [1] + [2] * (N - 1)
    # t2i: caption L's image L ties with image 0 (a duplicate), which comes first
    assert ev.t2i.best_rank[0] == 1 and ev.t2i.best_rank[L] == 2
    got = ev.as_dict()
    assert got["i2t_recall@1"] == pytest.approx(100 / N)
    ref = oracle_score(exact, np.arange(N), extra_positives=extra)  # the slow oracle on the exact-tie matrix
    for key in ("i2t_recall@1", "i2t_recall@5", "i2t_medr", "i2t_map_at_r", "t2i_recall@1", "t2i_recall@5",
                "t2i_medr", "t2i_meanr", "t2i_r_precision"):
        assert got[key] == pytest.approx(ref[key], abs=1e-9), key


def _gts(n):
    img_ids, cap_ids = [100 + i for i in range(n)], [1000 + j for j in range(n)]
    i2t = {100: [1000], 100 + L: [1000 + L]} | {100 + i: [1000 + L, 1000 + i] for i in range(1, L)}
    t2i = {1000 + j: [100 + j] for j in range(n)}
    return img_ids, cap_ids, {"i2t": i2t, "t2i": t2i}


def _package_rankings(sim, row_ids, col_ids, top):
    order = np.argsort(-sim, axis=1, kind="stable")[:, :top]
    return {int(row_ids[r]): [int(col_ids[c]) for c in o] for r, o in enumerate(order)}


def test_eccv_and_cxc_on_exact_ties_equal_the_package(tied):
    require_package("eccv_caption", "the ECCV Caption authors' metric code")
    import eccv_caption._metrics as pkg
    img, txt, exact, _ = tied
    img_ids, cap_ids, gt = _gts(N)
    i2t = _package_rankings(exact, img_ids, cap_ids, 10)
    t2i = _package_rankings(exact.T, cap_ids, img_ids, 10)
    ref_i2t, ref_t2i = pkg.compute_eccv_metrics(i2t, gt["i2t"]), pkg.compute_eccv_metrics(t2i, gt["t2i"])
    ev = M.evaluate(EmbeddingSource(img, txt), np.arange(N),
                    official={"kind": "eccv", "image_ids": img_ids, "caption_ids": cap_ids, "gt": gt})
    for d, ref in (("i2t", ref_i2t), ("t2i", ref_t2i)):
        for ours, theirs in (("eccv_map_at_r", "eccv_map_at_r"), ("eccv_r_precision", "eccv_rprecision"),
                             ("eccv_r1", "eccv_r1")):
            assert ev.official[(d, ours, None)] == pytest.approx(100 * ref[theirs], abs=1e-9), (d, ours)
    # hand-worked: i2t R@1 = 1/N (only image 0's top candidate, caption 0, is its positive)
    assert ev.official[("i2t", "eccv_r1", None)] == pytest.approx(100 / N)
    cxc = M.evaluate(EmbeddingSource(img, txt), np.arange(N),
                     official={"kind": "cxc", "image_ids": img_ids, "caption_ids": cap_ids, "gt": gt})
    for d, ranked in (("i2t", i2t), ("t2i", t2i)):
        for k in (1, 5, 10):
            want = 100 * pkg.compute_r_at_k(ranked, gt[d], K=k)
            assert cxc.official[(d, "cxc_recall", k)] == pytest.approx(want, abs=1e-9), (d, k)


def test_dcg_p_above_the_gallery_equals_the_gallery_size_and_allocates_nothing_of_size_p():
    sim = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.3]])  # 2 images x 3 captions
    c2i = [0, 1, 1]
    at3 = M.evaluate(sim, c2i, p=3).as_dict()
    tracemalloc.start()
    try:
        huge = M.evaluate(sim, c2i, p=1_000_000_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 << 20  # p = 10^9 float64 discounts would be 7.45 GiB
    got = huge.as_dict()
    for d in ("i2t", "t2i"):
        assert got[f"{d}_dcg_cm@1000000000"] == at3[f"{d}_dcg_cm@3"]
        assert got[f"{d}_ndcg_cm@1000000000"] == at3[f"{d}_ndcg_cm@3"]
    # hand-worked t2i caption 2 (image 1): image 0 scores 0.5 > image 1's 0.3, so image 0 (gain 0.5) then
    # image 1 (the positive, gain 1): DCG = 0.5 + 1/log2(3)
    assert huge.t2i.dcg[2] == pytest.approx(0.5 + 1 / math.log2(3))
