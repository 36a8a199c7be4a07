"""vlbench.evaluate against an independent NumPy oracle (support/oracles.py: numpy_evaluate), written from the
metric definitions (docs/metrics.md, the shared spec), on real-valued normalised 64-d and 512-d embeddings with
bit-identical duplicate images and captions (exact ties: the lower candidate index ranks first) and near copies
(scores 1e-4-ish apart: near ties a float32 score still orders right).

The oracle scores with the exact cosines (float64 dot products of the float32 vectors); vlbench ranks float32
products. Those order two candidates the same unless their exact scores are within float32 rounding of each other
(about 1e-7 for unit vectors of these sizes) and not equal. So the data is checked first: no positive's exact score
lies within 1e-6 of another candidate's unless the two are equal (identical vectors). On such data every rank, R@k,
MedR and MeanR must be equal exactly; R-precision and mAP@R (ratios of counts, summed in another order) within
1e-9, where a wrong count would be off by at least 100/R^2; nDCG@p (its gains are the scores themselves) within
1e-6, the float32 rounding of a gain.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.oracles import exact_cosines, numpy_evaluate

from vlbench.metrics.compute import EmbeddingSource, evaluate

KS, P = (1, 5, 10), 10
GAP = 1e-6  # below it, float32 products may order two different exact scores either way


def _unit(x):
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def embeddings(n_images: int, per_image: int, dim: int, seed: int):
    """(images, captions, caption_to_image): captions near their image (noisy copies), images 2, 39, 76, ...
    bit-identical, captions 5, 46, 87, ... bit-identical, and images 1, 54, 107, ... near copies of 0, 53, ..."""
    rng = np.random.default_rng(seed)
    img = _unit(rng.standard_normal((n_images, dim)))
    img[39::37] = img[2]
    img[1::53] = _unit(img[0::53][: len(img[1::53])] + 1e-4 * rng.standard_normal((len(img[1::53]), dim)))
    c2i = rng.permutation(np.repeat(np.arange(n_images), per_image))
    txt = _unit(img[c2i] + 0.9 * rng.standard_normal((len(c2i), dim)) / np.sqrt(dim))
    txt[46::41] = txt[5]
    return img, txt, c2i


def clear_cut(scores: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """Per query: True when no positive's exact score is within GAP of a different score of that query."""
    ok = np.ones(len(scores), dtype=bool)
    for q in range(len(scores)):
        s = scores[q]
        for c in np.flatnonzero(positive[q]):
            near = np.abs(s - s[c]) < GAP
            ok[q] &= bool(np.all(s[near] == s[c]))
    return ok


@pytest.mark.parametrize("dim, seed", [(64, 0), (512, 0)])  # seeds whose data meets the premise (checked)
def test_evaluate_equals_the_numpy_oracle_on_real_valued_embeddings(dim, seed):
    img, txt, c2i = embeddings(240, 3, dim, seed)
    scores = exact_cosines(img, txt)
    pos = np.zeros(scores.shape, dtype=bool)
    pos[c2i, np.arange(len(c2i))] = True
    clear = {"i2t": clear_cut(scores, pos), "t2i": clear_cut(scores.T, pos.T)}
    assert all(c.all() for c in clear.values()), {d: int((~c).sum()) for d, c in clear.items()}  # the data's premise
    # the premise is not empty: exact ties on positives (duplicates) and near ties are in the data
    assert (scores[:, 5] == scores[:, 46]).all() and (scores[2] == scores[39]).all()
    assert 0 < np.abs(scores[0] - scores[1]).max() < 1e-3

    want_q, want = numpy_evaluate(img, txt, c2i, KS, P)
    ev = evaluate(EmbeddingSource(img, txt), c2i, k=KS, p=P)
    for d in ("i2t", "t2i"):
        got = ev.per_query(d)
        assert np.array_equal(got["query"], want_q[d]["query"]), d
        for name in ("best_rank", "n_positives", *(f"recall@{k}" for k in KS)):
            assert np.array_equal(np.asarray(got[name], dtype=np.float64),
                                  np.asarray(want_q[d][name], dtype=np.float64)), (d, name)
        for name in ("r_precision", "map_at_r"):  # ratios of small counts: a wrong count is off by >= 100/R^2
            np.testing.assert_allclose(got[name], want_q[d][name], rtol=0, atol=1e-9, err_msg=f"{d} {name}")
        np.testing.assert_allclose(got[f"ndcg@{P}"], want_q[d][f"ndcg@{P}"], rtol=0, atol=1e-6, err_msg=d)
    records = {(r["direction"], r["metric"], r["k"]): r["value"] for r in ev.records()}
    for key, value in want.items():
        if key[1] == "ndcg":
            assert records[key] == pytest.approx(value, abs=1e-6), key
        elif key[1] in ("r_precision", "map_at_r"):  # the same ratios summed in another order
            assert records[key] == pytest.approx(value, abs=1e-9), key
        else:
            assert records[key] == value, key


def test_duplicates_follow_the_tie_rule_in_the_oracle_and_in_evaluate():
    """A caption of image 39 (a bit-identical copy of image 2) ranks image 2 first and its own image second; both
    the oracle and vlbench say so, on a query the data makes a sure hit otherwise."""
    img, txt, c2i = embeddings(240, 3, 64, 0)
    j = int(np.flatnonzero(c2i == 39)[0])
    txt[j] = img[39]  # the caption is its image's vector: image 2 and image 39 tie at the top
    want_q, _ = numpy_evaluate(img, txt, c2i, KS, P)
    got = evaluate(EmbeddingSource(img, txt), c2i, k=KS, p=P).per_query("t2i")
    assert want_q["t2i"]["best_rank"][j] == 2 and got["best_rank"][j] == 2
