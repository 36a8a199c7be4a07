"""DCG_CM gains from a fixed relevance model score the captions AS EVALUATED (chapter Eq. 5.1), hand-worked.

Data and models as in tests/unit/studies/test_hendriksen2024_protocol.py (5 solid-colour images, 3 listed; tests/support/colour_model.py).
A test perturbation recolours "red" as "yellow", so the relevance model reads the perturbed caption
differently from the clean one: c0 "a red car" -> "a yellow car". colour-rel: images are the one-hot of
their strongest channel (a, d, e red; b green; c blue), a caption the unit vector of its first colour word.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from support.runs import values_by_k as _values
from vlbench.pipeline.runner import RunConfig, run

H = 1 / math.sqrt(2)  # cos(yellow, red) = cos(yellow, green) under colour-rel


class _Recolour:
    name = "test-recolour"
    family = "test"
    version = "0.1"
    needs_parse = False

    def __init__(self, **kw):
        self.params = {}

    def apply(self, text, *, rng, tokens=None):
        return text.replace("red", "yellow") if "red" in text else None


@pytest.fixture
def recolour():
    from vlbench.registry import perturbations as reg

    reg.register("test-recolour", _Recolour, source="plugin:test 0.1")
    yield "test-recolour"
    reg._entries.pop("test-recolour", None)


@pytest.fixture
def rel_texts(monkeypatch):
    """Every text the relevance model encodes, in call order."""
    from support import colour_model  # as the model registry imports it (tests/ is on sys.path)

    seen = []
    orig = colour_model.ColourModel.encode_texts

    def spy(self, texts):
        if self.relevance:
            seen.extend(texts)
        return orig(self, texts)

    monkeypatch.setattr(colour_model.ColourModel, "encode_texts", spy)
    return seen


def _run(tmp_path, manifest, model, perturb, **kw):
    return run(RunConfig(model=model, dataset=f"custom:{manifest}", out=str(tmp_path / "run"), k=(1, 2, 5),
                         perturb=perturb, n_boot=10, quiet=True, validity="off", **kw))


def test_hendriksen2024_t2i_gains_from_the_perturbed_query(tmp_path, folder_manifest, colour_models, recolour,
                                                         rel_texts):
    vec, rel = colour_models
    res = _run(tmp_path, folder_manifest, vec, recolour, protocol="hendriksen2024", relevance=rel,
               perturb_variant="standard")  # a plug-in has no authors-compatible variant
    pert = res.evaluations[recolour][0].t2i
    # "a yellow car" under colour-vec against a, b, c, d, e (folder gallery): cos .830, .707, 0, .707, 1
    # -> ranking e, a, b, d, c (b and d tie exactly: lower index first); a (positive) at rank 2
    assert pert.best_rank[0] == 2
    # gains as evaluated: rel("a yellow car", e red) = 1/sqrt2, a positive 1, b green 1/sqrt2, d red 1/sqrt2
    perturbed_reading = H + 1 / math.log2(3) + H / math.log2(4) + H / math.log2(5)
    # the old clean-caption reading ("a red car": e 1, b 0, d 1) would give 1 + 1/log2 3 + 1/log2 5
    clean_reading = 1 + 1 / math.log2(3) + 1 / math.log2(5)
    assert pert.dcg[0] == pytest.approx(perturbed_reading, abs=1e-6)
    assert abs(perturbed_reading - clean_reading) > 0.06
    # the clean condition still reads "a red car": ranking d, a, e, b, c -> gains 1, 1, 1, 0, 0
    assert res.evaluations["clean"][0].t2i.dcg[0] == pytest.approx(1 + 1 / math.log2(3) + 1 / math.log2(4))
    # captions not changed by the perturbation keep their clean gains exactly
    assert list(pert.dcg[1:]) == list(res.evaluations["clean"][0].t2i.dcg[1:])
    # the relevance model encoded each distinct caption (clean and perturbed) once: 7 texts
    assert sorted(rel_texts) == sorted(["a red car", "a green car", "a green tree", "a blue door", "a blue sky",
                                        "the blue sea", "a yellow car"])


def test_both_sides_i2t_gains_from_the_perturbed_gallery_captions(tmp_path, folder_manifest, colour_models,
                                                                  recolour):
    """Standard protocol (both sides perturbed) with a fixed relevance model: an i2t query ranks the perturbed
    captions, and their relevance is that of the perturbed caption."""
    vec, rel = colour_models
    res = _run(tmp_path, folder_manifest, vec, recolour, relevance=rel)
    pert, clean = res.evaluations[recolour][0], res.evaluations["clean"][0]
    # i2t image b (0,255,0), positives c2, c3: scores c0' .707, c1 1, c2 1, c3..c5 0
    # -> ranking c1, c2, c0', c3, c4, c5; gains rel(green, "a green car") 1, positive 1,
    #    rel(green, "a yellow car") 1/sqrt2 (clean reading "a red car": 0), positive 1
    b = int(np.flatnonzero(pert.i2t.query_ids == 1)[0])
    assert pert.i2t.dcg[b] == pytest.approx(1 + 1 / math.log2(3) + H / math.log2(4) + 1 / math.log2(5), abs=1e-6)
    assert clean.i2t.dcg[b] == pytest.approx(1 + 1 / math.log2(3) + 1 / math.log2(5), abs=1e-6)
    # t2i c0' "a yellow car" against a, b, c (test gallery): ranking a, b, c; gains 1, rel(green, yellow), 0
    assert pert.t2i.dcg[0] == pytest.approx(1 + H / math.log2(3), abs=1e-6)
    assert clean.t2i.dcg[0] == pytest.approx(1.0)


def test_condition_relevance_slices_each_condition():
    from vlbench.pipeline.scoring import condition_relevance

    img, txt = np.eye(2), np.arange(10.0).reshape(5, 2)
    assert condition_relevance(None, 0, 2) is None
    got = condition_relevance((img, txt), 2, 2)
    assert got[0] is img and got[1].tolist() == [[4.0, 5.0], [6.0, 7.0]]
    with pytest.raises(ValueError, match="offset 4 needs 6"):
        condition_relevance((img, txt), 4, 2)


def test_run_with_dcg_p_above_the_gallery(tmp_path, folder_manifest, colour_models):
    """`--dcg-p 1000000000` on a 3-image gallery: the values at p = 3 (hand-worked), nothing of size p made."""
    import tracemalloc

    vec, rel = colour_models
    tracemalloc.start()
    try:
        res = run(RunConfig(model=vec, dataset=f"custom:{folder_manifest}", out=str(tmp_path / "run"), k=(1, 2),
                            p=1_000_000_000, relevance=rel, n_boot=10, quiet=True))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 200 << 20  # 10^9 float64 discounts alone would be 7.45 GiB
    # t2i (gains: positive 1, else colour-rel's cosine): c0 ranks a+, b, c -> 1; c1 "green car" ranks b (rel 1),
    # a+ -> 1 + 1/log2 3; c2 b+ first -> 1; c3 "blue door" ranks c (rel 1), a (0), b+ -> 1 + 1/log2 4; c4, c5 -> 1
    want = (1 + (1 + 1 / math.log2(3)) + 1 + (1 + 1 / math.log2(4)) + 1 + 1) / 6
    assert _values(res, "clean", "t2i", "dcg_cm") == {1_000_000_000: pytest.approx(want)}
    assert res.results["settings"]["p"] == 1_000_000_000  # the record keeps the p asked for
