"""`vlbench run --perturb-images` / `--shortcuts`: conditions, both directions, deltas and CIs, caching,
byte-identical corrupted images across runs and worker counts, mCE against a reference run."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.data import corrupted_image_hashes, pixels_bytes, read_counts

from vlbench.cli import main
from vlbench.imageperturb import NAMES

DIRS = ("i2t", "t2i", "both")


def _r1_by_hand(img: np.ndarray, txt: np.ndarray, c2i: np.ndarray) -> tuple[float, float]:
    """R@1 per direction from embeddings: cosine, ties to the lower index (as vlbench documents)."""
    img = img / np.linalg.norm(img, axis=1, keepdims=True)
    txt = txt / np.linalg.norm(txt, axis=1, keepdims=True)
    s = img @ txt.T
    i2t = np.mean([c2i[int(np.argmax(s[i]))] == i for i in range(len(img))]) * 100
    t2i = np.mean([int(np.argmax(s[:, j])) == c2i[j] for j in range(len(txt))]) * 100
    return float(i2t), float(t2i)


def test_all_corruptions_and_a_caption_perturbation_in_one_run(tiny_models, manifest, tmp_path):
    out = tmp_path / "run"
    spec = f"clip:{tiny_models('clip')}"
    assert main(["run", "--model", spec, "--dataset", f"custom:{manifest}", "--perturb-images", "all:3",
                 "--perturb", "char-swap", "--out", str(out), "--quiet", "--num-workers", "0",
                 "--bootstrap", "200"]) == 0
    doc = json.loads((out / "results.json").read_text())
    image_conds = [f"img:{n}:3" for n in NAMES]
    assert set(doc["conditions"]) == {"clean", "char-swap", *image_conds} and len(doc["conditions"]) == 17
    for c in doc["conditions"]:
        assert {r["direction"] for r in doc["results"] if r["condition"] == c} == set(DIRS)
    for c in ["char-swap", *image_conds]:
        boots = {b["direction"]: b for b in doc["bootstrap"] if b["condition"] == c}
        assert set(boots) == set(DIRS) and all(b["ci_low"] <= b["delta"] <= b["ci_high"] for b in boots.values())
        assert any(d["condition"] == c and d["metric"] == "rsum" for d in doc["deltas"])
    meta = doc["conditions"]["img:gaussian_noise:3"]
    assert meta["kind"] == "image" and meta["severity"] == 3 and meta["corruption_family"] == "noise"
    assert doc["encoding"]["images_encoded"] == 12 * 16  # clean + 15 corrupted sets, each image once
    # an image condition's numbers equal R@1 computed by hand from independently corrupted images
    import torch

    from vlbench.datasets.core import load_dataset
    from vlbench.encoding.encode import file_key, load_image
    from vlbench.imageperturb import corrupt, fit_to_input
    from vlbench.models.adapter import load_model

    ds, model = load_dataset(f"custom:{manifest}"), load_model(spec, device="cpu")
    txt = np.asarray(model.encode_texts(ds.captions).float())
    assert meta["corrupted_at"] == 32  # the tiny model's input size: ImageNet-C geometry
    for name in ("gaussian_noise", "contrast", "zoom_blur"):
        ims = [corrupt(fit_to_input(load_image(ds.image_path(i)), 32), name, 3, 0, file_key(ds.image_path(i)))
               for i in range(ds.n_images)]
        img = np.asarray(model.encode_images(torch.stack([model.preprocess(im) for im in ims])).float())
        got = {r["direction"]: r["value"] for r in doc["results"]
               if r["condition"] == f"img:{name}:3" and r["metric"] == "recall" and r["k"] == 1}
        assert (got["i2t"], got["t2i"]) == pytest.approx(_r1_by_hand(img, txt, ds.caption_to_image), abs=1e-9)
    mce = doc["image_corruptions"]["directions"]
    r1 = {(r["condition"], r["direction"]): r["value"] for r in doc["results"] if r["metric"] == "recall" and r["k"] == 1}
    for d in ("i2t", "t2i"):  # no reference: mCE = mean over corruptions of (100 - R@1)
        assert mce[d]["mce"] == pytest.approx(np.mean([100 - r1[(c, d)] for c in image_conds]))
    assert "img:fog:3" in (out / "table.md").read_text()


def test_second_run_encodes_nothing(counting_plugin, manifest, tmp_path, monkeypatch):
    counts = tmp_path / "counts.jsonl"
    monkeypatch.setenv("VLBENCH_COUNT_FILE", str(counts))
    args = ["run", "--model", "counting", "--dataset", f"custom:{manifest}", "--perturb-images",
            "gaussian_noise:1-2,pixelate:3", "--perturb", "char-swap", "--quiet", "--num-workers", "0",
            "--cache-dir", str(tmp_path / "cache"), "--bootstrap", "20"]
    assert main(args + ["--out", str(tmp_path / "a")]) == 0
    first = read_counts(counts)
    assert first["images"] == 12 * 4
    assert main(args + ["--out", str(tmp_path / "b")]) == 0
    assert read_counts(counts) == first  # the warm run encoded nothing
    a, b = (json.loads((tmp_path / x / "results.json").read_text()) for x in ("a", "b"))
    assert b["encoding"]["images_encoded"] == 0 and b["results"] == a["results"]
    # another seed corrupts differently: new cache keys, encoded again
    assert main(args + ["--out", str(tmp_path / "c"), "--seed", "1"]) == 0
    assert read_counts(counts)["images"] == first["images"] + 12 * 3




@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("at", ["original", "input"])
def test_corrupted_images_are_byte_identical_across_runs_and_workers(manifest, workers, at):
    import hashlib

    from vlbench.datasets.core import load_dataset
    from vlbench.encoding.encode import load_image
    from vlbench.imageperturb import CorruptedLoader
    from vlbench.imageperturb.conditions import CorruptionTransform

    ds = load_dataset(f"custom:{manifest}")
    names = ("gaussian_noise", "glass_blur", "frost", "elastic_transform")
    transforms = [CorruptionTransform(n, 3, 7, at) for n in names]
    jobs, got = corrupted_image_hashes(ds, transforms, workers)  # image-major, as the encoder orders its jobs
    # the reference: the module's CorruptedLoader, one image at a time, decoded afresh
    size = 32 if at == "input" else None
    ref = [hashlib.sha256(pixels_bytes(CorruptedLoader(t.name, 3, 7, input_size=size)(load_image(p), c))).hexdigest()
           for p, i, c, t in jobs]
    assert got == ref
    assert len(set(got)) == len(got)  # every (corruption, image) differs
    assert {t.loader.cache_key.endswith(":at32") for t in transforms} == {at == "input"}


def test_mce_relative_to_a_reference_run(tiny_models, manifest, tmp_path):
    common = ["--dataset", f"custom:{manifest}", "--perturb-images", "gaussian_noise:1-2,contrast:4", "--quiet",
              "--num-workers", "0", "--bootstrap", "20"]
    assert main(["run", "--model", f"clip:{tiny_models('clip', 1)}", "--out", str(tmp_path / "ref")] + common) == 0
    assert main(["run", "--model", f"clip:{tiny_models('clip')}", "--out", str(tmp_path / "m"),
                 "--mce-reference", str(tmp_path / "ref")] + common) == 0
    ref, doc = (json.loads((tmp_path / x / "results.json").read_text()) for x in ("ref", "m"))

    def err(d, c, direction):
        return 100 - next(r["value"] for r in d["results"] if r["condition"] == c and r["direction"] == direction
                          and r["metric"] == "recall" and r["k"] == 1)

    for direction in ("i2t", "t2i"):
        ce_g = (err(doc, "img:gaussian_noise:1", direction) + err(doc, "img:gaussian_noise:2", direction)) / \
               (err(ref, "img:gaussian_noise:1", direction) + err(ref, "img:gaussian_noise:2", direction))
        ce_c = err(doc, "img:contrast:4", direction) / err(ref, "img:contrast:4", direction)
        got = doc["image_corruptions"]["directions"][direction]
        assert got["ce"] == pytest.approx({"gaussian_noise": ce_g, "contrast": ce_c})
        assert got["mce"] == pytest.approx((ce_g + ce_c) / 2)
    assert doc["image_corruptions"]["reference"]["run_id"] == ref["run_id"]


def test_bad_image_options_fail_before_any_work(manifest, tmp_path, capsys):
    base = ["run", "--model", "counting", "--dataset", f"custom:{manifest}", "--quiet"]
    assert main(base + ["--perturb-images", "gausian_noise:3", "--out", str(tmp_path / "a")]) == 2
    assert "did you mean 'gaussian_noise'" in capsys.readouterr().err
    assert main(base + ["--perturb-images", "fog:6", "--out", str(tmp_path / "b")]) == 2
    assert "outside 1-5" in capsys.readouterr().err
    assert main(base + ["--mce-reference", str(tmp_path), "--out", str(tmp_path / "c")]) == 2
    assert "--mce-reference needs --perturb-images" in capsys.readouterr().err
    assert main(base + ["--shortcuts", "matched,bits=30", "--out", str(tmp_path / "d")]) == 2
    assert "unknown shortcut probe 'bits=30'" in capsys.readouterr().err
    assert not any((tmp_path / x / "results.json").exists() for x in "abcd")
