"""vlbench.testing.check_adapter: the built-in families pass on tiny models built through their real classes
(tests/tiny_models.py; slow: torch and transformers load); a toy adapter passes, and one that breaks a clause fails
it, and the error names the adapter and the clause."""

from __future__ import annotations

import hashlib
import time

import numpy as np
import pytest
from support import tiny_models
from support.conformance import fails_clause

from vlbench import ModelAdapter
from vlbench.testing import ConformanceError, check_adapter

DIM = 8


class Toy(ModelAdapter):
    """Image: its mean colour and spread; text: a hashed bag of words (numpy only, no torch)."""

    name = "toy"

    def identity(self):
        return {"adapter": "toy", "embed_dim": DIM}

    def preprocess(self, image):
        x = np.asarray(image.resize((8, 8)), dtype=np.float64) / 255.0
        return np.concatenate([x.mean(axis=(0, 1)), x.std(axis=(0, 1)), [x.max(), 1.0]])

    def collate(self, items):
        return np.stack(items)

    def encode_images(self, batch):
        return np.asarray(batch, dtype=np.float32)

    def encode_texts(self, texts):
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split()[:50]:  # the model sees 50 words: text_keys say so
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % DIM] += 1.0
            out[i, 0] += 0.5
        return out

    def text_keys(self, texts):
        return [" ".join(t.lower().split()[:50]) for t in texts]


def test_a_toy_adapter_passes():
    report = check_adapter(Toy())
    assert report.plugin == "Toy" and len(report.passed) == 15 and not report.skipped


def _variant(**methods):
    """A Toy with some methods replaced, as a module-level class (picklable like any plug-in's adapter)."""
    name = f"Broken{len([k for k in globals() if k.startswith('Broken')])}"
    cls = globals()[name] = type(name, (Toy,), {"__module__": __name__, **methods})
    return cls()


def _unpicklable():
    toy = Toy()
    toy.preprocess = lambda image: Toy.preprocess(toy, image)  # a closure: DataLoader workers cannot receive it
    return toy


BROKEN = [  # (the clause it breaks, how, the adapter)
    ("protocol", "not-an-adapter", object()),
    ("identity", "not-json", _variant(identity=lambda s: {"adapter": "toy", "dtype": np.float32})),
    ("identity", "changes", _variant(identity=lambda s: {"adapter": "toy", "loaded": time.perf_counter()})),
    ("identity", "wrong-embed-dim-type", _variant(identity=lambda s: {"adapter": "toy", "embed_dim": "8"})),
    ("one embedding space", "wrong-embed-dim", _variant(identity=lambda s: {"adapter": "toy", "embed_dim": 4})),
    ("encode_images", "one-dimensional", _variant(encode_images=lambda s, b: np.asarray(b).ravel())),
    ("encode_images", "nan", _variant(encode_images=lambda s, b: np.full((len(b), DIM), np.nan))),
    ("encode_texts", "one-row-too-many", _variant(encode_texts=lambda s, t: Toy.encode_texts(s, list(t) + ["x"]))),
    ("encode_texts", "zero-vector-for-empty-caption",
     _variant(encode_texts=lambda s, t: Toy.encode_texts(s, t) * np.asarray([[bool(x)] for x in t]))),
    ("image determinism", "random", _variant(encode_images=lambda s, b: b + np.random.rand(*np.shape(b)))),
    ("image batch independence", "batch-centred", _variant(encode_images=lambda s, b: b - b.mean(axis=0) + 1)),
    ("batch slicing", "collate-gives-a-dict", _variant(collate=lambda s, items: {"pixels": np.stack(items)},
                                                       encode_images=lambda s, b: b["pixels"])),
    ("preprocess picklable", "closure", _unpicklable()),
    ("text keys name the vector", "keys-collide", _variant(text_keys=lambda s, t: [x[:1] for x in t])),
    ("text_keys and text_lengths", "lengths-missing", _variant(text_lengths=lambda s, t: [1])),
    ("text batch independence", "padding-leaks", _variant(encode_texts=lambda s, t: Toy.encode_texts(s, t) + len(t))),
    ("one embedding space", "text-size-differs", _variant(encode_texts=lambda s, t: Toy.encode_texts(s, t)[:, :6])),
    ("empty text list", "a-row-for-nothing", _variant(encode_texts=lambda s, t: Toy.encode_texts(s, t or ["x"]))),
]


@pytest.mark.parametrize("clause, adapter", [(c, a) for c, _, a in BROKEN], ids=[how for _, how, _ in BROKEN])
def test_a_broken_adapter_fails_the_clause_it_breaks(clause, adapter):
    fails_clause(check_adapter, adapter, "model adapter", clause)


def test_an_adapter_may_refuse_an_empty_text_list():
    report = check_adapter(_variant(encode_texts=lambda s, t: Toy.encode_texts(s, t) if t else [][0]))
    assert report.skipped["empty text list"].startswith("refused with IndexError")


FAMILIES = sorted(tiny_models.SAVERS)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_every_builtin_family_passes_on_a_tiny_model(family, tiny_models):
    # the saver's family is the name before any variant suffix (openclip_*, clip_wide: a CLIP with wide layers)
    name = "openclip" if family.startswith("openclip") else family.split("_")[0]
    report = check_adapter(f"{name}:{tiny_models(family)}")
    assert "text batch independence" in report.passed and "one embedding space" in report.passed


@pytest.mark.slow
@pytest.mark.parametrize("family, kind", [("siglip", "siglip"), ("siglip2", "siglip2-fixed"),
                                          ("siglip2", "siglip2-naflex")])
def test_the_siglip_families_pass_on_a_tiny_model(family, kind, tmp_path):
    from support.tiny_siglip import SAVERS

    assert "text batch independence" in check_adapter(f"{family}:{SAVERS[kind](tmp_path / kind)}").passed


@pytest.mark.slow
def test_the_st_family_passes_on_a_tiny_model(tiny_models, tmp_path):
    import warnings

    import sentence_transformers as st

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its CLIPModel module is deprecated in favour of Transformer
        from sentence_transformers.models import CLIPModel

        st.SentenceTransformer(modules=[CLIPModel(str(tiny_models("clip")))], device="cpu").save(str(tmp_path / "st"))
    assert "text batch independence" in check_adapter(f"st:{tmp_path / 'st'}").passed


@pytest.mark.slow  # load_model imports torch (to pick the device)
def test_a_spec_is_loaded_as_a_run_loads_it_and_a_failing_loader_fails_the_protocol(counting_plugin):
    assert check_adapter("counting:dim=8").plugin == "counting:dim=8"
    with pytest.raises(ConformanceError) as err:
        check_adapter("counting:fail")
    assert err.value.check == "protocol" and "broken on purpose" in err.value.found
