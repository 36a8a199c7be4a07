"""sentence-transformers image-text models as ``st:NAME_OR_FOLDER`` (vlbench/models/st.py): a tiny
sentence-transformers CLIP model (sentence_transformers' CLIPModel module around a tiny transformers CLIP, built
through the real classes and saved with SentenceTransformer.save) gives the vectors of sentence-transformers' own
``encode``, runs end to end, and is the chapter protocol's relevance model with ``--relevance st:<folder>``."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

CAPTIONS = ["a man riding a horse on a beach", "two dogs play in the snow", "a red car parked near a building"]
# the chapter-protocol run's data (5 colour images, 3 of them listed with captions; d, e: the folder gallery)
from support.colour_model import FOLDER_CAPTIONS as LISTED  # noqa: E402
from support.colour_model import FOLDER_IMAGES as IMAGES

pytestmark = pytest.mark.slow  # sentence-transformers and a saved model of its own: seconds per test


@pytest.fixture(scope="module")
def st_folder(tmp_path_factory):
    import sentence_transformers as st
    from support import tiny_models as T

    root = tmp_path_factory.mktemp("tiny-st")
    clip = T.save_clip(root / "clip", seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its CLIPModel module is deprecated in favour of Transformer
        from sentence_transformers.models import CLIPModel

        model = st.SentenceTransformer(modules=[CLIPModel(str(clip))], device="cpu")
    model.save(str(root / "st-clip"))
    return root / "st-clip", clip


def _unit(x):
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _images():
    from PIL import Image

    rng = np.random.default_rng(1)
    return [Image.fromarray(rng.integers(0, 255, (24 + 6 * i, 30, 3), dtype=np.uint8)) for i in range(3)]


def test_st_folder_gives_sentence_transformers_own_encode(st_folder):
    from sentence_transformers import SentenceTransformer

    from vlbench.models.adapter import load_model

    folder, _ = st_folder
    ref = SentenceTransformer(str(folder), device="cpu")
    model = load_model(f"st:{folder}", device="cpu")
    ours_t = model.encode_texts(CAPTIONS).numpy()
    np.testing.assert_allclose(ours_t, ref.encode(CAPTIONS), rtol=1e-5, atol=1e-6)
    images = _images()
    ours_i = model.encode_images(model.collate([model.preprocess(im) for im in images])).numpy()
    np.testing.assert_allclose(ours_i, ref.encode(images), rtol=1e-5, atol=1e-6)
    ident = model.identity()
    assert ident["adapter"] == "vlbench.st" and ident["embed_dim"] == 16 and ident["checkpoint"] == str(folder)
    assert ident["local"]["content_sha256"]  # the folder's files are part of the identity


def test_st_clip_vectors_equal_the_wrapped_transformers_clip(st_folder):
    """sentence-transformers' clip-ViT-B-32 wraps openai/clip-vit-base-patch32: the same weights give the same
    unit vectors through both families (text and images)."""
    from vlbench.models.adapter import load_model

    folder, clip = st_folder
    st, hf = load_model(f"st:{folder}", device="cpu"), load_model(f"clip:{clip}", device="cpu")
    np.testing.assert_allclose(_unit(st.encode_texts(CAPTIONS)), _unit(hf.encode_texts(CAPTIONS)), atol=1e-5)
    images = _images()
    np.testing.assert_allclose(_unit(st.encode_images(st.collate([st.preprocess(im) for im in images]))),
                               _unit(hf.encode_images(hf.collate([hf.preprocess(im) for im in images]))), atol=1e-5)


def test_st_preflight_names_the_missing_folder_and_the_hub_repository(tmp_path, monkeypatch):
    from vlbench.models.st import hub_repo, preflight

    assert hub_repo("clip-ViT-B-32") == "sentence-transformers/clip-ViT-B-32"
    assert hub_repo("org/model") == "org/model"
    found = preflight(str(tmp_path / "nowhere"))
    assert len(found) == 1 and "does not exist" in found[0].message and "SentenceTransformer.save" in found[0].hint
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    found = preflight("clip-ViT-B-32")
    assert len(found) == 1 and "'sentence-transformers/clip-ViT-B-32' is not in the local" in found[0].message
    assert "st:/path/to/clip-ViT-B-32" in found[0].hint


def test_st_model_run_end_to_end(st_folder, manifest, tmp_path):
    from vlbench.pipeline.runner import run

    folder, _ = st_folder
    kw = dict(dataset=f"custom:{manifest}", quiet=True, num_workers=0, cache_dir=str(tmp_path / "cache"), n_boot=20)
    cold = run(model=f"st:{folder}", out=str(tmp_path / "cold"), **kw)
    warm = run(model=f"st:{folder}", out=str(tmp_path / "warm"), **kw)
    assert cold.results["model"]["identity"]["adapter"] == "vlbench.st"
    assert warm.results["encoding"]["model_loaded"] is False
    assert warm.results["model"]["hash"] == cold.results["model"]["hash"]


def test_relevance_st_folder_under_the_chapter_protocol(st_folder, folder_manifest, tmp_path):
    """--protocol hendriksen2024 --relevance st:<folder>: DCG_CM gains of non-positives are the st model's
    cosines (sentence-transformers' own encode), recomputed here for every clean t2i query."""
    from PIL import Image
    from sentence_transformers import SentenceTransformer

    from vlbench.models.adapter import load_model
    from vlbench.pipeline.runner import RunConfig, run

    folder, clip = st_folder
    rel = f"st:{folder}"
    res = run(RunConfig(model=f"clip:{clip}", dataset=f"custom:{folder_manifest}", out=str(tmp_path / "run"),
                        k=(1, 2, 5), n_boot=10, quiet=True, num_workers=0, protocol="hendriksen2024", relevance=rel,
                        cache_dir=str(tmp_path / "cache")))
    proto = res.results["settings"]["protocol"]
    assert proto["name"] == f"hendriksen2024+relevance={rel}" and proto["relevance"] == rel
    assert res.results["dataset"]["gallery_size"] == 5
    # independent recomputation: evaluated cosines rank the folder gallery, gains are 1 for the positive and
    # the st model's cosine (its own encode) otherwise, discount 1/log2(rank + 1), cut at p
    names = list(IMAGES)  # the test images first, then d, e by name
    images = [Image.open(folder_manifest.parent / "images" / n).convert("RGB") for n in names]
    captions = [c for n in LISTED for c in LISTED[n]]
    ev = load_model(f"clip:{clip}", device="cpu")
    sim = _unit(ev.encode_texts(captions)) @ _unit(ev.encode_images(ev.collate([ev.preprocess(i) for i in images]))).T
    st = SentenceTransformer(str(folder), device="cpu")
    relv = _unit(st.encode(captions)) @ _unit(st.encode(images)).T
    p = res.results["settings"]["p"]
    expected = []
    for q, caption in enumerate(captions):
        pos = q // 2
        order = np.argsort(-sim[q], kind="stable")[:p]
        expected.append(sum((1.0 if j == pos else relv[q, j]) / math.log2(r + 2) for r, j in enumerate(order)))
    np.testing.assert_allclose(res.evaluations["clean"][0].t2i.dcg, expected, rtol=1e-4, atol=1e-5)


def test_relevance_st_problem_is_named_in_its_role_before_any_work(tmp_path):
    from vlbench.pipeline.preflight import check_relevance

    found = check_relevance(f"st:{tmp_path / 'missing'}", "hendriksen2024")
    assert len(found) == 1
    assert found[0].item == f"relevance model 'st:{tmp_path / 'missing'}' (the relevance model given by --relevance (DCG gains))"
    assert "does not exist" in found[0].what and "SentenceTransformer.save" in found[0].fix


def test_st_text_only_model_is_refused_before_loading(tmp_path, monkeypatch, manifest):
    """``st:`` with a text-only sentence-transformers model (the real all-MiniLM-L6-v2 folder) ended in
    sentence-transformers' ValueError after loading; now the preflight and the loader refuse it from its files,
    naming the model and why, before sentence-transformers is asked to load anything."""
    import sentence_transformers

    from vlbench.errors import ModelError
    from vlbench.models.adapter import load_model
    from vlbench.models.st import preflight
    from vlbench.pipeline.runner import run
    from vlbench.sentence import model_dir

    minilm = str(model_dir())
    found = preflight(minilm)
    assert len(found) == 1 and "text-only" in found[0].message and f"st:{minilm}" in found[0].message
    assert "Transformer, Pooling, Normalize" in found[0].message

    def never(*a, **k):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", never)
    with pytest.raises(ModelError, match="text-only"):
        load_model(f"st:{minilm}", device="cpu")
    with pytest.raises(ModelError, match="text-only"):
        run(model=f"st:{minilm}", dataset=f"custom:{manifest}", out=str(tmp_path / "r"), quiet=True, num_workers=0)


def test_st_broken_modules_json_names_the_file(st_folder, tmp_path):
    """A broken modules.json gave a JSONDecodeError naming no file; now a ModelError names it."""
    import shutil

    from vlbench.errors import ModelError
    from vlbench.models.adapter import load_model
    from vlbench.models.st import preflight

    folder = tmp_path / "broken-st"
    shutil.copytree(st_folder[0], folder)
    (folder / "modules.json").write_text('[{"idx": 0, "type": "sentence_transformers.models.CLIPModel",')
    found = preflight(str(folder))
    assert len(found) == 1 and str(folder / "modules.json") in found[0].message and "not valid JSON" in \
        found[0].message
    with pytest.raises(ModelError) as err:
        load_model(f"st:{folder}", device="cpu")
    assert str(folder / "modules.json") in err.value.message and "SentenceTransformer.save" in err.value.hint
    (folder / "modules.json").write_text('{"type": "x"}')
    assert "not a list of modules" in preflight(str(folder))[0].message
    assert preflight(str(st_folder[0])) == []  # the image-text model passes
