"""``rescore --as eccv`` scores exactly as the run does. Two captions with bit-identical vectors
must tie (the lower index first); a plain float32 ``img @ txt.T`` can round the later copy's dot product
higher (here by 4e-6 on this machine's BLAS) and so broke the tie rule that the run's own values follow."""

from __future__ import annotations

import numpy as np
import pytest

from vlbench.metrics.compute import EmbeddingSource, evaluate
from vlbench.rescore import score_suite


def _case():
    rng = np.random.default_rng(0)
    img = rng.standard_normal((3, 64)).astype(np.float32)
    txt = rng.standard_normal((50, 64)).astype(np.float32)
    txt[0] = img[0] + 0.1 * rng.standard_normal(64).astype(np.float32)
    txt[48] = txt[0]  # bit-identical duplicate caption, the best two matches of image 0
    c2i = np.arange(50) % 3
    off = {"kind": "eccv", "image_ids": [10, 11, 12], "caption_ids": list(range(100, 150)),
           "gt": {"i2t": {"10": [148]}, "t2i": {"148": [10]}}}
    return img, txt, c2i, off


@pytest.mark.parametrize("suite", ["eccv"])
def test_rescore_eccv_equals_the_runs_values_with_bit_identical_duplicate_captions(suite):
    img, txt, c2i, off = _case()
    as_run = dict(off, gt={d: {int(q): v for q, v in rows.items()} for d, rows in off["gt"].items()})
    run = evaluate(EmbeddingSource(img, txt), c2i, official=as_run).official  # what the run records
    gt = {"caption_to_image": c2i.tolist(), "n_gallery": 3, "folds": None, "official": off}
    got = {(d, m, k): v for d, m, k, v in score_suite(suite, gt, img, txt)}
    assert got == run
    # independently: image 10 ranks captions 100 and 148 in a tie, 100 first (lower index); its one
    # positive, 148, is second: R@1 0, R-precision (R = 1) 0, mAP@R 0
    assert got[("i2t", "eccv_r1", None)] == 0.0
    assert got[("i2t", "eccv_r_precision", None)] == 0.0 and got[("i2t", "eccv_map_at_r", None)] == 0.0
