"""Gallery distractors: a hand-worked case in both directions, ties, folds.

Embeddings (dot products, no normalisation), caption j belongs to image j:

    images   I0=(1,0)  I1=(0,1)  I2=(0.8,0.6)        captions  T0=(1,0)  T1=(0,1)  T2=(0.6,0.8)
    injected images   J0=(0.9,0.9)  J1=(1,0) (= I0)    injected captions  C0=(0,1) (= T1)  C1=(1,0.5)

Clean: every query finds its positive at rank 1 (R@1 = 100 both ways).
t2i with J0, J1: T0 scores I0 = 1 = J1 (tie: the real image wins), T1 scores I1 = 1 > 0.9, T2 scores
J0 = 1.26 > I2 = 0.96 (> I1 = 0.8): T2's positive falls to rank 2. False rate 1/3, R@1 100 -> 66.67.
i2t with C0, C1: I0 scores T0 = 1 = C1 (tie: real wins), I1 scores T1 = 1 = C0 (duplicate: real wins), I2
scores C1 = 1.1 > T2 = 0.96: rank 2. False rate 1/3, R@1 100 -> 66.67. RSUM 600 -> 533.33.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from vlbench.conditions import RunCondition
from vlbench.datasets.core import Dataset
from vlbench.pipeline.distractors import Injected
from vlbench.pipeline.run_config import RunConfig
from vlbench.pipeline.scoring import metric_values, score

IMG = np.array([[1, 0], [0, 1], [0.8, 0.6]], dtype=np.float32)
TXT = np.array([[1, 0], [0, 1], [0.6, 0.8]], dtype=np.float32)
INJ_IMG = np.array([[0.9, 0.9], [1, 0]], dtype=np.float32)
INJ_TXT = np.array([[0, 1], [1, 0.5]], dtype=np.float32)
NAME = "distractors:test@0123456789"


def _ds(n_img=3, folds=None):
    return Dataset("toy", [f"i{i}.png" for i in range(n_img)], [f"c{j}" for j in range(n_img)],
                   np.arange(n_img, dtype=np.int64), [f"c{j}" for j in range(n_img)], folds=folds)


def _score(ds, img, txt, injected, k=(1, 5, 10)):
    cond = RunCondition(NAME, {"kind": "gallery"}, kind="gallery")
    plan = SimpleNamespace(ds=ds, conditions=(RunCondition.clean(), cond), graded=tuple({} for _ in (ds.folds or [0])),
                           perturbed={})
    enc = SimpleNamespace(adapter=SimpleNamespace(device="cpu"), relevance=None, img_emb=img, txt_emb=txt,
                          offsets={"clean": 0, NAME: 0}, variant_img={}, distractors={NAME: injected})
    scoring = RunConfig(model="m", dataset="d", k=k).scoring_opts
    evals = score(scoring, plan, enc)
    return evals, {(v.condition, v.key.direction, v.key.metric, v.key.k): v.value for v in metric_values(evals)}


def test_hand_worked_false_rate_and_recall_both_directions():
    evals, vals = _score(_ds(), IMG, TXT, Injected(INJ_IMG, INJ_TXT))
    for d in ("i2t", "t2i"):
        assert vals[("clean", d, "recall", 1)] == 100.0
        assert vals[(NAME, d, "recall", 1)] == pytest.approx(200 / 3)
        assert vals[(NAME, d, "recall", 5)] == 100.0
        assert vals[(NAME, d, "false_rate", None)] == pytest.approx(100 / 3)
        assert ("clean", d, "false_rate", None) not in vals
        # per query: only the third query is false, and its best positive is at rank 2
        assert evals[NAME][0].direction(d).best_rank.tolist() == [1, 1, 2]
        assert evals[NAME][0].direction(d).plugins["false_rate"].tolist() == [0.0, 0.0, 100.0]
        assert evals[NAME][0].direction(d).query_ids.tolist() == [0, 1, 2]  # injected items are never queries
    assert vals[("clean", "both", "rsum", None)] == 600.0
    assert vals[(NAME, "both", "rsum", None)] == pytest.approx(600 - 200 / 3)
    # mean rank: (1 + 1 + 2) / 3 in each direction
    assert vals[(NAME, "t2i", "meanr", None)] == pytest.approx(4 / 3)


def test_one_modality_only_leaves_the_other_direction_as_clean():
    evals, vals = _score(_ds(), IMG, TXT, Injected(None, INJ_TXT))
    assert vals[(NAME, "t2i", "recall", 1)] == 100.0 and vals[(NAME, "t2i", "false_rate", None)] == 0.0
    assert vals[(NAME, "i2t", "recall", 1)] == pytest.approx(200 / 3)
    _, vals = _score(_ds(), IMG, TXT, Injected(INJ_IMG, None))
    assert vals[(NAME, "i2t", "false_rate", None)] == 0.0
    assert vals[(NAME, "t2i", "false_rate", None)] == pytest.approx(100 / 3)


def test_a_strict_win_counts_and_an_exact_tie_does_not():
    # J = I0 scaled by 1.0001: it beats T0's positive strictly -> T0 is false too
    inj = np.array([[1.0001, 0]], dtype=np.float32)
    _, vals = _score(_ds(), IMG, TXT, Injected(inj, None))
    assert vals[(NAME, "t2i", "false_rate", None)] == pytest.approx(100 / 3)  # T0 only (T2: 0.60006 < 0.96)
    assert vals[(NAME, "t2i", "recall", 1)] == pytest.approx(200 / 3)
    # an exact copy of every real image: all ties, nothing is false, nothing changes
    _, vals = _score(_ds(), IMG, TXT, Injected(IMG.copy(), TXT.copy()))
    for d in ("i2t", "t2i"):
        assert vals[(NAME, d, "false_rate", None)] == 0.0
        assert vals[(NAME, d, "recall", 1)] == 100.0


def test_folds_each_rank_the_fold_gallery_plus_every_injected_candidate():
    # two folds: the toy set and a second copy rotated; the injected items join both folds
    img = np.vstack([IMG, IMG[[1, 0, 2]]])
    txt = np.vstack([TXT, TXT[[1, 0, 2]]])
    ds = _ds(6, folds=[np.arange(3), np.arange(3, 6)])
    evals, vals = _score(ds, img, txt, Injected(INJ_IMG, INJ_TXT))
    assert len(evals[NAME]) == 2
    for ev in evals[NAME]:  # each fold: its third query is the false one (rank 2), the others tie or win
        for d in ("i2t", "t2i"):
            assert ev.direction(d).best_rank.tolist() == [1, 1, 2]
    assert vals[(NAME, "t2i", "false_rate", None)] == pytest.approx(100 / 3)  # mean over the folds
