"""`vlbench run --protocol hendriksen2024` and its single settings, with hand-worked values.

Data: a custom dataset whose image folder holds 5 solid-colour images, of which the manifest lists 3:
a (255,50,0) "a red car", "a green car"; b (0,255,0) "a green tree", "a blue door"; c (0,0,255) "a blue sky",
"the blue sea"; unlisted: d (255,0,0), e (255,255,0). Models: tests/support/colour_model.py. Cut-offs k = 1, 2, 5.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from vlbench.pipeline.runner import RunConfig, run

from support.runs import values_by_k as _values



def _run(tmp_path, manifest, model, **kw):
    return run(RunConfig(model=model, dataset=f"custom:{manifest}", out=str(tmp_path / "run"), k=(1, 2, 5),
                         perturb="distraction-true", n_boot=10, quiet=True, **kw))


@pytest.mark.slow  # a whole run of the protocol (~1 s CPU)
def test_hendriksen2024_protocol_hand_worked(tmp_path, folder_manifest, colour_models):
    vec, rel = colour_models
    res = _run(tmp_path, folder_manifest, vec, protocol="hendriksen2024", relevance=rel)
    # t2i gallery = the whole folder: test images first, then d, e by name
    assert res.results["dataset"]["gallery_size"] == 5
    # clean t2i ranks of the positive: c0 2 (d first), c1 3 (b, e first), c2 1, c3 3 (c, a first), c4 1, c5 1
    assert _values(res, "clean", "t2i", "recall") == pytest.approx({1: 50.0, 2: 200 / 3, 5: 100.0})
    # i2t is the fraction hits / min(2, k): a 1, 1, 1; b 0, 1/2, 1; c 0, 1/2, 1
    assert _values(res, "clean", "i2t", "recall") == pytest.approx({1: 100 / 3, 2: 200 / 3, 5: 100.0})
    # perturbed t2i: every query reads as blue -> ranking c, a, b, d, e: ranks 2, 2, 3, 3, 1, 1
    assert _values(res, "distraction-true", "t2i", "recall") == pytest.approx({1: 100 / 3, 2: 200 / 3, 5: 100.0})
    # only t2i is perturbed: i2t ranks the clean captions, so it equals clean i2t exactly
    for metric in ("recall", "map_at_r", "dcg_cm", "medr"):
        assert _values(res, "distraction-true", "i2t", metric) == _values(res, "clean", "i2t", metric)
    # DCG gains from the fixed relevance model (strongest channel; e (255,255,0) reads as red), not normalized:
    # clean c0 "a red car": ranking d, a, e, b, c -> gains 1, 1 (positive), 1, 0, 0
    clean_t2i = res.evaluations["clean"][0].t2i
    assert clean_t2i.dcg[0] == pytest.approx(1 + 1 / math.log2(3) + 1 / math.log2(4))
    # perturbed c0: ranking c, a, b, d, e -> gains 0, 1, 0, 1, 1 (relevance of the perturbed caption, which
    # colour-rel still reads as "red"; tests/unit/pipeline/test_scoring_relevance.py has a case where it differs)
    pert_t2i = res.evaluations["distraction-true"][0].t2i
    assert pert_t2i.dcg[0] == pytest.approx(1 / math.log2(3) + 1 / math.log2(5) + 1 / math.log2(6))
    # the authors-compatible distraction was applied, and the protocol is recorded and shown
    proto = res.results["settings"]["protocol"]
    assert proto["name"] == "hendriksen2024+relevance=colour-rel" and proto["base"] == "hendriksen2024"
    assert proto["gallery"] == "folder" and proto["i2t_recall"] == "fraction" and proto["perturb_variant"] == "hendriksen2024"
    assert proto["relevance"] == rel and proto["perturb_side"] == "t2i" and proto["truncate_chars"] == 330
    assert "protocol: hendriksen2024+relevance=colour-rel" in (tmp_path / "run" / "table.md").read_text()
    assert "hendriksen2024" in json.dumps(res.results["conditions"]["distraction-true"])


@pytest.mark.slow  # a whole run (~0.6 s CPU)
def test_standard_protocol_same_data(tmp_path, folder_manifest, colour_models):
    """The standard protocol on the same data: test gallery, hit recall, both sides perturbed, self relevance."""
    vec, _ = colour_models
    res = _run(tmp_path, folder_manifest, vec)
    assert res.results["dataset"]["gallery_size"] == 3
    # ranks: c0 1 (no d), c1 2 (b first), c2 1, c3 3 (c, a first), c4 1, c5 1
    assert _values(res, "clean", "t2i", "recall") == pytest.approx({1: 200 / 3, 2: 250 / 3, 5: 100.0})
    assert _values(res, "clean", "i2t", "recall") == pytest.approx({1: 100 / 3, 2: 100.0, 5: 100.0})
    assert _values(res, "distraction-true", "i2t", "recall") != _values(res, "clean", "i2t", "recall")
    # self relevance: c0 ranking a, b, c (a positive, then cosines 0, 0)
    assert res.evaluations["clean"][0].t2i.dcg[0] == pytest.approx(1.0)
    assert res.results["settings"]["protocol"]["name"] == "standard"


def test_single_settings_and_label(tmp_path, folder_manifest, colour_models):
    """Each setting on its own; a protocol with a setting changed is labelled as such."""
    vec, _ = colour_models
    res = _run(tmp_path, folder_manifest, vec, gallery="folder", i2t_recall="fraction")
    assert res.results["dataset"]["gallery_size"] == 5
    assert _values(res, "clean", "i2t", "recall") == pytest.approx({1: 100 / 3, 2: 200 / 3, 5: 100.0})
    assert res.results["settings"]["protocol"]["name"] == "standard+gallery=folder,i2t_recall=fraction"


def test_truncate_chars(colour_models):
    from vlbench.pipeline import presets, relevance

    cfg = presets.resolve(RunConfig(model="x", dataset="y", protocol="hendriksen2024"))
    assert relevance.truncate(cfg, ["x" * 400, "short"]) == ["x" * 330, "short"]
    cfg0 = presets.resolve(RunConfig(model="x", dataset="y", protocol="hendriksen2024", truncate_chars=0))
    assert cfg0.truncate_chars is None and presets.label(cfg0) == "hendriksen2024+truncate_chars=None"


def test_bad_relevance_names_the_option():
    from vlbench.errors import OptionError

    # from Python the error names the keyword; the command line shows --relevance
    with pytest.raises(OptionError, match="^relevance 'no-such-family:x': no model family") as err:
        run(RunConfig(model="clip", dataset="coco", relevance="no-such-family:x"))
    assert err.value.option == "relevance"


def test_official_eccv_records_join_the_run_records():
    """The score step's official ECCV records (an input of the one scoring pass, pipeline/scoring.py),
    hand-worked as in test_eccv_official.test_hand_worked_small: 2 images x 4 captions, embeddings giving
    that similarity."""
    from types import SimpleNamespace

    from vlbench.pipeline.scoring import score

    img = np.eye(2)  # with txt = sim.T, img @ txt.T == sim
    sim = np.array([[0.1, 0.8, 0.5, 0.9], [0.9, 0.2, 0.3, 0.1]])
    txt = sim.T
    official = {"kind": "eccv", "image_ids": [10, 20], "caption_ids": [0, 1, 2, 3],
                "gt": {"i2t": {10: [1, 2]}, "t2i": {0: [20], 3: [10, 20]}}}
    ds = SimpleNamespace(official_positives=official, n_captions=4, folds=None, extra_positives=None,
                         caption_to_image=np.array([0, 0, 1, 1]))
    plan = SimpleNamespace(ds=ds, graded=({},), perturbed={})
    enc = SimpleNamespace(offsets={"clean": 0}, variant_img={}, img_emb=img, txt_emb=txt, relevance=None,
                          adapter=SimpleNamespace(device="cpu"))
    cfg = SimpleNamespace(k=(1, 5, 10), p=10, i2t_recall="hit", perturb_side="both")
    evals = score(cfg, plan, enc)
    recs = {(r["direction"], r["metric"]): r["value"] for r in evals["clean"][0].records()}
    # i2t: image 10 ranks 3, 1 in its top R = 2 -> mAP@R = (0 + 1/2) / 2, R-P = 1/2, R@1 = 0 (percent)
    assert recs[("i2t", "eccv_map_at_r")] == pytest.approx(25.0) and recs[("i2t", "eccv_r_precision")] == 50.0
    assert recs[("i2t", "eccv_r1")] == 0.0
    assert recs[("t2i", "eccv_map_at_r")] == 100.0 and recs[("t2i", "eccv_r1")] == 100.0
