"""MetaCLIP 2, Chinese-CLIP and BLIP's contrastive head as dual-encoder families (vlbench/models/hf.py): tiny
random-weight models of the real transformers classes (MetaClip2Model, ChineseCLIPModel, BlipForImageTextRetrieval),
saved with their tokenizer and image processor and loaded from the folder as a hub id is. A ``vlbench run`` on the
tiny dataset must give the Recall@K of an independent loop that calls each model as its model card does, one input
(or, for BLIP, one image-text pair through the forward with ``use_itm_head=False``) at a time, ranks with the
suite's tie rule (score descending, then the lower candidate index) and counts hits from the definition."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers
from PIL import Image
from support import tiny_models as T
from support.data import write_manifest

from vlbench import cli
from vlbench.models.adapter import load_model
from vlbench.pipeline.runner import run
from vlbench.results import RunRecord

FAMILIES = ("metaclip2", "chinese-clip", "blip")
KS = (1, 5, 10)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("new-dual-families")
    return {family: T.SAVERS[family](root / family) for family in FAMILIES}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    manifest = write_manifest(tmp_path_factory.mktemp("new-dual-data"), 12)
    rows = [json.loads(x) for x in manifest.read_text().splitlines() if x.strip()]
    return manifest, rows


def _card_scores(family, folder, root, rows, limit):
    """(images, captions) float64 cosines, one model call per input as the model cards show."""
    images = [Image.open(root / r["image"]).convert("RGB") for r in rows]
    captions = [c for r in rows for c in r["captions"]]
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    if family == "blip":
        model = transformers.BlipForImageTextRetrieval.from_pretrained(folder).eval()
        processor = transformers.BlipProcessor.from_pretrained(folder)
        out = np.zeros((len(images), len(captions)))
        with torch.no_grad():
            for i, im in enumerate(images):
                for j, c in enumerate(captions):
                    inputs = processor(images=im, text=c, return_tensors="pt", truncation=True, max_length=limit)
                    out[i, j] = float(model(**inputs, use_itm_head=False).itm_score[0, 0])
        return out
    model = getattr(transformers, {"metaclip2": "MetaClip2Model", "chinese-clip": "ChineseCLIPModel"}[family])
    model = model.from_pretrained(folder).eval()
    ip = transformers.AutoImageProcessor.from_pretrained(folder)
    with torch.no_grad():
        img = [model.get_image_features(**ip(images=im, return_tensors="pt")).pooler_output[0] for im in images]
        txt = [model.get_text_features(**tok(c, return_tensors="pt", truncation=True, max_length=limit))
               .pooler_output[0] for c in captions]
    img = np.stack([(v / v.norm()).double().numpy() for v in img])
    txt = np.stack([(v / v.norm()).double().numpy() for v in txt])
    return img @ txt.T


def _recall_by_definition(scores, rows):
    """{(direction, k): R@k in percent}: the candidates ranked by score descending, ties by the lower index."""
    owner = [i for i, r in enumerate(rows) for _ in r["captions"]]
    out = {}
    for direction, sims in (("i2t", scores), ("t2i", scores.T)):
        for k in KS:
            hits = 0
            for q, row in enumerate(sims):
                order = sorted(range(len(row)), key=lambda c: (-row[c], c))[:k]
                positives = {c for c, o in enumerate(owner) if o == q} if direction == "i2t" else {owner[q]}
                hits += bool(positives & set(order))
            out[(direction, k)] = 100.0 * hits / len(sims)
    return out


@pytest.mark.slow  # a run and a per-input loop of each tiny model (BLIP: 720 pair forwards)
@pytest.mark.parametrize("family", FAMILIES)
def test_run_recall_equals_the_model_cards_per_input_loop(family, folders, dataset, tmp_path):
    manifest, rows = dataset
    res = run(model=f"{family}:{folders[family]}", dataset=f"custom:{manifest}", out=str(tmp_path / "run"),
              quiet=True, num_workers=0, n_boot=20)
    rec = RunRecord.from_json(res.results)
    limit = load_model(f"{family}:{folders[family]}", device="cpu").max_length
    want = _recall_by_definition(_card_scores(family, folders[family], manifest.parent, rows, limit), rows)
    got = {(d, k): rec.value("clean", d, "recall", k) for d, k in want}
    assert got == pytest.approx(want, abs=1e-9)
    assert 0 < want[("t2i", 10)] < 100 or 0 < want[("i2t", 1)] < 100  # the data can fail: not all hits or misses
    ident = res.results["model"]["identity"]
    assert ident["model_class"] == {"metaclip2": "MetaClip2Model", "chinese-clip": "ChineseCLIPModel",
                                    "blip": "BlipForImageTextRetrieval"}[family]
    assert ident["max_text_tokens"] == limit


def test_text_limits_are_the_models_own(folders):
    """MetaCLIP 2: 77 positions; Chinese-CLIP: 52 tokens although its BERT (and this tokenizer) allow more;
    BLIP: its text tower's positions (40 in the tiny model)."""
    limits = {f: load_model(f"{f}:{folders[f]}", device="cpu").max_length for f in FAMILIES}
    assert limits == {"metaclip2": 77, "chinese-clip": 52, "blip": 40}
    zh = load_model(f"chinese-clip:{folders['chinese-clip']}", device="cpu")
    assert zh.text_lengths(["一个男人 " * 40]) == [52]
    assert len(zh.text_keys(["一个男人"])[0].split()) == 6  # [CLS], one token per character, [SEP]


@pytest.mark.parametrize("family", FAMILIES)
def test_their_processors_split_into_uint8_pixels_and_a_normalisation(folders, family):
    """What lets them share the pixel cache and take --pixels device (docs/models.md): the processor's uint8
    pixels, normalised, are its own output bit for bit (checked by the adapter on a probe image)."""
    model = load_model(f"{family}:{folders[family]}", device="cpu")
    spec = model.pixel_spec()
    assert spec is not None and "processor" in spec
    image = Image.new("RGB", (45, 31), (12, 200, 77))
    assert torch.equal(model.from_pixels(model.to_pixels(image)[None])[0], model.preprocess(image))


def test_a_truncated_metaclip2_caption_keeps_its_end_token_where_the_model_pools(folders):
    model = load_model(f"metaclip2:{folders['metaclip2']}", device="cpu")
    long = "a man riding a horse on a beach " * 30
    ids = [int(x) for x in model.text_keys([long])[0].split()]
    assert len(ids) == 77 and ids[-1] == model.tokenizer.eos_token_id == model.config.text_config.eos_token_id
    ref = transformers.MetaClip2Model.from_pretrained(folders["metaclip2"]).eval()
    with torch.no_grad():
        want = ref.get_text_features(input_ids=torch.tensor([ids])).pooler_output
    np.testing.assert_allclose(model.encode_texts([long]).numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_blip_vectors_are_the_forwards_normalised_itc_projections(folders):
    model = load_model(f"blip:{folders['blip']}", device="cpu")
    img = model.encode_images(model.collate([model.preprocess(Image.new("RGB", (40, 30), (200, 30, 90)))]))
    txt = model.encode_texts(["a red car", "two dogs play in the snow"])
    np.testing.assert_allclose(torch.linalg.norm(txt, dim=-1).numpy(), 1.0, rtol=1e-6)
    assert model.identity()["embed_dim"] == img.shape[1] == txt.shape[1]


def test_ls_models_lists_the_new_families_with_their_checkpoints(capsys):
    assert cli.main(["ls", "models"]) == 0
    out = capsys.readouterr().out
    for name, default in (("metaclip2", "facebook/metaclip-2-worldwide-huge-quickgelu"),
                          ("chinese-clip", "OFA-Sys/chinese-clip-vit-base-patch16"),
                          ("blip", "Salesforce/blip-itm-base-coco")):
        line = next(x for x in out.splitlines() if x.split() and x.split()[0] == name)
        assert default in line


def test_each_hf_familys_model_type_is_the_one_its_transformers_class_loads():
    from vlbench.models.hf import HF_CLASSES

    for family, (cls_name, model_type) in HF_CLASSES.items():
        assert getattr(transformers, cls_name).config_class.model_type == model_type, family


@pytest.mark.parametrize("family", ["metaclip2", "chinese-clip", "blip", "align"])
def test_a_checkpoint_of_another_model_type_is_refused_before_its_weights_load(tiny_models, family):
    """A CLIP folder read as another family would load with its weights missing, drawn at random (transformers only
    warns): refused with the family that reads it."""
    from vlbench.errors import ModelError

    clip = tiny_models("clip")
    with pytest.raises(ModelError) as err:
        load_model(f"{family}:{clip}", device="cpu")
    assert "is a 'clip' model" in str(err.value) and f"--model clip:{clip}" in err.value.hint


def test_the_model_type_is_checked_in_the_preflight_from_the_folders_config(tiny_models):
    from vlbench.models.hf import preflight

    clip = tiny_models("clip")
    (problem,) = preflight(str(clip), family="chinese-clip")
    assert "is a 'clip' model, not 'chinese_clip'" in str(problem) and f"--model clip:{clip}" in problem.hint
    assert preflight(str(clip), family="clip") == []
