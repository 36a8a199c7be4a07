"""Official ECCV Caption / CxC protocols against the eccv_caption package's own metric functions."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from support.tools import has_package, needs_package

from vlbench.datasets import eccv as gt_files
from vlbench.errors import DataError, VlbenchError
from vlbench.metrics import official as eccv

pytestmark = needs_package("eccv_caption", "the ECCV Caption authors' metric code is the oracle")
pkg_metrics = importlib.import_module("eccv_caption._metrics") if has_package("eccv_caption") else None


@pytest.fixture(scope="module")
def setup():
    from support.data import SHARED_CAPTIONS
    folder = SHARED_CAPTIONS / "eccv_caption"
    if not (folder / "eccv_caption_to_image.json").is_file():
        pytest.skip(f"ECCV Caption ground truth not at {folder} (set VLBENCH_SHARED_CAPTIONS)")
    gts = {n: gt_files.load_gts(folder, n) for n in ("eccv", "cxc", "original")}
    caption_ids = [int(c) for c in np.load(folder / "coco_test_ids.npy")]
    image_ids = sorted(gts["original"]["i2t"])
    rng = np.random.default_rng(0)
    sim = rng.random((len(image_ids), len(caption_ids))).astype(np.float32)
    # make the rankings informative: original pairs get a large boost, ECCV / CxC positives a random one
    col = {c: j for j, c in enumerate(caption_ids)}
    for i, img in enumerate(image_ids):
        sim[i, [col[c] for c in gts["original"]["i2t"][img]]] += 0.9
        for name in ("eccv", "cxc"):
            extra = [col[c] for c in gts[name]["i2t"].get(img, []) if c in col]  # 2 ECCV ids lie outside
            sim[i, extra] += rng.random(len(extra)).astype(np.float32) * 0.8
    return sim, image_ids, caption_ids, gts


def _retrieved(sim, row_ids, col_ids, top):
    """Independent rankings for the package: full descending argsort per row (ties by index), top kept."""
    cols = np.asarray(col_ids)
    out = {}
    for start in range(0, sim.shape[0], 1000):
        block = np.argsort(-sim[start:start + 1000].astype(np.float64), axis=1, kind="stable")[:, :top]
        for r, order in enumerate(block):
            out[int(row_ids[start + r])] = [int(c) for c in cols[order]]
    return out


def test_eccv_official_equals_package(setup):
    sim, image_ids, caption_ids, gts = setup
    ours = eccv.eccv_metrics(sim, image_ids, caption_ids, gts["eccv"])
    assert ours["t2i"]["n_queries"] == 1332 and ours["i2t"]["n_queries"] == 1261
    i2t = _retrieved(sim, image_ids, caption_ids, 300)
    t2i = _retrieved(sim.T, caption_ids, image_ids, 300)
    assert max(len(v) for v in gts["eccv"]["i2t"].values()) <= 300
    ref_i2t = pkg_metrics.compute_eccv_metrics(i2t, gts["eccv"]["i2t"])
    ref_t2i = pkg_metrics.compute_eccv_metrics(t2i, gts["eccv"]["t2i"])
    for key in ("map_at_r", "rprecision", "r1"):
        assert ours["i2t"][key] == pytest.approx(ref_i2t["eccv_" + key], abs=1e-9)
        assert ours["t2i"][key] == pytest.approx(ref_t2i["eccv_" + key], abs=1e-9)
    assert 0.05 < ours["t2i"]["map_at_r"] < 0.95  # the matrix is informative, not trivial

    cxc = eccv.cxc_recalls(sim, image_ids, caption_ids, gts["cxc"], ks=(1, 5, 10))
    for k in (1, 5, 10):
        assert cxc["i2t"][k] == pytest.approx(pkg_metrics.compute_r_at_k(i2t, gts["cxc"]["i2t"], K=k), abs=1e-9)
        assert cxc["t2i"][k] == pytest.approx(pkg_metrics.compute_r_at_k(t2i, gts["cxc"]["t2i"], K=k), abs=1e-9)
    # the variants score other query sets / positives and are not the official numbers
    allq = eccv.eccv_metrics(sim, image_ids, caption_ids, gts["eccv"], queries="all", original=gts["original"])
    assert allq["t2i"]["n_queries"] == 25000 and allq["i2t"]["n_queries"] == 5000
    union = eccv.cxc_recalls(sim, image_ids, caption_ids, gts["cxc"], positives="union", original=gts["original"])
    assert union["t2i"][1] >= cxc["t2i"][1]


def test_hand_worked_small():
    # 2 images x 4 captions; image 10 ranks captions 3,1,2,0 ; its positives {1, 2}
    sim = np.array([[0.1, 0.8, 0.5, 0.9], [0.9, 0.2, 0.3, 0.1]])
    gt = {"i2t": {10: [1, 2]}, "t2i": {0: [20], 3: [10, 20]}}
    m = eccv.eccv_metrics(sim, [10, 20], [0, 1, 2, 3], gt)
    # i2t: top2 = 3,1 -> rel 0,1 -> mAP@R = (0 + 1/2)/2 = .25; R-P = 1/2; R@1 = 0
    assert m["i2t"]["map_at_r"] == pytest.approx(0.25) and m["i2t"]["rprecision"] == 0.5 and m["i2t"]["r1"] == 0
    # t2i: caption 0 ranks 20,10 -> all 1; caption 3 ranks 10,20 with both positive -> all 1
    assert m["t2i"] == {"map_at_r": 1.0, "rprecision": 1.0, "r1": 1.0, "n_queries": 2}


def test_bad_input():
    with pytest.raises(VlbenchError, match="similarity shape"):
        eccv.eccv_metrics(np.zeros((2, 3)), [1], [1, 2, 3], {"i2t": {}, "t2i": {}})
    with pytest.raises(DataError, match="not in the matrix"):
        eccv.eccv_metrics(np.zeros((1, 1)), [1], [2], {"i2t": {5: [2]}, "t2i": {2: [1]}})
    with pytest.raises(VlbenchError, match="original"):
        eccv.eccv_metrics(np.zeros((1, 1)), [1], [2], {"i2t": {}, "t2i": {}}, queries="all")


@pytest.mark.parametrize("kind", ["eccv", "cxc"])
def test_run_extra_positives_default_is_official(kind):
    """``--extra-positives eccv`` / ``cxc`` in a run: the values a run scores (metrics/official.py) equal the
    eccv_caption package's own metric functions on the same matrix, to 1e-9; ids read from the raw files here."""
    import json

    from support.data import SHARED_CAPTIONS

    from vlbench.datasets.core import load_dataset
    from vlbench.metrics.official import official_values

    folder = SHARED_CAPTIONS / "eccv_caption"
    if not (folder / "eccv_caption_to_image.json").is_file() \
            or not (SHARED_CAPTIONS / "coco5k_test_ids.jsonl").is_file():
        pytest.skip(f"ECCV Caption ground truth not under {SHARED_CAPTIONS} (set VLBENCH_SHARED_CAPTIONS)")
    ds = load_dataset("coco", data_dir=SHARED_CAPTIONS, require_images=False, download=False, extra_positives=kind)
    assert ds.extra_positives is None and ds.extra_positives_name == kind  # standard metrics keep the originals
    rows = [json.loads(x) for x in (SHARED_CAPTIONS / "coco5k_test_ids.jsonl").read_text().splitlines() if x.strip()]
    image_ids = [int(r["image_id"]) for r in rows]
    caption_ids = [int(c) for r in rows for c in r["caption_ids"]]
    assert len(caption_ids) == ds.n_captions
    gt = gt_files.load_gts(folder, kind)
    rng = np.random.default_rng(1)
    sim = rng.random((len(image_ids), len(caption_ids))).astype(np.float32)
    col = {c: j for j, c in enumerate(caption_ids)}
    for i, img in enumerate(image_ids):  # informative: the ground truth's pairs get a random boost
        sim[i, [col[c] for c in gt["i2t"].get(img, []) if c in col]] += rng.random() * 0.9
    got = {key: value / 100 for key, value in official_values(ds.official_positives, sim).items()}
    img_pos, cap_pos = {v: i for i, v in enumerate(image_ids)}, col

    def ranked(mat, row_ids, col_ids, queries, pos, top):
        order = np.argsort(-mat[[pos[q] for q in queries]].astype(np.float64), axis=1, kind="stable")[:, :top]
        return {q: [int(col_ids[c]) for c in o] for q, o in zip(queries, order)}

    i2t = ranked(sim, image_ids, caption_ids, list(gt["i2t"]), img_pos, 300)
    t2i = ranked(sim.T, caption_ids, image_ids, list(gt["t2i"]), cap_pos, 300)
    if kind == "eccv":
        ref = {"i2t": pkg_metrics.compute_eccv_metrics(i2t, gt["i2t"]),
               "t2i": pkg_metrics.compute_eccv_metrics(t2i, gt["t2i"])}
        for d in ("i2t", "t2i"):
            for ours, theirs in (("eccv_map_at_r", "eccv_map_at_r"), ("eccv_r_precision", "eccv_rprecision"),
                                 ("eccv_r1", "eccv_r1")):
                assert got[(d, ours, None)] == pytest.approx(ref[d][theirs], abs=1e-9)
    else:
        for k in (1, 5, 10):
            want = pkg_metrics.compute_r_at_k(i2t, gt["i2t"], K=k)
            assert got[("i2t", "cxc_recall", k)] == pytest.approx(want, abs=1e-9)
            want = pkg_metrics.compute_r_at_k(t2i, gt["t2i"], K=k)
            assert got[("t2i", "cxc_recall", k)] == pytest.approx(want, abs=1e-9)
