"""Multi-vector models (ColQwen2) in `vlbench run`: a tiny random-weight ColQwen2ForRetrieval of the real class,
scored by MaxSim; the run's metrics equal an independent loop over the model's own forward, scored with the
processor's score_retrieval and ranked with the suite's tie rule; the cache; the memory refusal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.data import write_manifest
from support.tiny_colmodels import PIXELS, save_colpali, save_colqwen2

from vlbench.errors import VlbenchError
from vlbench.metrics.scan.maxsim import TokenVectors, maxsim_matrix
from vlbench.pipeline.runner import run

N_IMAGES = 6


@pytest.fixture(scope="module")
def colqwen2(tmp_path_factory) -> Path:
    return save_colqwen2(tmp_path_factory.mktemp("colqwen2") / "ckpt")


@pytest.fixture(scope="module")
def colpali(tmp_path_factory) -> Path:
    return save_colpali(tmp_path_factory.mktemp("colpali") / "ckpt")


@pytest.fixture(scope="module")
def manifest(tmp_path_factory) -> Path:
    return write_manifest(tmp_path_factory.mktemp("mvdata"), n=N_IMAGES)


def _reference_scores(ckpt: Path, manifest: Path, family: str = "colqwen2"):
    """(captions x images score_retrieval scores, caption -> image): the model card's loop, one input at a time."""
    import json

    import torch
    import transformers
    from PIL import Image

    name = {"colqwen2": "ColQwen2", "colpali": "ColPali"}[family]
    model = getattr(transformers, f"{name}ForRetrieval").from_pretrained(ckpt).eval()
    proc = getattr(transformers, f"{name}Processor").from_pretrained(ckpt)
    rows = [json.loads(x) for x in manifest.read_text().splitlines()]
    caps = [(c, i) for i, r in enumerate(rows) for c in r["captions"]]
    with torch.no_grad():
        imgs = [model(**proc.process_images([Image.open(manifest.parent / r["image"]).convert("RGB")])).embeddings[0]
                for r in rows]
        qs = [model(**proc.process_queries([c])).embeddings[0] for c, _ in caps]
    return proc.score_retrieval(qs, imgs).numpy(), np.array([i for _, i in caps]), imgs, qs


def _ranks(scores: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """1-based rank of each row's positive column: higher scores first, equal scores by lower index first."""
    s_pos = scores[np.arange(len(scores)), positive]
    above = (scores > s_pos[:, None]).sum(1)
    tied_before = ((scores == s_pos[:, None]) & (np.arange(scores.shape[1]) < positive[:, None])).sum(1)
    return 1 + above + tied_before


def _values(res, condition="clean") -> dict:
    return {(v.key.direction, v.key.metric, v.key.k): v.value for v in res.record.values if v.condition == condition}


@pytest.mark.parametrize("family", ["colqwen2", "colpali"])
def test_multivector_run_equals_score_retrieval_loop(family, request, manifest, tmp_path):
    ckpt = request.getfixturevalue(family)
    res = run(model=f"{family}:{ckpt}", dataset=f"custom:{manifest}", out=str(tmp_path / "out"),
              cache_dir=str(tmp_path / "cache"), quiet=True, validity="off", k=(1, 2, 5))
    scores, c2i, _, _ = _reference_scores(ckpt, manifest, family)
    t2i = _ranks(scores, c2i)
    i2t_all = _ranks(scores.T[np.repeat(np.arange(N_IMAGES), 5)], np.arange(len(c2i)))  # each (image, caption)
    i2t = np.array([i2t_all[c2i == i].min() for i in range(N_IMAGES)])  # an image's best-ranked caption
    got = _values(res)
    for k in (1, 2, 5):
        assert got[("t2i", "recall", k)] == pytest.approx(100 * np.mean(t2i <= k), abs=1e-9)
        assert got[("i2t", "recall", k)] == pytest.approx(100 * np.mean(i2t <= k), abs=1e-9)
    assert got[("t2i", "medr", None)] == pytest.approx(np.median(t2i))
    assert got[("t2i", "meanr", None)] == pytest.approx(np.mean(t2i))
    assert res.record.model.fields["identity"]["vectors"].startswith("multi")


def test_colqwen2_maxsim_equals_score_retrieval_values(colqwen2, manifest):
    scores, _, imgs, qs = _reference_scores(colqwen2, manifest)
    mine = maxsim_matrix(TokenVectors.from_items([x.numpy() for x in imgs]),
                         TokenVectors.from_items([x.numpy() for x in qs]))
    np.testing.assert_allclose(mine.T, scores, rtol=1e-5, atol=1e-5)  # i2t is this matrix, t2i its transpose


def test_colqwen2_token_vectors_cached_by_content(colqwen2, manifest, tmp_path):
    kw = dict(model=f"colqwen2:{colqwen2}", dataset=f"custom:{manifest}", cache_dir=str(tmp_path / "cache"),
              quiet=True, validity="off")
    first = run(out=str(tmp_path / "a"), **kw)
    again = run(out=str(tmp_path / "b"), perturb="shuffle-all-words", **kw)
    enc = again.record.other["encoding"]
    assert first.record.other["encoding"]["images_encoded"] == N_IMAGES
    assert (enc["images_encoded"], enc["images_cached"]) == (0, N_IMAGES)
    assert enc["texts_cached"] == 5 * N_IMAGES  # the clean captions: from the store
    assert enc["texts_encoded"] == enc["texts_distinct"] - 5 * N_IMAGES  # only the changed captions
    assert _values(again) == _values(first)


def test_colqwen2_run_over_token_memory_refused_before_encoding(colqwen2, manifest, tmp_path):
    with pytest.raises(VlbenchError, match=r"MiB per image.*above the budget of 1e-06 GiB") as err:
        run(model=f"colqwen2:{colqwen2}", dataset=f"custom:{manifest}", out=str(tmp_path / "out"),
            cache_dir=str(tmp_path / "cache"), quiet=True, validity="off", token_memory=1e-6)
    assert "--token-memory" in err.value.hint and "max_pixels" in err.value.hint
    assert not (tmp_path / "cache" / "token-vectors").exists()  # nothing was encoded


def test_colqwen2_resolution_in_identity(colqwen2, tmp_path):
    from vlbench.models.adapter import load_model

    other = save_colqwen2(tmp_path / "wide", max_pixels=4 * PIXELS)
    a, b = load_model(f"colqwen2:{colqwen2}"), load_model(f"colqwen2:{other}")
    assert a.image_resolution()["max_pixels"] == PIXELS and b.image_resolution()["max_pixels"] == 4 * PIXELS
    assert a.identity()["preprocessing"] != b.identity()["preprocessing"] and a.model_hash() != b.model_hash()


def test_token_memory_on_a_single_vector_model_refused(counting_plugin, manifest, tmp_path):
    with pytest.raises(VlbenchError, match="--token-memory applies to multi-vector models"):
        run(model=f"{counting_plugin}:dim=8", dataset=f"custom:{manifest}", out=str(tmp_path / "out"),
            cache_dir=str(tmp_path / "cache"), quiet=True, validity="off", token_memory=4)
