"""`vlbench run --pixels device --corrupt-backend torch`: the corruptions run on the model's device, batched, and on
the CPU device the run gives the numbers of the torch backend in the DataLoader workers (every record, every
per-query value), with an ``image_corrupt_device`` stage and no CPU corruption stage; the reference backend stays
the default. On CUDA (marked ``gpu``) the integer-exact corruption (pixelate) gives the workers' numbers exactly and
the random ones are keyed ``@cuda``."""

from __future__ import annotations

import csv
import gzip
import json

import pytest
from support.data import write_manifest

from vlbench.cli import main

CORRUPTIONS = "gaussian_noise:2,glass_blur:1"


def _mixed_dataset(root):
    """12 JPEGs of distinct sizes (decoded on the device) and one PNG among them (decoded by PIL)."""
    from PIL import Image

    man = write_manifest(root / "data", 12, fmt="jpg")
    rows = [json.loads(line) for line in man.read_text().splitlines()]
    png = man.parent / "images" / "img003.png"
    Image.open(man.parent / rows[3]["image"]).save(png)
    rows[3]["image"] = "images/img003.png"
    man.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return man


@pytest.fixture(scope="module")
def runs(tiny_models, tmp_path_factory):
    root = tmp_path_factory.mktemp("device-corrupt")
    man = _mixed_dataset(root)
    common = ["run", "--model", f"clip:{tiny_models('clip')}", "--dataset", f"custom:{man}", "--quiet",
              "--num-workers", "0", "--batch-size", "5", "--bootstrap", "20", "--no-cache"]
    torch = ["--perturb-images", CORRUPTIONS, "--corrupt-backend", "torch"]
    plans = {"workers": [*torch, "--pixels", "reference"], "device": [*torch, "--pixels", "device"],
             "default": ["--perturb-images", CORRUPTIONS, "--pixels", "device"]}
    for name, extra in plans.items():
        assert main([*common, *extra, "--out", str(root / name)]) == 0
    return {n: (json.loads((root / n / "results.json").read_text()), root / n) for n in plans}


def _values(doc) -> dict:
    return {(r["condition"], r.get("fold"), r["direction"], r["metric"], r.get("k")): r["value"]
            for r in doc["results"]}


def _per_query(folder) -> list:
    with gzip.open(folder / "per_query.csv.gz", "rt", newline="") as fh:
        return list(csv.reader(fh))


def test_device_corruptions_give_the_workers_numbers_on_the_cpu(runs):
    (dev, dev_dir), (wrk, wrk_dir) = runs["device"], runs["workers"]
    assert dev["model"]["identity"]["pixels"] == "device" and dev["encoding"]["images_device_decoded"] >= 11
    assert _values(dev) == _values(wrk)
    assert {c for c, *_ in _values(dev)} == {"clean", "img:gaussian_noise:2", "img:glass_blur:1"}
    rows = _per_query(dev_dir)
    assert rows == _per_query(wrk_dir) and len(rows) > 3 * 2 * 12
    for c in ("img:gaussian_noise:2", "img:glass_blur:1"):  # the same corrupted pixels: the same cache key
        assert dev["conditions"][c]["cache_key"] == wrk["conditions"][c]["cache_key"]
        assert dev["conditions"][c]["cache_key"].endswith(":imagenet-c-torch/1@cpu:at32")


def test_device_run_has_no_cpu_corruption_stage_and_says_where_it_corrupted(runs):
    dev, wrk = runs["device"][0], runs["workers"][0]
    stages, enc = dev["timings"]["stages"], dev["encoding"]
    assert "image_corrupt_cpu" not in stages
    assert stages["image_corrupt_device"]["items"] == enc["images_corrupted_device"] == 2 * 12
    assert stages["image_corrupt_device"]["seconds"] > 0 and enc["images_transformed_workers"] == 0
    assert "image_corrupt_device" not in wrk["timings"]["stages"]
    assert wrk["timings"]["stages"]["image_corrupt_cpu"]["items"] == 2 * 12
    assert sum(s["seconds"] for s in stages.values()) == pytest.approx(dev["timings"]["wall_seconds"], rel=0.05)
    for c in ("img:gaussian_noise:2", "img:glass_blur:1"):
        assert dev["conditions"][c]["corrupt_on"] == "device"
        assert dev["conditions"][c]["corrupt_batches"].startswith("batched")
        assert dev["conditions"][c]["version"] == "imagenet-c-torch/1@cpu"
        assert wrk["conditions"][c]["corrupt_on"] == "workers"


def test_the_reference_backend_stays_the_default_even_on_the_device_path(runs):
    import dataclasses

    from vlbench.pipeline.run_config import RunConfig

    assert {f.name: f.default for f in dataclasses.fields(RunConfig)}["corrupt_backend"] == "reference"
    doc = runs["default"][0]
    for c in ("img:gaussian_noise:2", "img:glass_blur:1"):
        meta = doc["conditions"][c]
        assert meta["corrupt_backend"] == "reference" and meta["corrupt_on"] == "workers"
        assert meta["version"] == "imagenet-c/2"
    assert doc["timings"]["stages"]["image_corrupt_cpu"]["items"] == 2 * 12
    assert "image_corrupt_device" not in doc["timings"]["stages"]


@pytest.mark.gpu
def test_device_corruptions_on_cuda(tiny_models, tmp_path):
    """PNG files (the same PIL decoding on both paths): pixelate's integer arithmetic on CUDA gives the workers'
    pixels, so its numbers (and the clean ones) are the workers' exactly; gaussian_noise draws from CUDA generators
    (other numbers than the CPU's), keyed and recorded ``@cuda``, every value a valid one."""
    man = write_manifest(tmp_path / "data", 12, fmt="png")
    common = ["run", "--model", f"clip:{tiny_models('clip')}", "--dataset", f"custom:{man}", "--quiet",
              "--num-workers", "0", "--batch-size", "5", "--bootstrap", "20", "--no-cache", "--device", "cuda",
              "--perturb-images", "pixelate:3,gaussian_noise:2", "--corrupt-backend", "torch"]
    assert main([*common, "--pixels", "reference", "--out", str(tmp_path / "workers")]) == 0
    assert main([*common, "--pixels", "device", "--out", str(tmp_path / "device")]) == 0
    wrk, dev = (json.loads((tmp_path / n / "results.json").read_text()) for n in ("workers", "device"))
    same = {k: v for k, v in _values(dev).items() if k[0] in ("clean", "img:pixelate:3")}
    assert same == {k: v for k, v in _values(wrk).items() if k[0] in ("clean", "img:pixelate:3")}
    noise = dev["conditions"]["img:gaussian_noise:2"]
    assert noise["corrupt_on"] == "device" and noise["version"] == "imagenet-c-torch/1@cuda"
    assert noise["cache_key"].endswith("@cuda:at32") and "image_corrupt_cpu" not in dev["timings"]["stages"]
    assert all(v == v for k, v in _values(dev).items() if k[0] == "img:gaussian_noise:2")  # no NaN


def test_device_corrupted_vectors_equal_the_workers_bit_for_bit(tiny_models, tmp_path):
    """Below the metrics: every corrupted image's vector, made on the CPU device, is the workers' vector exactly."""
    import numpy as np

    from vlbench.encoding.variant_images import bind_transforms, encode_variant_images
    from vlbench.imageperturb.conditions import image_variants
    from vlbench.models.adapter import load_model

    man = _mixed_dataset(tmp_path)
    paths = [str(man.parent / json.loads(line)["image"]) for line in man.read_text().splitlines()]
    adapter = load_model(f"clip:{tiny_models('clip')}", device="cpu")
    out = {}
    for pixels in ("reference", "device"):
        adapter.pixels = pixels
        variants = image_variants("contrast:3,snow:2", 5, "input", "torch")
        bound = bind_transforms(adapter, variants)
        assert {m["corrupt_on"] for m in bound.values()} == {"workers" if pixels == "reference" else "device"}
        out[pixels] = encode_variant_images(adapter, paths, variants, batch_size=5, num_workers=0, progress=False)
    assert out["device"].keys() == out["reference"].keys() == {"img:contrast:3", "img:snow:2"}
    for label, vecs in out["device"].items():
        assert vecs.shape == (12, out["reference"][label].shape[1])
        assert np.array_equal(vecs, out["reference"][label]), label
