"""Image corruptions (--perturb-images) and gallery distractors (--distractors) with a multi-vector model: a tiny
random-weight ColQwen2ForRetrieval of the real class; each corrupted gallery and the injected items encoded as
token vectors and scored by MaxSim. The run's metrics, flips and false rates equal an independent loop: the images
corrupted by the suite's own corruption function, the model card's forward per input, the processor's
score_retrieval, the suite's tie rule (injected candidates after the real ones); the token store keeps each
corrupted image; the memory check counts the extra galleries."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from support.data import write_images, write_manifest
from support.tiny_colmodels import save_colqwen2

from vlbench.encoding.images import file_key
from vlbench.errors import VlbenchError
from vlbench.imageperturb.apply import corrupt
from vlbench.pipeline.runner import run

N_IMAGES = 6
CONDITION = "img:gaussian_noise:5"


@pytest.fixture(scope="module")
def colqwen2(tmp_path_factory) -> Path:
    return save_colqwen2(tmp_path_factory.mktemp("mvcond") / "ckpt")


@pytest.fixture(scope="module")
def manifest(tmp_path_factory) -> Path:
    return write_manifest(tmp_path_factory.mktemp("mvconddata"), n=N_IMAGES)


def _loop_scores(ckpt: Path, manifest: Path, corruption: tuple | None, seed: int = 0, more_images: tuple = (),
                 more_captions: tuple = ()) -> tuple:
    """(captions x images score_retrieval scores, caption -> image), one forward per input as the model card shows;
    ``corruption``: (name, severity) applied to every image by vlbench's corrupt() at the image's own size
    (its image id: the file's content hash, as the run keys it); ``more_images`` / ``more_captions``: injected
    items, scored after the dataset's (columns / rows past the real ones)."""
    import torch
    from PIL import Image
    from transformers import ColQwen2ForRetrieval, ColQwen2Processor

    model = ColQwen2ForRetrieval.from_pretrained(ckpt).eval()
    proc = ColQwen2Processor.from_pretrained(ckpt)
    rows = [json.loads(x) for x in manifest.read_text().splitlines()]
    caps = [(c, i) for i, r in enumerate(rows) for c in r["captions"]]
    imgs = []
    with torch.no_grad():
        for r in rows:
            path = manifest.parent / r["image"]
            image = Image.open(path).convert("RGB")
            if corruption is not None:
                image = corrupt(image, corruption[0], corruption[1], seed, file_key(path))
            imgs.append(model(**proc.process_images([image])).embeddings[0])
        imgs += [model(**proc.process_images([Image.open(p).convert("RGB")])).embeddings[0] for p in more_images]
        qs = [model(**proc.process_queries([c])).embeddings[0] for c, _ in caps]
        qs += [model(**proc.process_queries([c])).embeddings[0] for c in more_captions]
    return proc.score_retrieval(qs, imgs).numpy(), np.array([i for _, i in caps])


def _ranks(scores: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """1-based rank of each row's positive column: higher scores first, equal scores by lower index first."""
    s_pos = scores[np.arange(len(scores)), positive]
    above = (scores > s_pos[:, None]).sum(1)
    tied_before = ((scores == s_pos[:, None]) & (np.arange(scores.shape[1]) < positive[:, None])).sum(1)
    return 1 + above + tied_before


def _loop_ranks(scores: np.ndarray, c2i: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(t2i rank of each caption's image, i2t rank of each image's best-ranked caption)."""
    t2i = _ranks(scores, c2i)
    i2t_all = _ranks(scores.T[c2i], np.arange(len(c2i)))  # each (image, caption) pair: the caption among all
    return t2i, np.array([i2t_all[c2i == i].min() for i in range(scores.shape[1])])


def _values(res, condition: str) -> dict:
    return {(v.key.direction, v.key.metric, v.key.k): v.value for v in res.record.values if v.condition == condition}


def test_colqwen2_image_corruption_equals_loop_on_corrupted_images(colqwen2, manifest, tmp_path):
    res = run(model=f"colqwen2:{colqwen2}", dataset=f"custom:{manifest}", out=str(tmp_path / "out"),
              cache_dir=str(tmp_path / "cache"), quiet=True, validity="off", k=(1, 2, 5),
              perturb_images="gaussian_noise:5")
    clean_scores, c2i = _loop_scores(colqwen2, manifest, None)
    bad_scores, _ = _loop_scores(colqwen2, manifest, ("gaussian_noise", 5))
    assert not np.allclose(clean_scores, bad_scores)  # the corruption changes the scores: the test can fail
    for cond, scores in (("clean", clean_scores), (CONDITION, bad_scores)):
        t2i, i2t = _loop_ranks(scores, c2i)
        got = _values(res, cond)
        for k in (1, 2, 5):
            assert got[("t2i", "recall", k)] == pytest.approx(100 * np.mean(t2i <= k), abs=1e-9), (cond, k)
            assert got[("i2t", "recall", k)] == pytest.approx(100 * np.mean(i2t <= k), abs=1e-9), (cond, k)
        assert got[("t2i", "meanr", None)] == pytest.approx(np.mean(t2i))
        assert got[("i2t", "meanr", None)] == pytest.approx(np.mean(i2t))
    meta = res.record.conditions[CONDITION].meta
    assert meta["corrupted_at"] == "original size"  # the model's input is not a fixed square: as the CPU path does
    assert res.record.other["encoding"]["images_encoded"] == 2 * N_IMAGES  # clean and corrupted, each once


def test_colqwen2_image_corruption_flips_equal_loop(colqwen2, manifest, tmp_path):
    res = run(model=f"colqwen2:{colqwen2}", dataset=f"custom:{manifest}", out=str(tmp_path / "out"),
              cache_dir=str(tmp_path / "cache"), quiet=True, validity="off", k=(1, 5),
              perturb_images="gaussian_noise:5")
    clean_scores, c2i = _loop_scores(colqwen2, manifest, None)
    bad_scores, _ = _loop_scores(colqwen2, manifest, ("gaussian_noise", 5))
    clean_t2i, bad_t2i = _ranks(clean_scores, c2i), _ranks(bad_scores, c2i)
    assert (clean_t2i != bad_t2i).any()  # the corruption moves ranks: flips that could be miscounted
    with open(Path(res.out_dir) / "flips.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["condition"] == CONDITION and r["direction"] == "t2i"]
    assert rows, "flips.csv has no t2i rows for the corruption"
    for r in rows:
        k = int(r["k"])
        assert int(r["hit_to_miss"]) == int(((clean_t2i <= k) & (bad_t2i > k)).sum()), r
        assert int(r["miss_to_hit"]) == int(((clean_t2i > k) & (bad_t2i <= k)).sum()), r


def test_colqwen2_corrupted_token_vectors_cached_by_content_and_condition(colqwen2, manifest, tmp_path):
    kw = dict(model=f"colqwen2:{colqwen2}", dataset=f"custom:{manifest}", cache_dir=str(tmp_path / "cache"),
              quiet=True, validity="off")
    first = run(out=str(tmp_path / "a"), perturb_images="gaussian_noise:5", **kw)
    again = run(out=str(tmp_path / "b"), perturb_images="gaussian_noise:5,gaussian_noise:1", **kw)
    enc = again.record.other["encoding"]
    assert (enc["images_encoded"], enc["images_cached"]) == (N_IMAGES, 2 * N_IMAGES)  # only the new severity
    assert _values(again, CONDITION) == _values(first, CONDITION)
    assert set(again.record.conditions) >= {"clean", CONDITION, "img:gaussian_noise:1"}
    assert set(_values(again, "img:gaussian_noise:1")) == set(_values(again, CONDITION))  # scored like the other


def test_colqwen2_token_memory_counts_corrupted_galleries(colqwen2, manifest, tmp_path):
    from vlbench.encoding.multivector import check_memory

    one = check_memory(N_IMAGES, 10, [8] * 30, 16, 1.0, "m")
    three = check_memory(N_IMAGES, 10, [8] * 30, 16, 1.0, "m", galleries=3)
    assert three["images"] == 3 * one["images"] == 3 * N_IMAGES * 10 * 16 * 4
    assert three["total"] - one["total"] == 2 * one["images"]
    with pytest.raises(VlbenchError, match=r"in 3 galleries \(clean and 2 image condition"):
        run(model=f"colqwen2:{colqwen2}", dataset=f"custom:{manifest}", out=str(tmp_path / "out"),
            cache_dir=str(tmp_path / "cache"), quiet=True, validity="off", token_memory=1e-6,
            perturb_images="gaussian_noise:1,gaussian_noise:5")
    assert not (tmp_path / "cache" / "token-vectors").exists()  # refused before anything was encoded


def test_colqwen2_distractors_equal_loop_over_the_wider_gallery(colqwen2, manifest, tmp_path):
    write_images(tmp_path / "neg", 3, seed=7)
    caps = tmp_path / "adv.txt"
    caps.write_text("a dog runs on the grass\ntwo people sit on a bench\na red car\n")
    res = run(model=f"colqwen2:{colqwen2}", dataset=f"custom:{manifest}", out=str(tmp_path / "out"),
              cache_dir=str(tmp_path / "cache"), quiet=True, validity="off", k=(1, 2, 5),
              distractors=f"images:{tmp_path / 'neg'},captions:{caps}")
    (name,) = [c for c in res.record.conditions if c.startswith("distractors:")]
    more_i = tuple(sorted((tmp_path / "neg").iterdir()))
    more_c = tuple(caps.read_text().splitlines())
    clean, c2i = _loop_scores(colqwen2, manifest, None)
    wide, _ = _loop_scores(colqwen2, manifest, None, more_images=more_i, more_captions=more_c)
    n_cap = len(c2i)
    t2i_clean, i2t_clean = _loop_ranks(clean, c2i)
    t2i = _ranks(wide[:n_cap], c2i)  # caption queries rank the real images, then the injected ones
    i2t_all = _ranks(wide.T[:N_IMAGES][c2i], np.arange(n_cap))  # image queries rank real, then injected captions
    i2t = np.array([i2t_all[c2i == i].min() for i in range(N_IMAGES)])
    assert (t2i > t2i_clean).any() or (i2t > i2t_clean).any()  # the distractors move ranks: a rate that can fail
    got = _values(res, name)
    for d, ranks, base in (("t2i", t2i, t2i_clean), ("i2t", i2t, i2t_clean)):
        for k in (1, 2, 5):
            assert got[(d, "recall", k)] == pytest.approx(100 * np.mean(ranks <= k), abs=1e-9), (d, k)
        assert got[(d, "false_rate", None)] == pytest.approx(100 * np.mean(ranks > base), abs=1e-9), d
    enc = res.record.other["encoding"]
    assert enc["images_encoded"] == N_IMAGES + 3 and enc["texts_encoded"] == n_cap + 3


@pytest.mark.parametrize("option, value, what", [("shortcuts", "matched", "shortcut probes"),
                                                 ("probes", "sensitivity", "meaning-changing probes")])
def test_colqwen2_with_probes_refused_before_encoding(colqwen2, manifest, tmp_path, option, value, what):
    with pytest.raises(VlbenchError, match=f"cannot run with {what}") as err:
        run(model=f"colqwen2:{colqwen2}", dataset=f"custom:{manifest}", out=str(tmp_path / "out"),
            cache_dir=str(tmp_path / "cache"), quiet=True, validity="off", **{option: value})
    assert "--distractors" in err.value.hint
    assert not (tmp_path / "cache" / "token-vectors").exists()


def test_colqwen2_corruptions_on_the_device_refused_before_encoding(colqwen2, manifest, tmp_path):
    with pytest.raises(VlbenchError, match="cannot be corrupted on the device") as err:
        run(model=f"colqwen2:{colqwen2}", dataset=f"custom:{manifest}", out=str(tmp_path / "out"),
            cache_dir=str(tmp_path / "cache"), quiet=True, validity="off", pixels="device",
            perturb_images="gaussian_noise:1", corrupt_backend="torch")
    assert "drop --pixels device" in err.value.hint
    assert not (tmp_path / "cache" / "token-vectors").exists()
