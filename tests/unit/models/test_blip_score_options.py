"""The BLIP / BLIP-2 pair scorers' score options against the model's own forward (as the model cards call it, one
pair per call): ``itm-logit`` is the ITM head's logit at index 1 (BLIP-2: the forward's mean over the queries),
``itm-logit+itc`` adds the forward's contrastive cosine with the ITM head off; ``itm_token`` replaces the ITM
input's first token only; each option changes the identity, a preset resolves to the same identity as its options."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
import transformers
from PIL import Image
from support.tiny_pair_models import save_blip2_itm, save_blip_itm

from vlbench.errors import VlbenchError
from vlbench.models.adapter import load_model
from vlbench.models.pairs import load_pair_scorer
from vlbench.models.pairs.blip_options import pre_caption, resolve, split_query
from vlbench.models.pairs.protocol import parse_spec
from vlbench.pipeline.rerank.checks import check_options
from vlbench.testing import check_pair_scorer

TEXTS = ["a man riding horse on beach", "two dogs play in the snow!", "red car parked near building"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("blipopts")
    return {"blip-itm": save_blip_itm(root / "b"), "blip2-itm": save_blip2_itm(root / "b2")}


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(3)
    return [Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)) for _ in TEXTS]


def _scores(spec, images):
    s = load_pair_scorer(spec)
    return s, s.score_pairs(s.encode_images(s.collate([s.preprocess(im) for im in images])), TEXTS)


def _forward(family, folder, images, *, itm_first=None):
    """(match logit, itc cosine) per pair from the model's forward, one pair per call."""
    cls = transformers.BlipForImageTextRetrieval if family == "blip-itm" else transformers.Blip2ForImageTextRetrieval
    model, proc = cls.from_pretrained(folder).eval(), transformers.AutoProcessor.from_pretrained(folder)
    logit, itc = [], []
    with torch.no_grad():
        for im, text in zip(images, TEXTS):
            inputs = proc(images=im, text=text, return_tensors="pt")
            if family == "blip-itm":
                itc.append(float(model(**inputs, use_itm_head=False).itm_score[0, 0]))
                if itm_first is not None:
                    inputs["input_ids"][:, 0] = itm_first
                logit.append(float(model(**inputs, use_itm_head=True).itm_score[0, 1]))
            else:
                itc.append(float(model(**inputs, use_image_text_matching_head=False).logits_per_image.reshape(-1)[0]))
                logit.append(float(model(**inputs, use_image_text_matching_head=True).logits_per_image[0, 1]))
    return np.array(logit), np.array(itc)


@pytest.mark.parametrize("family", ["blip-itm", "blip2-itm"])
def test_itm_logit_and_itc_scores_equal_the_models_forward(folders, images, family):
    logit, itc = _forward(family, folders[family], images)
    _, got = _scores(f"{family}:{folders[family]}?score=itm-logit", images)
    np.testing.assert_allclose(got, logit, rtol=1e-5, atol=1e-5)
    _, got = _scores(f"{family}:{folders[family]}?score=itm-logit+itc", images)
    np.testing.assert_allclose(got, logit + itc, rtol=1e-5, atol=1e-5)
    assert np.abs(itc).max() > 1e-3  # the ITC term is not a zero that would hide a wrong sum
    _, prob = _scores(f"{family}:{folders[family]}", images)  # the default, unchanged: softmax at index 1
    np.testing.assert_allclose(prob, 1 / (1 + np.exp(-(logit - _forward_other(family, folders[family], images)))),
                               rtol=1e-5, atol=1e-6)


def _forward_other(family, folder, images):
    """The ITM head's logit at index 0 per pair (for the softmax of the default score)."""
    cls = transformers.BlipForImageTextRetrieval if family == "blip-itm" else transformers.Blip2ForImageTextRetrieval
    model, proc = cls.from_pretrained(folder).eval(), transformers.AutoProcessor.from_pretrained(folder)
    key = "itm_score" if family == "blip-itm" else "logits_per_image"
    flag = {"use_itm_head": True} if family == "blip-itm" else {"use_image_text_matching_head": True}
    with torch.no_grad():
        return np.array([float(getattr(model(**proc(images=im, text=t, return_tensors="pt"), **flag), key)[0, 0])
                         for im, t in zip(images, TEXTS)])


def test_itm_token_replaces_the_first_token_of_the_itm_input_only(folders, images):
    logit, itc = _forward("blip-itm", folders["blip-itm"], images, itm_first=4)
    s, got = _scores(f"blip-itm:{folders['blip-itm']}?score=itm-logit+itc&itm_token=[MASK]", images)
    np.testing.assert_allclose(got, logit + itc, rtol=1e-5, atol=1e-5)
    assert s.identity()["itm_first_token"] == 4
    plain = _forward("blip-itm", folders["blip-itm"], images)[0]
    assert np.abs(plain - logit).max() > 1e-3  # the token matters, so the check above could fail


def test_score_options_change_the_identity_and_a_preset_equals_its_options(folders):
    f = folders["blip2-itm"]
    hashes = {opt: load_pair_scorer(f"blip2-itm:{f}{opt}").model_hash()
              for opt in ("", "?score=itm-logit", "?score=itm-logit+itc", "?score=itm-logit+itc&max_text_tokens=32",
                          "?protocol=blip2")}
    assert len(set(hashes.values())) == 4
    assert hashes["?protocol=blip2"] == hashes["?score=itm-logit+itc&max_text_tokens=32"]
    default = load_pair_scorer(f"blip2-itm:{f}").identity()
    assert default["score"] == "itm softmax p(match), float32" and "itm_first_token" not in default
    assert load_pair_scorer(f"blip-itm:{folders['blip-itm']}?pre_caption=30").identity()["pre_caption_words"] == 30


def test_pre_caption_follows_blips_rules_and_changes_what_the_model_reads(folders):
    assert pre_caption('A Dog "runs"!  (fast)...  ', 30) == "a dog runs fast"
    assert pre_caption("one two three four", 2) == "one two"
    s = load_pair_scorer(f"blip-itm:{folders['blip-itm']}?pre_caption=3")
    plain = load_pair_scorer(f"blip-itm:{folders['blip-itm']}")
    assert s.text_keys(["Two dogs play in snow."]) == plain.text_keys(["two dogs play"])


@pytest.mark.parametrize("spec, words", [
    ("?score=logit", "unknown score"), ("?scor=itm-logit", "unknown option"), ("?max_text_tokens=0", "positive"),
    ("?max_text_tokens=99", "at most 40"), ("?itm_token=[ENC]", "30523"), ("?protocol=blip2", "blip2-itm's"),
    ("?score", "KEY=VALUE"), ("?score=itm-logit&score=match-prob", "twice")])
def test_bad_blip_options_are_refused_naming_the_fix(folders, spec, words):
    with pytest.raises(VlbenchError) as err:
        load_pair_scorer(f"blip-itm:{folders['blip-itm']}{spec}")
    assert words in str(err.value) + str(getattr(err.value, "fix", ""))


def test_blip2_refuses_blips_own_options():
    with pytest.raises(VlbenchError, match="BLIP's, not LAVIS"):
        resolve("blip2-itm", {"itm_token": "[ENC]"})
    assert split_query("blip-itm") == ("blip-itm", {})
    assert split_query("blip-itm:x?protocol=blip") == ("blip-itm:x", {"protocol": "blip"})


def test_blip_dual_encoder_reads_the_protocols_text_options(folders):
    f = folders["blip-itm"]
    cut = load_model(f"blip:{f}?max_text_tokens=6&pre_caption=3")
    plain = load_model(f"blip:{f}")
    ident, base = cut.identity(), plain.identity()
    assert ident["max_text_tokens"] == 6 and ident["pre_caption_words"] == 3 and ident["checkpoint"] == str(f)
    assert "pre_caption_words" not in base and cut.model_identity().hash("x") != plain.model_identity().hash("x")
    text = "Two dogs play in the snow."
    np.testing.assert_array_equal(np.asarray(cut.encode_texts([text])),
                                  np.asarray(plain.encode_texts(["two dogs play"])))
    with pytest.raises(VlbenchError, match="unknown option"):
        load_model(f"blip:{f}?score=itm-logit")


@pytest.mark.parametrize("family, options", [("blip-itm", "?score=itm-logit+itc&itm_token=[MASK]&max_text_tokens=9"),
                                             ("blip2-itm", "?protocol=blip2")])
def test_protocol_scores_pass_the_pair_scorer_conformance_check(folders, family, options):
    report = check_pair_scorer(f"{family}:{folders[family]}{options}")  # raises at the first clause it fails
    assert report.passed == ["protocol", "identity", "preprocess, collate and encode_images", "score_pairs",
                             "determinism", "batch independence", "image encoded alone", "text keys name the text",
                             "scores depend on the pair", "mismatched pairs refused", "no pairs"]


def test_a_spec_with_options_and_no_checkpoint_names_the_pair_scorer():
    assert parse_spec("blip-itm?score=itm-logit+itc") == ("blip-itm", None)
    assert parse_spec("blip2-itm:org/ckpt?protocol=blip2") == ("blip2-itm", "org/ckpt")
    check_options(SimpleNamespace(model="blip", rerank="blip-itm?score=itm-logit+itc", rerank_k=128))
    with pytest.raises(VlbenchError, match="pair scorer, not a dual encoder"):
        check_options(SimpleNamespace(model="blip-itm?protocol=blip", rerank=None, rerank_k=None))
