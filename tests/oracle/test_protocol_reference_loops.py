"""hendriksen2024 protocol pieces (the reference loops in tests/support/protocol_reference.py and the folder gallery),
checked against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support import protocol_reference as P

from vlbench.datasets.folders import folder_gallery
from vlbench.errors import DataError, VlbenchError


def test_recall_fraction_vs_hit():
    ranking = [7, 2, 9, 4, 1, 0, 3]
    rel = {2, 4, 0, 5, 6}  # five captions of the image
    # top 5 = 7,2,9,4,1 -> hits 2 and 4: 2 / min(5,5)
    assert P.recall_fraction(ranking, rel, 5) == pytest.approx(0.4)
    assert P.recall_hit(ranking, rel, 5) == 1.0
    # top 1 = 7: no hit; top 2: 1 hit / min(5, 2) = 0.5
    assert P.recall_fraction(ranking, rel, 1) == 0.0
    assert P.recall_fraction(ranking, rel, 2) == pytest.approx(0.5)
    # k=10 > n_relevant: 3 hits (2, 4, 0) among 7 ranked / min(5, 10)
    assert P.recall_fraction(ranking, rel, 10) == pytest.approx(3 / 5)


def test_i2t_recall_matrix():
    # 2 images x 4 captions; image 0 owns captions {0, 1}, image 1 owns {2, 3}
    sim = np.array([[0.9, 0.1, 0.8, 0.2],    # ranking 0,2,3,1
                    [0.5, 0.6, 0.7, 0.1]])   # ranking 2,1,0,3
    pos = [{0, 1}, {2, 3}]
    # k=2 fraction: image0 top2 {0,2} -> 1/2; image1 top2 {2,1} -> 1/2 -> mean 50 %
    assert P.i2t_recall(sim, pos, 2) == pytest.approx(50.0)
    assert P.i2t_recall(sim, pos, 2, variant="hit") == pytest.approx(100.0)
    # k=1: image0 hit 1/1, image1 hit 1/1
    assert P.i2t_recall(sim, pos, 1) == pytest.approx(100.0)
    with pytest.raises(VlbenchError, match="variant"):
        P.i2t_recall(sim, pos, 1, variant="x")


def test_ties_broken_by_index():
    sim = np.array([[0.5, 0.5, 0.5]])
    assert P.i2t_recall(sim, [{0}], 1) == 100.0
    assert P.i2t_recall(sim, [{2}], 1) == 0.0


def test_dcg_hand_values():
    assert P.dcg([1.0, 0.5, 0.25]) == pytest.approx(1.0 + 0.5 / math.log2(3) + 0.25 / 2.0)
    # one t2i query over 4 images; positive image 2; fixed relevance scores for the others
    sim = np.array([[0.1, 0.9, 0.3, 0.2]])                 # ranking 1, 2, 3, 0
    rel = np.array([[0.40, 0.70, 0.99, 0.30]])             # the positive's own score is ignored
    got = P.dcg_at_p(sim, [{2}], rel, p=3)
    assert got[0] == pytest.approx(0.70 / 1.0 + 1.0 / math.log2(3) + 0.30 / 2.0)
    # the callable form gives the same
    assert P.dcg_at_p(sim, [{2}], lambda q: rel[q], p=3)[0] == pytest.approx(got[0])
    # unnormalized: 1 + 0.8 / log2(3) = 1.5047..., above the 1.0 a normalized score could not exceed
    unnormalised = P.dcg_at_p(np.array([[1.0, 0.9]]), [{0}], np.array([[0.0, 0.8]]), p=2)[0]
    assert unnormalised == pytest.approx(1 + 0.8 / math.log2(3))


def test_dcg_bad_relevance_shape():
    with pytest.raises(VlbenchError, match="relevance row 0"):
        P.dcg_at_p(np.zeros((1, 3)), [{0}], np.zeros((1, 2)))


def test_truncate_330():
    long = "x" * 400
    assert P.truncate_chars([long, "short"]) == ["x" * 330, "short"]
    assert len(P.truncate_chars(["é" * 331])[0]) == 330  # characters, not bytes


def test_folder_gallery(tmp_path):
    for name in ("b.jpg", "a.png", "c.JPG", "z.jpg", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "sub").mkdir()
    assert folder_gallery(tmp_path, ["z.jpg", "b.jpg"]) == ["z.jpg", "b.jpg", "a.png", "c.JPG"]
    with pytest.raises(DataError, match="missing.jpg"):
        folder_gallery(tmp_path, ["missing.jpg"])
    with pytest.raises(DataError, match="does not exist"):
        folder_gallery(tmp_path / "nope", [])


def test_scoring_fraction_recall_equals_the_reference_loop():
    """The fraction recall of the one scoring pass (evaluate(i2t_recall="fraction"), from the shared tie-broken
    ranking) equals the row-by-row reference, ties included; t2i keeps the hit rate."""
    from vlbench.metrics.compute import evaluate

    rng = np.random.default_rng(3)
    sim = rng.integers(0, 4, size=(6, 15)).astype(np.float32)  # many ties
    c2i = np.repeat(np.arange(5), 3)  # image 5: a distractor, not an i2t query
    ev = evaluate(sim, c2i, k=(1, 2, 5), i2t_recall="fraction")
    hit = evaluate(sim, c2i, k=(1, 2, 5))
    pos = [set(np.flatnonzero(c2i == i).tolist()) for i in range(5)]
    for k in (1, 2, 5):
        assert ev.as_dict()[f"i2t_recall@{k}"] == pytest.approx(P.i2t_recall(sim[:5], pos, k), abs=1e-12)
        assert ev.as_dict()[f"t2i_recall@{k}"] == hit.as_dict()[f"t2i_recall@{k}"]
