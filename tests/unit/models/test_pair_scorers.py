"""The BLIP and BLIP-2 ITM pair scorers against the model cards' own use of the models: tiny random-weight models of
the real transformers classes, saved with their processors and loaded through vlbench's path (a local folder, as a
hub id resolves to one). Tolerance: 1e-5 absolute on probabilities (float32 sums in another order: batched
pairs pad their texts and the vision tower sees a batch of images, while the loop runs one unpadded pair per
forward; measured differences up to 1.1e-6 with these deliberately wide random weights)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers
from PIL import Image
from support.tiny_pair_models import SAVERS

from vlbench import cli, registry
from vlbench.errors import ModelError, UnknownNameError, VlbenchError
from vlbench.models.pairs import load_pair_scorer

TEXTS = ["a man riding a horse on a beach", "two dogs play in the snow .", "a red car parked near a building",
         "a cat", "a " + "very " * 60 + "long caption about a blue bus"]
ATOL = 1e-5


def _images(n=4):
    rng = np.random.default_rng(1)
    return [Image.fromarray(rng.integers(0, 256, (30 + 7 * i, 44 - 3 * i, 3), dtype=np.uint8)) for i in range(n)]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("pair-models")
    return {family: save(root / family) for family, save in SAVERS.items()}


def _model_card_score(family, model, processor, image, text, max_length):
    """One pair through the model's own forward, as its model card calls it: processor(images=, text=), the ITM
    head's logits, softmax, index 1 ("match"). Long captions are truncated to the text tower's positions."""
    kw = {"truncation": True, "max_length": max_length + (processor.num_query_tokens or 0)
          if family == "blip2-itm" else max_length}
    inputs = processor(images=image, text=text, return_tensors="pt", **kw)
    with torch.no_grad():
        if family == "blip-itm":
            logits = model(**inputs, use_itm_head=True).itm_score
        else:
            logits = model(**inputs, use_image_text_matching_head=True).logits_per_image
    return float(torch.softmax(logits, dim=1)[0, 1])


@pytest.mark.parametrize("family", sorted(SAVERS))
def test_score_pairs_equals_the_model_card_forward_per_pair(family, folders):
    scorer = load_pair_scorer(f"{family}:{folders[family]}")
    images = _images()
    state = scorer.encode_images(scorer.collate([scorer.preprocess(im) for im in images]))
    img_idx = np.repeat(np.arange(len(images)), len(TEXTS))
    texts = TEXTS * len(images)
    got = scorer.score_pairs(state[img_idx], texts)
    assert got.dtype == np.float32 and got.shape == (len(texts),)
    model = getattr(transformers, scorer.model_class).from_pretrained(folders[family]).eval()
    processor = transformers.AutoProcessor.from_pretrained(folders[family])
    want = np.array([_model_card_score(family, model, processor, images[i], t, scorer.max_length)
                     for i, t in zip(img_idx, texts)])
    np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)
    assert np.ptp(want) > 1e-3  # the pairs differ: the comparison is not between constants


@pytest.mark.parametrize("family", sorted(SAVERS))
def test_batching_does_not_change_pair_scores(family, folders):
    scorer = load_pair_scorer(f"{family}:{folders[family]}")
    images = _images()
    state = scorer.encode_images(scorer.collate([scorer.preprocess(im) for im in images]))
    img_idx = np.repeat(np.arange(len(images)), len(TEXTS))
    texts = TEXTS * len(images)
    whole = scorer.score_pairs(state[img_idx], texts)
    for size in (1, 3, 7):
        parts = np.concatenate([scorer.score_pairs(state[img_idx[a:a + size]], texts[a:a + size])
                                for a in range(0, len(texts), size)])
        np.testing.assert_allclose(parts, whole, rtol=0, atol=ATOL)
    # images encoded one at a time give the same state rows
    alone = torch.cat([scorer.encode_images(scorer.collate([scorer.preprocess(im)])) for im in images])
    np.testing.assert_allclose(scorer.score_pairs(alone[img_idx], texts), whole, rtol=0, atol=ATOL)


@pytest.mark.parametrize("family", sorted(SAVERS))
def test_pair_scorer_identity_changes_with_checkpoint_and_precision(family, tmp_path):
    a = SAVERS[family](tmp_path / "a", seed=0)
    b = SAVERS[family](tmp_path / "b", seed=1)
    fp32 = load_pair_scorer(f"{family}:{a}")
    assert json.loads(json.dumps(fp32.identity())) == fp32.identity()
    assert fp32.identity()["precision"] == "fp32" and fp32.identity()["model_class"] == fp32.model_class
    hashes = {fp32.model_hash(), load_pair_scorer(f"{family}:{b}").model_hash(),
              load_pair_scorer(f"{family}:{a}", precision="bf16").model_hash()}
    assert len(hashes) == 3
    assert load_pair_scorer(f"{family}:{a}").model_hash() == fp32.model_hash()  # stable across loads


@pytest.mark.parametrize("family", sorted(SAVERS))
def test_bf16_pair_scores_are_float32_and_close_to_fp32(family, folders):
    fp32 = load_pair_scorer(f"{family}:{folders[family]}")
    bf16 = load_pair_scorer(f"{family}:{folders[family]}", precision="bf16")
    images = _images(2)
    idx = np.repeat(np.arange(2), len(TEXTS))
    got = {}
    for name, s in (("fp32", fp32), ("bf16", bf16)):
        state = s.encode_images(s.collate([s.preprocess(im) for im in images]))
        got[name] = s.score_pairs(state[idx], TEXTS * 2)
    assert got["bf16"].dtype == np.float32
    assert bf16.model.dtype == torch.bfloat16
    np.testing.assert_allclose(got["bf16"], got["fp32"], atol=0.1)  # bf16 keeps about 3 significant digits


def test_pair_scorers_are_registered_and_listed(capsys):
    assert {"blip-itm", "blip2-itm"} <= set(registry.pair_scorers.names())
    entry = registry.pair_scorers.entry("blip-itm")
    assert entry.target == "vlbench.models.pairs.blip:load_blip_itm"  # lazy: "module:attr"
    assert cli.main(["ls", "pair-scorers"]) == 0
    out = capsys.readouterr().out
    assert "pair-scorers:" in out and "blip-itm" in out and "blip2-itm" in out and "Salesforce/blip2-itm-vit-g" in out


def test_unknown_pair_scorer_name_suggests_the_close_one():
    with pytest.raises(UnknownNameError, match="blip-itm"):
        load_pair_scorer("blip-itn")


def test_a_missing_local_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ModelError, match="could not load blip-itm from local folder|not in the local Hugging"):
        load_pair_scorer(f"blip-itm:{tmp_path / 'nothing-here'}")


def test_an_uncached_hub_id_offline_names_the_fix():
    with pytest.raises(ModelError) as err:
        load_pair_scorer("blip-itm:Salesforce/blip-itm-base-coco")
    assert "offline" in str(err.value) or "cache" in str(err.value)


def test_fp16_on_the_cpu_is_refused_with_the_fix(folders):
    with pytest.raises(VlbenchError, match="bf16"):
        load_pair_scorer(f"blip-itm:{folders['blip-itm']}", precision="fp16", device="cpu")


def test_a_pair_scorer_plugin_without_score_pairs_is_refused():
    class NoScores:
        def identity(self):
            return {}

    registry.pair_scorers.register("test-no-scores", lambda ckpt, **kw: NoScores())
    try:
        with pytest.raises(ModelError, match="without .*score_pairs"):
            load_pair_scorer("test-no-scores")
    finally:
        registry.pair_scorers._entries.pop("test-no-scores")


PLUGIN = '''
import numpy as np


class Grey:
    """A plug-in pair scorer written without importing vlbench: the image's mean grey against the caption length."""

    def identity(self):
        return {"adapter": "grey-pairs", "version": 1}

    def preprocess(self, image):
        return np.asarray(image.convert("L").resize((4, 4)), dtype=np.float32)

    def collate(self, items):
        return np.stack(items)

    def encode_images(self, batch):
        return batch.mean(axis=(1, 2)) / 255

    def score_pairs(self, images, texts):
        if len(images) != len(texts):
            raise ValueError("one image row per text")
        return -np.abs(np.asarray(images) - np.array([len(t) % 10 / 10 for t in texts])).astype(np.float32)

    def text_keys(self, texts):
        return list(texts)

    def model_hash(self):
        return "0" * 64


def load(checkpoint=None, **kwargs):
    return Grey()
'''


def test_a_pair_scorer_plugin_loads_through_its_entry_point_group(monkeypatch, tmp_path, capsys):
    import importlib.metadata as md

    from vlbench.testing import check_pair_scorer

    (tmp_path / "grey_pairs_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))

    class EP:
        name, value, dist = "grey-pairs", "grey_pairs_plugin:load", None

    monkeypatch.setattr(md, "entry_points", lambda group=None: [EP()] if group == "vlbench.pair_scorers" else [])
    monkeypatch.setattr(registry, "pair_scorers", registry.Registry("pair_scorers"))
    scorer = load_pair_scorer("grey-pairs")
    assert registry.pair_scorers.entry("grey-pairs").source.startswith("plugin:")
    assert "protocol" in check_pair_scorer(scorer).passed
    assert cli.main(["ls", "pair-scorers"]) == 0
    assert "grey-pairs" in capsys.readouterr().out


@pytest.mark.parametrize("direction", ["i2t", "t2i"])
def test_topk_pair_scores_with_blip_itm_equal_scoring_each_pair_alone(direction, folders):
    from vlbench.models.pairs import topk_pair_scores

    scorer = load_pair_scorer(f"blip-itm:{folders['blip-itm']}")
    images = _images()
    state = scorer.encode_images(scorer.collate([scorer.preprocess(im) for im in images]))
    rng = np.random.default_rng(5)
    gallery, queries = (len(TEXTS), len(images)) if direction == "i2t" else (len(images), len(TEXTS))
    s1 = np.stack([rng.permutation(gallery)[:3] for _ in range(queries)])
    got, scored = topk_pair_scores(scorer, state, TEXTS, s1, direction=direction, batch_size=4)
    for q, row in enumerate(s1):
        for j, cand in enumerate(row):
            i, t = (q, cand) if direction == "i2t" else (cand, q)
            alone = scorer.score_pairs(state[[i]], [TEXTS[t]])[0]
            assert abs(got[q, j] - alone) <= ATOL
    assert scored == queries * 3


def test_a_folder_without_its_processor_names_what_to_save(tmp_path):
    folder = SAVERS["blip-itm"](tmp_path / "full")
    bare = tmp_path / "weights-only"
    transformers.BlipForImageTextRetrieval.from_pretrained(folder).save_pretrained(bare)
    with pytest.raises(ModelError) as err:
        load_pair_scorer(f"blip-itm:{bare}")
    assert str(bare) in str(err.value) and "save_pretrained" in str(err.value)


def test_pair_scorer_identity_names_an_accelerator_device_and_not_the_cpu(folders):
    from vlbench.models.pairs.blip import HFPairScorer

    cpu = HFPairScorer("blip-itm", str(folders["blip-itm"]), device="cpu")
    gpu = HFPairScorer("blip-itm", str(folders["blip-itm"]), device="cuda:1")  # nothing runs on it here
    assert "device" not in cpu.identity() and gpu.identity()["device"] == "cuda"
    assert gpu.model_hash() != cpu.model_hash()
    assert HFPairScorer("blip-itm", str(folders["blip-itm"]), device="cuda:0").model_hash() == gpu.model_hash()
