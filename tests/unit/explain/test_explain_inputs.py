"""`vlbench explain`: what it refuses (and how it says so), the word diff, the flip sample and fold rows by hand,
and an image corruption rendered again at the run's recorded geometry (a tiny CLIP: 32 x 32)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from support.data import write_manifest
from support.runs import rehash
from vlbench.cli import main


@pytest.fixture(scope="module")
def clip_run(tmp_path_factory, tiny_models):
    root = tmp_path_factory.mktemp("explain-inputs")
    manifest = write_manifest(root / "data", 6, name="m.jsonl")
    out = root / "run"
    assert main(["run", "--model", f"clip:{tiny_models('clip')}", "--dataset", f"custom:{manifest}", "--perturb",
                 "char-swap", "--perturb-images", "gaussian_noise:3", "--out", str(out), "--quiet",
                 "--num-workers", "0", "--bootstrap", "10", "--validity", "off",
                 "--cache-dir", str(root / "cache")]) == 0
    assert (out / "retrieved.npz").is_file()
    return out, manifest, root


def _err(capsys, argv) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err


@pytest.mark.slow  # read a whole run of a tiny CLIP
def test_refusals_name_the_problem_and_the_fix(clip_run, capsys, tmp_path):
    out, manifest, root = clip_run
    err = _err(capsys, ["explain", str(tmp_path)])
    assert "no results.json" in err and "vlbench run --out" in err
    err = _err(capsys, ["explain", str(out), "--per-perturbation", "0"])
    assert "--per-perturbation must be >= 1" in err
    # another dataset than the run's
    other = tmp_path / "other.jsonl"
    other.write_text(manifest.read_text().replace("A ", "The ", 1))
    err = _err(capsys, ["explain", str(out), "--dataset", f"custom:{other}", "--out", str(tmp_path / "x.html")])
    assert "is not the one run" in err and "--dataset" in err
    # a run folder without retrieved.npz
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(out / "results.json", bare / "results.json")
    err = _err(capsys, ["explain", str(bare)])
    assert "has no retrieved.npz" in err and "re-run" in err
    doc = json.loads((out / "results.json").read_text())
    (bare / "results.json").write_text(json.dumps({**doc, "task": {"name": "order"}}))
    err = _err(capsys, ["explain", str(bare)])
    assert "choice-task run (--task order)" in err and "without --task" in err


def _rig_image_flip(out, dst):
    """A copy of the run whose retrieved.npz says image 0 goes hit -> miss under the corruption."""
    shutil.copytree(out, dst)
    z = dict(np.load(out / "retrieved.npz"))
    z["clean|i2t|rank"] = z["clean|i2t|rank"].copy()
    z["clean|i2t|rank"][0] = 1
    z["img:gaussian_noise:3|i2t|rank"] = z["img:gaussian_noise:3|i2t|rank"].copy()
    z["img:gaussian_noise:3|i2t|rank"][0] = 4
    for k in list(z):  # no other flip anywhere
        if k.endswith("i2t|rank") and k != "img:gaussian_noise:3|i2t|rank":
            z[k] = z["clean|i2t|rank"]
    np.savez_compressed(dst / "retrieved.npz", **z)
    rehash(dst)  # the rigged lists, recorded as the run's own
    return dst


@pytest.mark.slow  # read a whole run of a tiny CLIP
def test_images_moved_then_found_with_images_dir(clip_run, capsys, tmp_path):
    out, manifest, root = clip_run
    run = _rig_image_flip(out, tmp_path / "run")
    moved = tmp_path / "moved"
    shutil.copytree(root / "data" / "images", moved / "images")
    shutil.move(str(root / "data" / "images"), str(tmp_path / "away"))
    try:
        err = _err(capsys, ["explain", str(run), "--out", str(tmp_path / "p.html")])
        assert f"not in {root / 'data'}" in err and "--images-dir" in err
        assert main(["explain", str(run), "--out", str(tmp_path / "p.html"), "--images-dir", str(moved)]) == 0
        # or the folder that holds the files themselves: the same page
        assert main(["explain", str(run), "--out", str(tmp_path / "flat.html"), "--images-dir",
                     str(moved / "images")]) == 0
        assert (tmp_path / "flat.html").read_bytes() == (tmp_path / "p.html").read_bytes()
    finally:
        shutil.move(str(tmp_path / "away"), str(root / "data" / "images"))
    text = (tmp_path / "p.html").read_text()
    # the corrupted query image is made at the run's recorded geometry: 32 x 32 (the tiny CLIP's input)
    assert json.loads((out / "results.json").read_text())["conditions"]["img:gaussian_noise:3"]["corrupted_at"] == 32
    import base64
    import io
    import re

    from PIL import Image

    from vlbench.encoding.images import file_key, load_image
    from vlbench.imageperturb import corrupt, fit_to_input

    block = text[text.index('data-condition="img:gaussian_noise:3"'):]
    clean_cls, cls = re.findall(r'class="th (t\d+)"', block)[:2]  # clean, then corrupted

    def embedded(c):
        data = re.search(r"\." + c + r"\{background-image:url\(data:image/jpeg;base64,([^)]+)\)", text).group(1)
        return Image.open(io.BytesIO(base64.b64decode(data)))

    got = np.asarray(embedded(cls).convert("RGB"), np.float64)
    assert embedded(clean_cls).size == (32, 32)  # the clean query image at the same geometry (30 x 24 original)
    path = moved / "images" / "img000.png"
    im = corrupt(fit_to_input(load_image(path), 32), "gaussian_noise", 3, 0, file_key(path))
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=70, optimize=True)  # the page's JPEG settings (docs/explain.md)
    want = np.asarray(Image.open(buf).convert("RGB"), np.float64)
    assert got.shape == want.shape == (32, 32, 3) and np.array_equal(got, want)
    assert 'data-query="0" data-flip="hit-&gt;miss" data-rank-clean="1" data-rank-condition="4"' in block


def test_word_diff_by_hand():
    from vlbench.explain.render import word_diff

    assert word_diff("a red car", "a rde car") == ("a <del>red</del> car", "a <ins>rde</ins> car")
    assert word_diff("a dog <b>", "a dog <b> and true is true") == ("a dog &lt;b&gt;",
                                                                    "a dog &lt;b&gt; <ins>and true is true</ins>")
    assert word_diff("one two three", "three one two") == ("one two <del>three</del>", "<ins>three</ins> one two")


def test_flip_sample_by_hand():
    from vlbench.explain.flips import condition_rng, flip_indices, pick

    r0 = np.array([1, 1, 3, 1, 2, 1, 5])
    r1 = np.array([2, 1, 1, 4, 1, 1, 6])
    hm, mh = flip_indices(r0, r1)
    assert hm.tolist() == [0, 3] and mh.tolist() == [2, 4]
    three = pick(hm, mh, 3, condition_rng(0, "x"))  # both hit -> miss, then one of the two miss -> hit
    assert three[:2] == [(0, "hit->miss"), (3, "hit->miss")] and three[2] in [(2, "miss->hit"), (4, "miss->hit")]
    assert pick(hm, mh, 2, condition_rng(0, "x")) == [(0, "hit->miss"), (3, "hit->miss")]
    one = pick(np.arange(100), mh, 1, condition_rng(7, "char-swap"))
    assert one == pick(np.arange(100), mh, 1, condition_rng(7, "char-swap"))  # the seed and the name fix it
    assert len({pick(np.arange(100), mh, 1, condition_rng(s, "char-swap"))[0] for s in range(10)}) > 1


def test_fold_rows_map_to_dataset_queries():
    from vlbench.datasets.core import Dataset
    from vlbench.explain.source import RunSource

    ds = Dataset("f", [f"i{k}.png" for k in range(4)], [f"c{j}" for j in range(8)],
                 np.array([0, 0, 1, 1, 2, 2, 3, 3]), [f"i{j // 2}#{j % 2}" for j in range(8)],
                 folds=[np.array([2, 3]), np.array([0, 1])])
    src = RunSource(None, {}, {}, ds)
    assert src.query_index("t2i").tolist() == [4, 5, 6, 7, 0, 1, 2, 3]
    assert src.query_index("i2t").tolist() == [2, 3, 0, 1]


def test_recorded_params_rebuild_the_same_perturbation():
    """The authors-compatible variant records its tokenizer rules; rebuilt from the record it is the same object
    (same params, so the same perturbation-cache key as the run's)."""
    from vlbench.explain.source import _constructor_params
    from vlbench.perturbations.engine import instantiate

    for name, given in (("shuffle-trigrams", {"variant": "hendriksen2024"}), ("char-swap", {"edits": 2})):
        made = instantiate(name, given)
        again = instantiate(name, _constructor_params({"params": made.params}))
        assert again.params == made.params
    assert instantiate("shuffle-trigrams", {"variant": "hendriksen2024"}).params["tokenizer"] == "nltk-3.8.1"
