"""Hand-worked retrieval-metric cases for vlbench.score.

Every expected number below is derived by hand in the comments (ranking by similarity
descending, ties -> lower candidate index first, ranks 1-based). Notation: "c3" = caption 3,
"img1" = image row 1. L3 = log2(3), L5 = log2(5) etc. are DCG discounts (rank i -> log2(i+1)).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import vlbench

L3, L4, L5, L6, L7, L8, L9, L10, L11 = (math.log2(x) for x in range(3, 12))


def check(res: dict, expected: dict, tol: float = 1e-12):
    """Compare the listed keys only (abs+rel tolerance)."""
    bad = {}
    for key, want in expected.items():
        assert key in res, f"missing key {key!r}; keys: {sorted(res)}"
        got = float(res[key])
        if not math.isclose(got, want, rel_tol=tol, abs_tol=tol):
            bad[key] = (got, want)
    assert not bad, "got vs expected: " + repr(bad)


# --------------------------------------------------------------------------------------------
# A. All-equal similarity matrix: the ranking is purely the index tie-break.
#    2 images, 4 captions, c2i = [1, 1, 0, 0]; every score 0.5.
#    Every ranking is candidate order 0,1,2,...
#    i2t img0 positives {c2,c3} -> ranks 3,4 (best 3); img1 positives {c0,c1} -> ranks 1,2 (best 1)
#      R@1 = 50, R@2 = 50, R@3 = 100 ; MedR = median(3,1) = 2 ; MeanR = 2
#      R-precision (R=2): img0 top2 = c0,c1 -> 0/2 ; img1 -> 2/2 ; mean 50
#      mAP@R: img0 0 ; img1 (1/1 + 2/2)/2 = 1 ; mean 50
#      DCG (rel = similarity 0.5 for non-positives, p=10 covers all 4):
#        img0 gains in rank order [.5,.5,1,1] -> .5 + .5/L3 + 1/L4 + 1/L5
#        img1 gains [1,1,.5,.5]               -> 1 + 1/L3 + .5/L4 + .5/L5  (= ideal for both)
#    t2i: candidates img0,img1 (both 0.5) -> order img0, img1.
#      c0,c1 (img1) rank 2 ; c2,c3 (img0) rank 1 -> R@1 = 50, MedR = median(2,2,1,1) = 1.5,
#      MeanR 1.5, R-precision = mAP@R = 50 (R = 1).
#      DCG: c0,c1 gains [.5, 1] -> .5 + 1/L3 ; c2,c3 gains [1, .5] -> 1 + .5/L3 (= ideal)
# --------------------------------------------------------------------------------------------

def test_all_equal_ties_index_tiebreak():
    S = np.full((2, 4), 0.5, dtype=np.float32)
    res = vlbench.score(S, [1, 1, 0, 0], k=(1, 2, 3))
    i2t_ideal = 1 + 1 / L3 + .5 / L4 + .5 / L5
    i2t_dcg0 = .5 + .5 / L3 + 1 / L4 + 1 / L5
    t2i_ideal = 1 + .5 / L3
    t2i_dcg_bad = .5 + 1 / L3
    check(res, {
        "i2t_recall@1": 50.0, "i2t_recall@2": 50.0, "i2t_recall@3": 100.0,
        "i2t_rsum": 200.0,
        "i2t_medr": 2.0, "i2t_meanr": 2.0,
        "i2t_r_precision": 50.0, "i2t_map_at_r": 50.0,
        "i2t_dcg_cm@10": (i2t_dcg0 + i2t_ideal) / 2,
        "i2t_ndcg_cm@10": (i2t_dcg0 / i2t_ideal + 1.0) / 2,
        "t2i_recall@1": 50.0, "t2i_recall@2": 100.0, "t2i_recall@3": 100.0,
        "t2i_rsum": 250.0,
        "t2i_medr": 1.5, "t2i_meanr": 1.5,
        "t2i_r_precision": 50.0, "t2i_map_at_r": 50.0,
        "t2i_dcg_cm@10": (t2i_dcg_bad + t2i_ideal) / 2,
        "t2i_ndcg_cm@10": (t2i_dcg_bad / t2i_ideal + 1.0) / 2,
        "rsum": 450.0,
    })


# --------------------------------------------------------------------------------------------
# A2. All-equal scores with a reversed mapping: c2i = [2, 1, 0], 3 images x 3 captions.
#    i2t: img0 <- c2 (rank 3), img1 <- c1 (rank 2), img2 <- c0 (rank 1)
#    t2i: c0 -> img2 (rank 3), c1 -> img1 (rank 2), c2 -> img0 (rank 1)
#    Both directions: R@1 = 33.33.., R@2 = 66.66.., R@3 = 100, MedR 2, MeanR 2.
#    If ties were broken by *higher* index first, ranks would be 1,2,3 reversed per query but
#    the aggregate would be the same -- so also check the per-query best ranks.
# --------------------------------------------------------------------------------------------

def test_all_equal_reversed_mapping_per_query():
    from vlbench.metrics.compute import ArraySource, evaluate

    S = np.zeros((3, 3), dtype=np.float32)
    res = vlbench.score(S, [2, 1, 0], k=(1, 2, 3))
    for d in ("i2t", "t2i"):
        check(res, {f"{d}_recall@1": 100 / 3, f"{d}_recall@2": 200 / 3, f"{d}_recall@3": 100.0,
                    f"{d}_medr": 2.0, f"{d}_meanr": 2.0})
    ev = evaluate(ArraySource(S), [2, 1, 0], k=(1, 2, 3))
    i2t = ev.per_query("i2t")
    t2i = ev.per_query("t2i")
    assert list(i2t["query"]) == [0, 1, 2] and list(i2t["best_rank"]) == [3, 2, 1]
    assert list(t2i["query"]) == [0, 1, 2] and list(t2i["best_rank"]) == [3, 2, 1]


def test_partial_tie_positive_after_negative_with_same_score():
    # 2 images, 3 captions, c2i = [1, 0, 0].
    # img0 row [.7, .5, .5]: order c0(.7), c1(.5, lower index wins the tie), c2(.5)
    #   positives {c1, c2} -> ranks 2,3 -> best 2; R=2: top2 = c0,c1 -> 1/2 ; AP: rank2 P=1/2 -> (1/2)/2
    # img1 row [.5, .5, .9]: order c2(.9), c0(.5), c1(.5); positive c0 -> rank 2; R=1 -> 0
    # i2t: R@1 = 0, R@2 = 100, MedR = 2, R-precision = (50 + 0)/2 = 25, mAP@R = (25 + 0)/2 = 12.5
    # t2i: c0 col (.7,.5) -> img0 first; positive img1 -> rank 2
    #      c1 col (.5,.5) -> tie -> img0 first; positive img0 -> rank 1
    #      c2 col (.5,.9) -> img1 first; positive img0 -> rank 2
    #      R@1 = 33.33.., MedR 2, MeanR 5/3
    S = np.array([[.7, .5, .5], [.5, .5, .9]], dtype=np.float32)
    res = vlbench.score(S, [1, 0, 0], k=(1, 2))
    check(res, {"i2t_recall@1": 0.0, "i2t_recall@2": 100.0, "i2t_medr": 2.0, "i2t_meanr": 2.0,
                "i2t_r_precision": 25.0, "i2t_map_at_r": 12.5,
                "t2i_recall@1": 100 / 3, "t2i_recall@2": 100.0, "t2i_medr": 2.0, "t2i_meanr": 5 / 3,
                "t2i_r_precision": 100 / 3, "t2i_map_at_r": 100 / 3})


# --------------------------------------------------------------------------------------------
# B. Ragged: img0 has 6 captions (c0..c5), img1 has 4 (c6..c9), img2 has none (distractor).
#
#   caption:  c0   c1   c2   c3   c4   c5   c6   c7   c8   c9
#   img0    [.90, .10, .80, .70, .20, .30, .85, .05, .60, .40]
#   img1    [.50, .95, .30, .20, .10, .00, .40, .60, .45, .35]
#   img2    [.00, .20, .95, .10, .30, .20, .30, .70, .10, .50]
#
# i2t (queries img0, img1 only; img2 is not a query):
#   img0 order: c0 .9, c6 .85, c2 .8, c3 .7, c8 .6, c9 .4, c5 .3, c4 .2, c1 .1, c7 .05
#     positives c0..c5 at ranks 1,3,4,7,8,9 -> best 1
#     R=6: top6 = c0,c6,c2,c3,c8,c9 -> 3 positives -> 50%
#     AP@R: hits at ranks 1,3,4 -> (1/1 + 2/3 + 3/4)/6 = (29/12)/6 = 29/72
#     gains in rank order: [1, .85, 1, 1, .6, .4, 1, 1, 1, .05]
#     ideal gains: [1,1,1,1,1,1, .85, .6, .4, .05]
#   img1 order: c1 .95, c7 .6, c0 .5, c8 .45, c6 .4, c9 .35, c2 .3, c3 .2, c4 .1, c5 .0
#     positives c6..c9 at ranks 5,2,4,6 -> best 2
#     R=4: top4 = c1,c7,c0,c8 -> 2 positives -> 50%
#     AP@R: hits at ranks 2,4 -> (1/2 + 2/4)/4 = 1/4
#     gains: [.95, 1, .5, 1, 1, 1, .3, .2, .1, .0] ; ideal [1,1,1,1, .95, .5, .3, .2, .1, 0]
#   i2t: R@1 = 50, R@2 = 100, R@3 = 100, MedR = median(1,2) = 1.5, MeanR 1.5,
#        R-precision 50, mAP@R = 100*(29/72 + 1/4)/2
#
# t2i (all 10 captions; candidates img0, img1, img2 incl. the distractor):
#   c0 (.9,.5,.0)   -> order 0,1,2 ; pos img0 rank 1
#   c1 (.1,.95,.2)  -> order 1,2,0 ; pos img0 rank 3
#   c2 (.8,.3,.95)  -> order 2,0,1 ; pos img0 rank 2
#   c3 (.7,.2,.1)   -> order 0,1,2 ; pos img0 rank 1
#   c4 (.2,.1,.3)   -> order 2,0,1 ; pos img0 rank 2
#   c5 (.3,.0,.2)   -> order 0,2,1 ; pos img0 rank 1
#   c6 (.85,.4,.3)  -> order 0,1,2 ; pos img1 rank 2
#   c7 (.05,.6,.7)  -> order 2,1,0 ; pos img1 rank 2
#   c8 (.6,.45,.1)  -> order 0,1,2 ; pos img1 rank 2
#   c9 (.4,.35,.5)  -> order 2,0,1 ; pos img1 rank 3
#   ranks [1,3,2,1,2,1,2,2,2,3]: R@1 30, R@2 80, R@3 100,
#   MedR = median of sorted [1,1,1,2,2,2,2,2,3,3] = (2+2)/2 = 2, MeanR = 19/10
#   R-precision = mAP@R = R@1 = 30 (R=1).
# --------------------------------------------------------------------------------------------

B_S = np.array([
    [.90, .10, .80, .70, .20, .30, .85, .05, .60, .40],
    [.50, .95, .30, .20, .10, .00, .40, .60, .45, .35],
    [.00, .20, .95, .10, .30, .20, .30, .70, .10, .50],
], dtype=np.float64)
B_C2I = [0, 0, 0, 0, 0, 0, 1, 1, 1, 1]


def _dcg(gains, p):
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains[:p]))


def test_ragged_with_distractor():
    # float32 so the input is not downcast (see test_float64_input_not_downcast)
    S = B_S.astype(np.float32)
    # the relevance values the metric sees are the float32 similarities
    f = lambda x: float(np.float32(x))  # noqa: E731
    res = vlbench.score(S, B_C2I, k=(1, 2, 3), p=3)
    # DCG@3 (p=3) by hand:
    #  img0 top3 gains [1, .85, 1]  -> 1 + .85/L3 + 1/L4 ; ideal top3 [1,1,1] -> 1 + 1/L3 + 1/L4
    #  img1 top3 gains [.95, 1, .5] -> .95 + 1/L3 + .5/L4 ; ideal [1,1,1]
    i_ideal = 1 + 1 / L3 + 1 / L4
    d0 = 1 + f(.85) / L3 + 1 / L4
    d1 = f(.95) + 1 / L3 + f(.5) / L4
    check(res, {
        "i2t_recall@1": 50.0, "i2t_recall@2": 100.0, "i2t_recall@3": 100.0, "i2t_rsum": 250.0,
        "i2t_medr": 1.5, "i2t_meanr": 1.5,
        "i2t_r_precision": 50.0, "i2t_map_at_r": 100 * (29 / 72 + 1 / 4) / 2,
        "i2t_dcg_cm@3": (d0 + d1) / 2, "i2t_ndcg_cm@3": (d0 / i_ideal + d1 / i_ideal) / 2,
        "t2i_recall@1": 30.0, "t2i_recall@2": 80.0, "t2i_recall@3": 100.0, "t2i_rsum": 210.0,
        "t2i_medr": 2.0, "t2i_meanr": 1.9,
        "t2i_r_precision": 30.0, "t2i_map_at_r": 30.0,
        "rsum": 460.0,
    }, tol=1e-9)
    # the distractor is not an i2t query
    from vlbench.metrics.compute import ArraySource, evaluate
    ev = evaluate(ArraySource(S), B_C2I, k=(1, 2, 3), p=3)
    assert list(ev.per_query("i2t")["query"]) == [0, 1]
    assert list(ev.per_query("i2t")["best_rank"]) == [1, 2]
    assert list(ev.per_query("i2t")["n_positives"]) == [6, 4]
    assert list(ev.per_query("t2i")["best_rank"]) == [1, 3, 2, 1, 2, 1, 2, 2, 2, 3]


def test_ragged_full_dcg_p10():
    # same matrix, p = 10 (all 10 caption candidates for i2t; only 3 image candidates for t2i)
    S = B_S.astype(np.float32)
    f = lambda x: float(np.float32(x))  # noqa: E731
    g0 = [1, f(.85), 1, 1, f(.6), f(.4), 1, 1, 1, f(.05)]
    i0 = [1, 1, 1, 1, 1, 1, f(.85), f(.6), f(.4), f(.05)]
    g1 = [f(.95), 1, f(.5), 1, 1, 1, f(.3), f(.2), f(.1), 0.0]
    i1 = [1, 1, 1, 1, f(.95), f(.5), f(.3), f(.2), f(.1), 0.0]
    # t2i, 3 candidates each; gains = 1 for the positive image else the score:
    t2i_cases = [  # (gains in rank order, ideal)
        ([1, f(.5), 0.0], [1, f(.5), 0.0]),                 # c0 order 0,1,2
        ([f(.95), f(.2), 1], [1, f(.95), f(.2)]),           # c1 order 1,2,0
        ([f(.95), 1, f(.3)], [1, f(.95), f(.3)]),           # c2 order 2,0,1
        ([1, f(.2), f(.1)], [1, f(.2), f(.1)]),             # c3
        ([f(.3), 1, f(.1)], [1, f(.3), f(.1)]),             # c4 order 2,0,1
        ([1, f(.2), 0.0], [1, f(.2), 0.0]),                 # c5 order 0,2,1
        ([f(.85), 1, f(.3)], [1, f(.85), f(.3)]),           # c6 order 0,1,2, pos img1
        ([f(.7), 1, f(.05)], [1, f(.7), f(.05)]),           # c7 order 2,1,0
        ([f(.6), 1, f(.1)], [1, f(.6), f(.1)]),             # c8 order 0,1,2
        ([f(.5), f(.4), 1], [1, f(.5), f(.4)]),             # c9 order 2,0,1
    ]
    res = vlbench.score(S, B_C2I)
    exp_i2t = (_dcg(g0, 10) + _dcg(g1, 10)) / 2
    exp_i2t_n = (_dcg(g0, 10) / _dcg(i0, 10) + _dcg(g1, 10) / _dcg(i1, 10)) / 2
    exp_t2i = sum(_dcg(g, 10) for g, _ in t2i_cases) / 10
    exp_t2i_n = sum(_dcg(g, 10) / _dcg(i, 10) for g, i in t2i_cases) / 10
    check(res, {"i2t_dcg_cm@10": exp_i2t, "i2t_ndcg_cm@10": exp_i2t_n,
                "t2i_dcg_cm@10": exp_t2i, "t2i_ndcg_cm@10": exp_t2i_n,
                "i2t_recall@5": 100.0, "i2t_recall@10": 100.0, "t2i_recall@5": 100.0}, tol=1e-9)


# --------------------------------------------------------------------------------------------
# C. Extra positives (CxC / ECCV Caption style).
#   2 images, 4 captions, c2i = [0, 0, 1, 1]
#   S = [[.9, .2, .8, .1],
#        [.3, .7, .6, .5]]
#   img0 order c0 .9, c2 .8, c1 .2, c3 .1 ; img1 order c1 .7, c2 .6, c3 .5, c0 .3
#   extra i2t {0: [2]}: img0 positives {c0,c1,c2} (R=3) at ranks 1,3,2 -> top3 all positive:
#        R-precision 100, AP@R (1 + 2/2 + 3/3)/3 = 1, best rank 1
#   img1 positives {c2,c3} at ranks 2,3 -> best 2; R=2: top2 = c1,c2 -> 50%; AP@R (1/2)/2 = 1/4
#   i2t: R@1 = 50, MedR 1.5, MeanR 1.5, R-precision 75, mAP@R 62.5
#   extra t2i {1: [1]}: c1 positives {img0, img1}; col (.2,.7) -> order img1, img0 -> ranks 2,1
#        best 1, R=2, top2 both positive -> R-precision 100, AP@R 1
#   c0 (.9,.3) pos img0 rank 1 ; c2 (.8,.6) pos img1 rank 2 ; c3 (.1,.5) pos img1 rank 1
#   t2i: ranks [1,1,2,1]: R@1 75, MedR 1, MeanR 1.25, R-precision 75, mAP@R 75
# --------------------------------------------------------------------------------------------

C_S = np.array([[.9, .2, .8, .1], [.3, .7, .6, .5]], dtype=np.float32)
C_C2I = [0, 0, 1, 1]
C_EXPECTED = {
    "i2t_recall@1": 50.0, "i2t_recall@5": 100.0, "i2t_medr": 1.5, "i2t_meanr": 1.5,
    "i2t_r_precision": 75.0, "i2t_map_at_r": 62.5,
    "t2i_recall@1": 75.0, "t2i_medr": 1.0, "t2i_meanr": 1.25,
    "t2i_r_precision": 75.0, "t2i_map_at_r": 75.0,
}


def test_extra_positives_dict():
    res = vlbench.score(C_S, C_C2I, extra_positives={"i2t": {0: [2]}, "t2i": {1: [1]}})
    check(res, C_EXPECTED)
    # DCG, t2i c1: gains [1 (img1, extra positive), 1 (img0)] -> 1 + 1/L3 = ideal.
    # without the extra, c1: gains [.7, 1] -> .7 + 1/L3 over ideal 1 + .7/L3.
    f = float(np.float32(.7))
    base = vlbench.score(C_S, C_C2I)
    assert res["t2i_dcg_cm@10"] - base["t2i_dcg_cm@10"] == pytest.approx(
        ((1 + 1 / L3) - (f + 1 / L3)) / 4, abs=1e-12)


def test_extra_positives_full_lists():
    extra = {"i2t": [[2], []], "t2i": [[], [1], [], []]}
    check(vlbench.score(C_S, C_C2I, extra_positives=extra), C_EXPECTED)


def test_extra_positive_duplicate_of_original_not_double_counted():
    # extra i2t {1: [3]} where c3 is already img1's caption: positives stay {c2, c3}, R = 2.
    # img1: R-precision 50, AP@R 25 (as in C). img0 without extras: positives {c0,c1} ranks 1,3:
    #   R=2 top2 = c0,c2 -> 50 ; AP@R = (1/1)/2 = .5 -> i2t R-precision 50, mAP@R 37.5.
    # Had R been counted as 3 for img1: top3 = c1,c2,c3 -> 2/3 and AP (1/2 + 2/3)/3.
    res = vlbench.score(C_S, C_C2I, extra_positives={"i2t": {1: [3]}, "t2i": {2: [1]}})
    # t2i extra {2: [1]} duplicates c2's own image: c2 stays R=1 with rank 2.
    check(res, {"i2t_r_precision": 50.0, "i2t_map_at_r": 37.5,
                "t2i_r_precision": 50.0, "t2i_map_at_r": 50.0, "t2i_recall@1": 50.0})
    check(res, {k: v for k, v in vlbench.score(C_S, C_C2I).items()})


def test_extra_positives_change_only_their_direction():
    base = vlbench.score(C_S, C_C2I)
    res = vlbench.score(C_S, C_C2I, extra_positives={"i2t": {0: [2]}})
    check(res, {k: v for k, v in base.items() if k.startswith("t2i_")})
    res = vlbench.score(C_S, C_C2I, extra_positives={"t2i": {1: [1]}})
    check(res, {k: v for k, v in base.items() if k.startswith("i2t_")})


# --------------------------------------------------------------------------------------------
# D. Negative similarities in DCG_CM.
#   2 images, 2 captions, c2i = [0, 1]
#   S = [[-.6, -.3],
#        [-.4, -.1]]
#   i2t img0 order c1 (-.3), c0 (-.6): gains [-.3, 1] -> DCG = -.3 + 1/L3 ; ideal [1, -.3] -> 1 - .3/L3
#       img1 order c1 (-.1), c0 (-.4): gains [1, -.4] -> 1 - .4/L3 = ideal -> nDCG 1
#   t2i c0 col (-.6, -.4): order img1, img0: gains [-.4, 1] -> -.4 + 1/L3 ; ideal 1 - .4/L3
#       c1 col (-.3, -.1): order img1, img0: gains [1, -.3] -> 1 - .3/L3 = ideal
# --------------------------------------------------------------------------------------------

def test_negative_similarities_dcg():
    S = np.array([[-.6, -.3], [-.4, -.1]], dtype=np.float32)
    f = lambda x: float(np.float32(x))  # noqa: E731
    a, b = f(-.3), f(-.4)
    res = vlbench.score(S, [0, 1])
    d_i0, id_i0 = a + 1 / L3, 1 + a / L3
    d_i1 = 1 + b / L3
    d_t0, id_t0 = b + 1 / L3, 1 + b / L3
    d_t1 = 1 + a / L3
    check(res, {
        "i2t_dcg_cm@10": (d_i0 + d_i1) / 2, "i2t_ndcg_cm@10": (d_i0 / id_i0 + 1) / 2,
        "t2i_dcg_cm@10": (d_t0 + d_t1) / 2, "t2i_ndcg_cm@10": (d_t0 / id_t0 + 1) / 2,
        "i2t_recall@1": 50.0, "t2i_recall@1": 50.0, "i2t_medr": 1.5, "t2i_meanr": 1.5,
    }, tol=1e-9)


def test_ndcg_zero_when_ideal_dcg_not_positive():
    # relevance array with strongly negative values for non-positives; 2 images, 2 captions,
    # c2i = [0, 1]. relevance = [[1, -3], [-3, 1]] (diagonal entries are positives -> gain 1).
    # S = [[.1, .9], [.2, .8]]:
    #   i2t img0 order c1, c0: gains [-3, 1] -> DCG = -3 + 1/L3 ; ideal [1, -3] -> 1 - 3/L3 < 0
    #        -> nDCG defined as 0
    #   i2t img1 order c1, c0: gains [1, -3] -> DCG = 1 - 3/L3 = ideal < 0 -> nDCG 0 as well
    #   t2i c0 col (.1, .2) order img1, img0: gains [-3, 1] -> -3 + 1/L3 ; ideal 1 - 3/L3 < 0 -> 0
    #   t2i c1 col (.9, .8) order img0, img1: gains [-3, 1] -> same
    # With p = 1 the ideal is 1 > 0: DCG@1 img0 -3 -> nDCG -3; img1 1 -> nDCG 1; mean -1.
    S = np.array([[.1, .9], [.2, .8]], dtype=np.float32)
    rel = np.array([[1., -3.], [-3., 1.]], dtype=np.float32)
    res = vlbench.score(S, [0, 1], relevance=rel)
    check(res, {"i2t_dcg_cm@10": ((-3 + 1 / L3) + (1 - 3 / L3)) / 2, "i2t_ndcg_cm@10": 0.0,
                "t2i_dcg_cm@10": -3 + 1 / L3, "t2i_ndcg_cm@10": 0.0})
    res = vlbench.score(S, [0, 1], relevance=rel, p=1)
    check(res, {"i2t_dcg_cm@1": -1.0, "i2t_ndcg_cm@1": -1.0,
                "t2i_dcg_cm@1": -3.0, "t2i_ndcg_cm@1": -3.0})


# --------------------------------------------------------------------------------------------
# E. A relevance array different from the similarity.
#   2 images, 3 captions, c2i = [0, 0, 1]
#   S   = [[.9, .1, .8], [.2, .7, .6]]
#   Rel = [[7., 7., .5], [.3, .25, 7.]]  (the 7s sit on positive pairs: they must count as 1)
#   i2t img0 order c0, c2, c1 : gains [1, .5, 1] -> 1 + .5/L3 + 1/L4 ; ideal [1,1,.5] -> 1 + 1/L3 + .5/L4
#       img1 order c1 (.7), c2 (.6), c0 (.2); pos c2 : gains [.25, 1, .3] -> .25 + 1/L3 + .3/L4
#            ideal [1, .3, .25] -> 1 + .3/L3 + .25/L4
#   t2i c0 col (.9,.2) order 0,1 pos 0 : gains [1, .3] = ideal
#       c1 col (.1,.7) order 1,0 pos 0 : gains [.25, 1] ; ideal [1, .25]
#       c2 col (.8,.6) order 0,1 pos 1 : gains [.5, 1]  ; ideal [1, .5]
#   p = 1: i2t DCG@1 (1 + .25)/2 = .625 = nDCG@1 ; t2i DCG@1 (1 + .25 + .5)/3
# --------------------------------------------------------------------------------------------

def test_relevance_array():
    S = np.array([[.9, .1, .8], [.2, .7, .6]], dtype=np.float32)
    rel = np.array([[7., 7., .5], [.3, .25, 7.]], dtype=np.float32)
    res = vlbench.score(S, [0, 0, 1], relevance=rel)
    di0, ii0 = 1 + .5 / L3 + 1 / L4, 1 + 1 / L3 + .5 / L4
    di1, ii1 = .25 + 1 / L3 + .3 / L4, 1 + .3 / L3 + .25 / L4
    dt = [(1 + .3 / L3, 1 + .3 / L3), (.25 + 1 / L3, 1 + .25 / L3), (.5 + 1 / L3, 1 + .5 / L3)]
    # float32 .3 is not exactly .3: allow ~1e-8
    check(res, {"i2t_dcg_cm@10": (di0 + di1) / 2, "i2t_ndcg_cm@10": (di0 / ii0 + di1 / ii1) / 2,
                "t2i_dcg_cm@10": sum(d for d, _ in dt) / 3,
                "t2i_ndcg_cm@10": sum(d / i for d, i in dt) / 3}, tol=1e-7)
    # the ranking metrics ignore the relevance array
    base = vlbench.score(S, [0, 0, 1])
    check(res, {k: v for k, v in base.items() if "dcg" not in k})
    res1 = vlbench.score(S, [0, 0, 1], relevance=rel, p=1)
    check(res1, {"i2t_dcg_cm@1": .625, "i2t_ndcg_cm@1": .625,
                 "t2i_dcg_cm@1": 1.75 / 3, "t2i_ndcg_cm@1": 1.75 / 3})


# --------------------------------------------------------------------------------------------
# F. Dyadic values (exact in float16/float32/float64) -> numpy, torch float32, torch float16.
#   2 images, 3 captions, c2i = [0, 0, 1]
#   S = [[.75, .125, .5], [.25, .625, .375]]
#   i2t img0 order c0, c2, c1 ; pos {c0, c1} ranks 1,3 ; R=2 top2 c0,c2 -> 50 ; AP (1/1)/2 = .5
#       gains [1, .5, 1] -> 1 + .5/L3 + 1/L4 ; ideal 1 + 1/L3 + .5/L4
#       img1 order c1 (.625), c2 (.375), c0 (.25) ; pos c2 rank 2 ; R-prec 0 ; AP 0
#       gains [.625, 1, .25] -> .625 + 1/L3 + .25/L4 ; ideal 1 + .625/L3 + .25/L4
#     i2t R@1 50, R@2 100, MedR 1.5, MeanR 1.5, R-prec 25, mAP@R 25
#   t2i c0 (.75,.25) rank 1 ; c1 (.125,.625) rank 2 ; c2 (.5,.375) pos img1 rank 2
#     R@1 100/3, R@2 100, MedR 2, MeanR 5/3, R-prec = mAP@R = 100/3
#     DCG c0 [1, .25] (ideal) ; c1 [.625, 1] vs ideal [1,.625] ; c2 [.5, 1] vs [1, .5]
# --------------------------------------------------------------------------------------------

F_S = [[.75, .125, .5], [.25, .625, .375]]


def _f_expected():
    di0, ii0 = 1 + .5 / L3 + 1 / L4, 1 + 1 / L3 + .5 / L4
    di1, ii1 = .625 + 1 / L3 + .25 / L4, 1 + .625 / L3 + .25 / L4
    dt = [(1 + .25 / L3, 1 + .25 / L3), (.625 + 1 / L3, 1 + .625 / L3), (.5 + 1 / L3, 1 + .5 / L3)]
    return {
        "i2t_recall@1": 50.0, "i2t_recall@2": 100.0, "i2t_rsum": 150.0, "i2t_medr": 1.5,
        "i2t_meanr": 1.5, "i2t_r_precision": 25.0, "i2t_map_at_r": 25.0,
        "i2t_dcg_cm@10": (di0 + di1) / 2, "i2t_ndcg_cm@10": (di0 / ii0 + di1 / ii1) / 2,
        "t2i_recall@1": 100 / 3, "t2i_recall@2": 100.0, "t2i_rsum": 100 / 3 + 100,
        "t2i_medr": 2.0, "t2i_meanr": 5 / 3, "t2i_r_precision": 100 / 3, "t2i_map_at_r": 100 / 3,
        "t2i_dcg_cm@10": sum(d for d, _ in dt) / 3, "t2i_ndcg_cm@10": sum(d / i for d, i in dt) / 3,
        "rsum": 150.0 + 100 / 3 + 100,
    }


@pytest.mark.parametrize("make", [
    lambda: np.array(F_S, dtype=np.float64),
    lambda: np.array(F_S, dtype=np.float32),
    lambda: torch.tensor(F_S, dtype=torch.float32),
    lambda: torch.tensor(F_S, dtype=torch.float64),
    lambda: torch.tensor(F_S, dtype=torch.float16),
], ids=["np64", "np32", "torch32", "torch64", "torch16"])
def test_dyadic_all_input_types(make):
    res = vlbench.score(make(), [0, 0, 1], k=(1, 2))
    check(res, _f_expected())


def test_torch_caption_to_image_and_relevance_tensor():
    S = torch.tensor(F_S, dtype=torch.float16)
    res = vlbench.score(S, torch.tensor([0, 0, 1]), k=(1, 2), relevance=torch.tensor(F_S, dtype=torch.float16))
    check(res, _f_expected())


def test_float16_ties_created_by_half_precision():
    # In float16, .3 and .3001 are the same number (spacing near .3 is 2**-12 ~ 2.4e-4), so the
    # ranking sees a tie and the lower index wins. 2 images, 2 captions, c2i = [1, 0]:
    # img0 row (.3, .3001) in fp16 -> tie -> c0 first -> its caption c1 at rank 2.
    S = torch.tensor([[.3, .3001], [.1, .2]], dtype=torch.float16)
    assert S[0, 0] == S[0, 1]
    res = vlbench.score(S, [1, 0], k=(1,))
    # img1 row (.1, .2): its caption c0 at rank 2 too. i2t R@1 = 0.
    # t2i c0 col (.3, .1): pos img1 rank 2 ; c1 col (.3, .2) pos img0 rank 1 -> 50
    check(res, {"i2t_recall@1": 0.0, "i2t_medr": 2.0, "t2i_recall@1": 50.0})


def test_float64_input_not_downcast():
    # 2 images, 2 captions, c2i = [1, 0].
    # img0 row (.3, .3 + 1e-10): in float64 c1 (img0's caption) is strictly higher -> rank 1.
    # img1 row (.1, .2): its caption c0 at rank 2.  -> i2t R@1 = 50 (1 hit out of 2).
    S = np.array([[.3, .3 + 1e-10], [.1, .2]], dtype=np.float64)
    res = vlbench.score(S, [1, 0], k=(1,))
    check(res, {"i2t_recall@1": 50.0})


def test_k_beyond_gallery_and_rsum_uses_requested_k():
    # k = 4 with only 3 captions / 2 images: every query hits (all positives are in the gallery).
    # Dyadic matrix F; i2t R@1 50, R@4 100 ; t2i R@1 100/3, R@4 100.
    res = vlbench.score(np.array(F_S), [0, 0, 1], k=(4, 1))
    check(res, {"i2t_recall@1": 50.0, "i2t_recall@4": 100.0, "i2t_rsum": 150.0,
                "t2i_recall@1": 100 / 3, "t2i_recall@4": 100.0, "t2i_rsum": 100 / 3 + 100,
                "rsum": 250.0 + 100 / 3})
    assert not any(k.endswith("@5") or k.endswith("@10") for k in res if "recall" in k)


def test_default_keys():
    res = vlbench.score(np.array(F_S), [0, 0, 1])
    expected = {"rsum"}
    for d in ("i2t", "t2i"):
        expected |= {f"{d}_recall@{k}" for k in (1, 5, 10)}
        expected |= {f"{d}_{m}" for m in ("rsum", "medr", "meanr", "r_precision", "map_at_r")}
        expected |= {f"{d}_ndcg@10", f"{d}_dcg_cm@10", f"{d}_ndcg_cm@10"}
        expected |= {f"{d}_{m}@{k}" for m in ("mrr", "precision", "map", "ndcg_binary") for k in (1, 5, 10)}
    assert set(res) == expected


def test_default_ndcg_clips_negative_gains_by_hand():
    """The default nDCG: non-positive gains max(0, relevance). Caption 0's images score 0.1 (its
    own), 0.2, 0.0, so the ranking is img1, img0, img2; relevance -3 for both others. By hand:
    clipped DCG = 0 + 1/log2(3) + 0, ideal = 1 (positive first, zeros after): nDCG = 1/log2(3) = 0.6309;
    the chapter's DCG_CM = -3 + 1/log2(3) - 3/2 and its ideal 1 - 3/log2(3) - 3/2 < 0, so nDCG_CM = 0."""
    S = np.array([[0.1, 0.0, 0.0], [0.2, 0.9, 0.0], [0.0, 0.0, 0.9]])
    rel = np.full((3, 3), -3.0)
    ev = vlbench.evaluate(S, [0, 1, 2], relevance=rel)
    q = ev.per_query("t2i")
    assert q["ndcg@10"][0] == pytest.approx(1 / math.log2(3), abs=1e-12)
    assert q["dcg_cm@10"][0] == pytest.approx(-3 + 1 / math.log2(3) - 1.5, abs=1e-12)
    assert q["ndcg_cm@10"][0] == 0.0
    for d in ("i2t", "t2i"):  # bounded whatever the relevance
        assert np.all((ev.per_query(d)["ndcg@10"] >= 0) & (ev.per_query(d)["ndcg@10"] <= 1 + 1e-12))


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------

def test_error_caption_to_image_length():
    with pytest.raises(ValueError, match=r"(?i)caption_to_image|length|caption"):
        vlbench.score(np.zeros((2, 3), dtype=np.float32), [0, 1])
    with pytest.raises(ValueError, match=r"(?i)caption_to_image|length|caption"):
        vlbench.score(np.zeros((2, 3), dtype=np.float32), [0, 1, 1, 0])


@pytest.mark.parametrize("bad", [2, 5, -1])
def test_error_image_index_out_of_range(bad):
    with pytest.raises(ValueError, match=r"(?i)range|index|image"):
        vlbench.score(np.zeros((2, 3), dtype=np.float32), [0, 1, bad])


@pytest.mark.parametrize("make", [np.array, lambda a: torch.tensor(a, dtype=torch.float16)])
def test_error_nan(make):
    S = [[.1, float("nan"), .3], [.2, .2, .2]]
    with pytest.raises(ValueError, match=r"(?i)nan|finite"):
        vlbench.score(make(S), [0, 1, 1])


def test_error_inf():
    with pytest.raises(ValueError, match=r"(?i)nan|finite|inf"):
        vlbench.score(np.array([[.1, np.inf, .3], [.2, .2, .2]]), [0, 1, 1])


def test_error_relevance_shape():
    with pytest.raises(ValueError, match=r"(?i)relevance.*shape|shape.*relevance"):
        vlbench.score(np.zeros((2, 3), dtype=np.float32), [0, 1, 1],
                      relevance=np.zeros((3, 3), dtype=np.float32))


def test_error_nan_in_relevance():
    S = np.zeros((2, 3), dtype=np.float32)
    rel = np.zeros((2, 3), dtype=np.float32)
    rel[1, 0] = np.nan
    with pytest.raises(ValueError, match=r"(?i)nan|finite"):
        vlbench.score(S, [0, 1, 1], relevance=rel)


def test_extra_positive_turns_distractor_into_query():
    # Matrix B; img2 has no caption but gets the extra positive c7.
    # img2 row: c2 .95, c7 .7, c9 .5, ... -> c7 at rank 2; R=1: top1 = c2 -> R-precision 0, AP 0.
    # i2t queries are now img0, img1, img2 with best ranks 1, 2, 2:
    #   R@1 = 33.33.., R@2 = 100, MedR 2, MeanR 5/3,
    #   R-precision (50 + 50 + 0)/3, mAP@R 100*(29/72 + 1/4 + 0)/3
    # t2i: c7 gets img2 as extra positive: col (.05,.6,.7) -> img2 rank 1 (was rank 2 for img1)
    #   ranks [1,3,2,1,2,1,2,1,2,3] -> R@1 40, MeanR 1.8, MedR 2
    #   R-precision: c0,c3,c5 (R=1, rank 1) score 100; c7 (R=2, top2 = img2,img1 both positive)
    #   scores 100; the rest 0 -> 400/10 = 40.  mAP@R: c7 (1/1 + 2/2)/2 = 1 -> also 40.
    S = B_S.astype(np.float32)
    res = vlbench.score(S, B_C2I, k=(1, 2), extra_positives={"i2t": {2: [7]}, "t2i": {7: [2]}})
    check(res, {"i2t_recall@1": 100 / 3, "i2t_recall@2": 100.0, "i2t_medr": 2.0, "i2t_meanr": 5 / 3,
                "i2t_r_precision": 100 / 3, "i2t_map_at_r": 100 * (29 / 72 + 1 / 4) / 3,
                "t2i_recall@1": 40.0, "t2i_r_precision": 40.0, "t2i_map_at_r": 40.0,
                "t2i_meanr": 1.8, "t2i_medr": 2.0}, tol=1e-9)


@pytest.mark.parametrize("extra, pattern", [
    ({"i2t": [[1], [2]]}, r"i2t"),           # list with the wrong number of rows (3 images)
    ({"i2t": {5: [0]}}, r"5"),               # query index outside the images
    ({"t2i": {0: [7]}}, r"range|7"),         # candidate image 7 does not exist
    ({"i2t": {0: [10]}}, r"range|10"),       # candidate caption 10 does not exist
    ({"x2y": {}}, r"i2t|t2i|key"),           # unknown direction
])
def test_error_bad_extra_positives(extra, pattern):
    with pytest.raises(ValueError, match=pattern):
        vlbench.score(B_S.astype(np.float32), B_C2I, extra_positives=extra)


def test_positives_from_lists_equal_a_per_row_build():
    """The vectorized positives build against the obvious one (np.unique per row), on random rows with
    duplicates and empty rows; an index out of range names its query."""
    import random

    import numpy as np

    from vlbench.metrics.ranking import Positives

    rng = random.Random(0)
    for _ in range(200):
        n, n_cand = rng.randint(0, 25), rng.randint(1, 40)
        lists = [[rng.randrange(n_cand) for _ in range(rng.randint(0, 6))] for _ in range(n)]
        p = Positives.from_lists(lists, n_cand)
        rows = [np.unique(np.asarray(r, dtype=np.int64)) for r in lists]
        assert p.ptr.tolist() == [0, *np.cumsum([len(r) for r in rows]).tolist()]
        assert p.idx.tolist() == [int(x) for r in rows for x in r]
    with pytest.raises(ValueError, match=r"query 1: \[-1, 2, 9\] \(there are 5 candidates\)"):
        Positives.from_lists([[1], [2, 9, -1]], 5)
