"""SigLIP and SigLIP 2 (vlbench/models/siglip.py): tiny models built through the real transformers classes
(SiglipModel with a SentencePiece SiglipTokenizer; Siglip2Model, the NaFlex architecture, and SiglipModel with
a Gemma BPE tokenizer, the form of the fixed-resolution SigLIP 2 checkpoints), saved with save_pretrained and
loaded from the folder exactly as a hub id is (from_pretrained)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.tiny_siglip import SAVERS

CAPTIONS = ["A Man riding a HORSE on a beach.", "two dogs play in the snow", "A red CAR parked near a building"]


@pytest.fixture(scope="module")
def tiny_siglip(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-siglip")
    made = {}

    def get(kind: str) -> Path:
        if kind not in made:
            made[kind] = SAVERS[kind](root / kind)
        return made[kind]

    return get


CASES = [("siglip", "siglip"), ("siglip2", "siglip2-fixed"), ("siglip2", "siglip2-naflex")]


@pytest.mark.parametrize("family,kind", CASES)
def test_token_ids_equal_the_processor_with_the_model_cards_settings(tiny_siglip, family, kind):
    """padding="max_length", max_length=64 on lower-cased captions, exactly as the processor gives them."""
    from transformers import AutoProcessor

    from vlbench.models.adapter import load_model

    folder = tiny_siglip(kind)
    model = load_model(f"{family}:{folder}", device="cpu")
    ours = model._tokenize(CAPTIONS)["input_ids"]
    proc = AutoProcessor.from_pretrained(folder)
    ref = proc(text=[c.lower() for c in CAPTIONS], padding="max_length", max_length=64, return_tensors="pt")
    assert ours.shape == (3, 64)
    assert ours.tolist() == ref["input_ids"].tolist()
    # right padding: the caption's ids first, then the pad id up to position 64 (the pooled last position)
    pad = proc.tokenizer.pad_token_id
    assert ours[1, -1].item() == pad and ours[1, 0].item() != pad
    ident = model.identity()["text_preprocessing"]
    assert ident == {"lowercase": True, "tokenizer_lowercases": kind in ("siglip", "siglip2-naflex"),
                     "padding": "max_length", "max_length": 64, "padding_side": "right", "attention_mask": False}


@pytest.mark.parametrize("family,kind", CASES)
def test_text_vectors_are_get_text_features_of_the_padded_ids_without_mask(tiny_siglip, family, kind):
    import torch
    import transformers
    from transformers import AutoConfig

    from vlbench.models.adapter import load_model

    folder = tiny_siglip(kind)
    model = load_model(f"{family}:{folder}", device="cpu")
    ours = model.encode_texts(CAPTIONS).numpy()
    cls = {"siglip": "SiglipModel", "siglip2": "Siglip2Model"}[AutoConfig.from_pretrained(folder).model_type]
    ref_model = getattr(transformers, cls).from_pretrained(folder).eval()
    ids = transformers.AutoProcessor.from_pretrained(folder)(text=[c.lower() for c in CAPTIONS], padding="max_length",
                                                            max_length=64, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        ref = ref_model.get_text_features(input_ids=ids).pooler_output.numpy()
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-6)
    # the vector of a caption does not depend on the other captions of its batch (fixed-length padding)
    alone = model.encode_texts(CAPTIONS[1:2]).numpy()
    np.testing.assert_allclose(alone[0], ours[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("family,kind", CASES)
def test_turning_lowercasing_off_changes_ids_and_the_identity_hash(tiny_siglip, family, kind):
    from vlbench.models.adapter import load_model

    folder = tiny_siglip(kind)
    on = load_model(f"{family}:{folder}", device="cpu")
    off = load_model(f"{family}:{folder}?lowercase=0", device="cpu")
    assert on.model_hash() != off.model_hash()
    assert off.identity()["text_preprocessing"]["lowercase"] is False
    assert off.identity()["text_preprocessing"]["tokenizer_lowercases"] is False  # switched off in it too
    assert on.identity()["checkpoint"] == off.identity()["checkpoint"] == str(folder)
    # upper-case captions get other ids without lower-casing, the same ones as lower-case text with it
    assert off.text_keys(CAPTIONS[:1]) != on.text_keys(CAPTIONS[:1])
    assert on.text_keys(CAPTIONS[:1]) == off.text_keys([CAPTIONS[0].lower()])
    explicit = load_model(f"{family}:{folder}?lowercase=1&padding=max_length", device="cpu")
    assert explicit.model_hash() == on.model_hash()


def test_unknown_or_bad_option_names_it_and_the_choices(tiny_siglip):
    from vlbench.errors import ModelError
    from vlbench.models.siglip import preflight, split_options

    assert split_options("?lowercase=0", "siglip2") == (
        "google/siglip2-base-patch16-224", {"lowercase": "0", "padding": "max_length", "attention_mask": "0"})
    with pytest.raises(ModelError) as exc:
        split_options("google/siglip2-base-patch16-224?lower=0", "siglip2")
    assert "unknown option 'lower'" in exc.value.message and "lowercase=1|0" in exc.value.hint
    with pytest.raises(ModelError) as exc:
        split_options("x?padding=true", "siglip")
    assert "padding='true'" in exc.value.message and "padding=max_length or padding=longest" in exc.value.hint
    found = preflight(f"{tiny_siglip('siglip')}?lowercase=2", family="siglip")
    assert len(found) == 1 and "lowercase='2'" in found[0].message
    assert preflight(f"{tiny_siglip('siglip')}?lowercase=0", family="siglip") == []


def test_a_clip_checkpoint_under_siglip_is_refused_with_the_fix(tiny_models):
    from vlbench.errors import ModelError
    from vlbench.models.adapter import load_model

    with pytest.raises(ModelError) as exc:
        load_model(f"siglip:{tiny_models('clip')}", device="cpu")
    assert "is a 'clip' model, not SigLIP" in exc.value.message


def test_naflex_images_are_patches_with_mask_and_shape_and_match_get_image_features(tiny_siglip):
    import torch
    from PIL import Image
    from transformers import AutoImageProcessor, Siglip2Model

    from vlbench.models.adapter import load_model

    folder = tiny_siglip("siglip2-naflex")
    model = load_model(f"siglip2:{folder}", device="cpu")
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)) for h, w in ((24, 40), (40, 24))]
    batch = model.collate([model.preprocess(im) for im in images])
    assert set(batch) == {"pixel_values", "pixel_attention_mask", "spatial_shapes"}
    assert batch["pixel_values"].shape == (2, 16, 8 * 8 * 3) and len(batch[1:]) == 1
    ours = model.encode_images(batch).numpy()
    ref_in = AutoImageProcessor.from_pretrained(folder)(images=images, return_tensors="pt")
    with torch.no_grad():
        ref = Siglip2Model.from_pretrained(folder).eval().get_image_features(**ref_in).pooler_output.numpy()
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-6)
    assert model.identity()["preprocessing"]["max_num_patches"] == 16


@pytest.mark.slow  # two whole runs (cold and warm) per family
@pytest.mark.parametrize("family,kind", [("siglip", "siglip"), ("siglip2", "siglip2-naflex")])
def test_a_run_works_end_to_end_and_a_warm_run_loads_no_model(tiny_siglip, manifest, tmp_path, family, kind):
    from vlbench.pipeline.runner import run

    spec = f"{family}:{tiny_siglip(kind)}"
    kw = dict(dataset=f"custom:{manifest}", quiet=True, num_workers=0, cache_dir=str(tmp_path / "cache"), n_boot=20)
    cold = run(model=spec, out=str(tmp_path / "cold"), **kw)
    warm = run(model=spec, out=str(tmp_path / "warm"), **kw)
    rec = {(r["direction"], r["metric"], r.get("k")): r["value"] for r in cold.results["results"]
           if r.get("condition", "clean") == "clean"}
    assert 0 <= rec[("t2i", "recall", 10)] <= 100 and rec[("t2i", "recall", 10)] >= rec[("t2i", "recall", 1)]
    assert cold.results["model"]["identity"]["text_preprocessing"]["lowercase"] is True
    assert warm.results["encoding"]["model_loaded"] is False
    assert warm.results["model"]["hash"] == cold.results["model"]["hash"]
    warm_rec = {(r["direction"], r["metric"], r.get("k")): r["value"] for r in warm.results["results"]
                if r.get("condition", "clean") == "clean"}
    assert warm_rec == rec


def test_default_checkpoints_offline_fail_fast_naming_the_hub_id(monkeypatch):
    from vlbench.errors import ModelError
    from vlbench.models.adapter import load_model
    from vlbench.models.siglip import preflight

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    found = preflight("google/siglip2-base-patch16-224?lowercase=0", family="siglip2")
    assert len(found) == 1 and "'google/siglip2-base-patch16-224' is not in the local" in found[0].message
    assert "--model siglip2:/path/to/siglip2-base-patch16-224" in found[0].hint
    with pytest.raises(ModelError) as exc:
        load_model("siglip", device="cpu")
    assert "google/siglip-base-patch16-224" in exc.value.message


@pytest.mark.parametrize("family", ["siglip", "siglip2"])
def test_duplicated_query_keys_are_refused(family):
    """``siglip2:DIR?lowercase=0&lowercase=1`` took the last value silently; which was meant is
    unknowable, so a key given twice is refused (before any file is read), in every family's spec."""
    from vlbench.errors import ModelError
    from vlbench.models.siglip import preflight, split_options

    for spec in ("DIR?lowercase=0&lowercase=1", "DIR?lowercase=0&lowercase=0",
                 "DIR?padding=longest&padding=max_length"):
        with pytest.raises(ModelError, match="given twice"):
            split_options(spec, family)
    found = preflight("DIR?lowercase=0&lowercase=1", family=family)
    assert len(found) == 1 and "given twice" in found[0].message
    with pytest.raises(ModelError, match="has no value"):
        split_options("DIR?lowercase", family)
