"""Multilingual datasets (Multi30K) and what each built-in model's tokenizer does with non-Latin-1 text."""

from __future__ import annotations

import gzip
import html
import json

import numpy as np
import pytest

from vlbench.datasets import download as dl
from vlbench.datasets.specs import BUILTIN, MULTILINGUAL
from vlbench.datasets.core import load_dataset
from vlbench.models.adapter import load_model
from vlbench.datasets.multilingual import tokenizer_coverage
from vlbench.errors import DataError

LANGS = ("en", "de", "fr", "cs")
# real Multi30K test captions (Czech, German, French), copied so the tokenizer tests need no shared data
SAMPLES = ["Muž v oranžovém klobouku na něco zírá.",
           "Bostonský teriér běží po zářivě zelené trávě před bílým plotem.",
           "Dívka v uniformě na karate, která předním kopem láme dřívko.",
           "Ein Hund läuft auf grünem Rasen vor einem weißen Zaun.",
           "Une fille en uniforme de karaté brisant un bâton avec un coup de pied."]


@pytest.mark.parametrize("lang", LANGS)
def test_multi30k_sets_share_images_and_queries(shared_captions, lang):
    ref = load_dataset("flickr30k", data_dir=shared_captions, require_images=False, download=False)
    ds = load_dataset(f"flickr30k-multi30k-{lang}", data_dir=shared_captions, require_images=False, download=False)
    assert ds.images == ref.images and ds.n_captions == 1000
    assert np.array_equal(ds.caption_to_image, np.arange(1000))
    assert ds.source["language"] == lang and ds.image_root == ref.image_root
    if lang == "en":  # the translated caption is one of the five originals (SOURCES.md: index counts)
        where = [ref.captions[5 * i:5 * i + 5].index(c) for i, c in enumerate(ds.captions)]
        assert np.bincount(where).tolist() == [85, 300, 194, 297, 124]


def test_flickr30k_de_has_five_independent_descriptions(shared_captions):
    ds = load_dataset("flickr30k-de", data_dir=shared_captions, require_images=False, download=False)
    en = load_dataset("flickr30k", data_dir=shared_captions, require_images=False, download=False)
    assert ds.n_images == 1000 and ds.n_captions == 5000 and ds.images == en.images
    assert ds.captions[0] == "Der Mann trägt eine orange Wollmütze." and ds.source["language"] == "de"
    assert sum("ä" in c or "ü" in c or "ö" in c or "ß" in c for c in ds.captions) > 1000


def _fake_multi30k(shared_captions, name):
    """The raw Multi30K files of ``name``, rebuilt from the normalized pack (HTML-escaped and gzipped as
    upstream), keyed by URL: the download recipe must turn them back into the pinned file."""
    spec = BUILTIN[name]
    rows = [json.loads(x) for x in (shared_captions / spec.captions).read_text().splitlines()]
    args = spec.recipe.args
    assert spec.recipe.step == "multi30k"
    files = {args["images"]: "".join(r["image"] + "\n" for r in rows).encode()}
    for j in range(args.get("files", 5)):
        text = "".join(html.escape(r["captions"][j], quote=False) + " \n" for r in rows)
        files[args["captions"].format(j=j + 1)] = gzip.compress(text.encode("utf-8"))
    return files


@pytest.mark.parametrize("name", sorted(s.name for s in MULTILINGUAL))
def test_download_recipe_rebuilds_the_pinned_file(shared_captions, tmp_path, monkeypatch, name):
    files = _fake_multi30k(shared_captions, name)
    monkeypatch.delenv("VLBENCH_OFFLINE", raising=False)
    monkeypatch.setattr(dl, "http_get", lambda url, timeout=60.0, **_: files[url])
    path = dl.fetch_captions(name, tmp_path)
    assert path == tmp_path / BUILTIN[name].captions
    assert path.read_bytes() == (shared_captions / BUILTIN[name].captions).read_bytes()
    assert all("/a3d2e0d26b56f3846f66a952536ffed4e401d05a/" in u for u in files)


def test_missing_multilingual_captions_offline_say_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("VLBENCH_OFFLINE", "1")
    with pytest.raises(DataError) as err:
        load_dataset("flickr30k-multi30k-cs", data_dir=tmp_path, require_images=False)
    assert "flickr30k_multi30k_cs_test.jsonl" in str(err.value)
    assert "vlbench download flickr30k-multi30k-cs" in str(err.value)


FAMILIES = ["clip", "align", "altclip", "groupvit", "openclip"]


@pytest.fixture(scope="module")
def adapters(tiny_models):
    return {f: load_model(f"{f}:{tiny_models(f)}", device="cpu") for f in FAMILIES}


def _limit(a):
    return getattr(a, "max_length", None) or a.context_length


@pytest.mark.slow  # loads a tiny model of every family (~2 s CPU for the module's model tests)
@pytest.mark.parametrize("family", FAMILIES)
def test_non_latin1_text_is_encoded_and_truncated_by_tokens(adapters, family):
    a = adapters[family]
    emb = np.asarray(a.encode_texts(SAMPLES).float())
    assert emb.shape[0] == len(SAMPLES) and np.isfinite(emb).all()
    long = " ".join([SAMPLES[0]] * 40)  # far beyond every model's token limit
    ids = [int(x) for x in a.text_keys([long])[0].split()]
    assert len(ids) == _limit(a)
    full = [int(x) for x in a.text_keys([SAMPLES[0]])[0].split()]
    assert ids[-1] == full[-1]  # the end token survives truncation (the model pools there)
    # what lies beyond the limit does not reach the model: same key, so the runner encodes it once
    assert a.text_keys([long + " Další slova."]) == a.text_keys([long])
    cov = tokenizer_coverage(a, SAMPLES + [long])
    assert cov["max_tokens"] == _limit(a)
    # the tiny AltCLIP's 400-piece vocabulary spells Czech out letter by letter: one sample is cut too
    assert cov["truncated"] == pytest.approx((2 if family == "altclip" else 1) / 6)


@pytest.mark.slow  # the same five tiny models
@pytest.mark.parametrize("family", FAMILIES)
def test_diacritics_reach_the_model_except_with_an_uncased_bert(adapters, family):
    a = adapters[family]
    same = a.text_keys(["Muž řeže dřevo."]) == a.text_keys(["Muz reze drevo."])
    cov = tokenizer_coverage(a, SAMPLES)
    assert cov["texts_with_diacritics"] == 5
    if family == "align":  # BERT-uncased (ALIGN's tokenizer) strips accents: Czech loses its diacritics
        assert same and cov["folds_diacritics"] == 1.0
    else:
        assert not same and cov["folds_diacritics"] == 0.0
    if family in ("clip", "groupvit", "openclip"):  # byte-level BPE: never an unknown token
        assert cov["unk_rate"] == 0.0
