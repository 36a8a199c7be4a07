"""`vlbench run --corrupt-backend torch`: recorded per condition, its own cache entries (never the reference's),
the same numbers as the reference where the torch code computes the same pixels (pixelate: exact), and corrupted
images byte-identical across DataLoader worker counts."""

from __future__ import annotations

import json

import pytest
from support.data import corrupted_image_hashes, pixels_bytes, read_counts

from vlbench.cli import main


def _run(manifest, out, cache, backend, extra=()):
    return main(["run", "--model", "counting", "--dataset", f"custom:{manifest}", "--perturb-images",
                 "gaussian_noise:1,pixelate:3", "--quiet", "--num-workers", "0", "--cache-dir", str(cache),
                 "--bootstrap", "20", "--corrupt-backend", backend, "--out", str(out), *extra])


def test_torch_backend_is_recorded_cached_apart_and_exact_where_the_pixels_are(counting_plugin, manifest, tmp_path,
                                                                                monkeypatch):
    counts = tmp_path / "counts.jsonl"
    monkeypatch.setenv("VLBENCH_COUNT_FILE", str(counts))
    cache = tmp_path / "cache"
    assert _run(manifest, tmp_path / "ref", cache, "reference") == 0
    first = read_counts(counts)["images"]
    assert _run(manifest, tmp_path / "torch", cache, "torch") == 0
    # the torch run found none of the reference's corrupted images in the cache (clean images: shared)
    assert read_counts(counts)["images"] == first + 12 * 2
    ref, tor = (json.loads((tmp_path / x / "results.json").read_text()) for x in ("ref", "torch"))
    for c in ("img:gaussian_noise:1", "img:pixelate:3"):
        assert ref["conditions"][c]["corrupt_backend"] == "reference"
        assert ref["conditions"][c]["version"] == "imagenet-c/2"
        assert tor["conditions"][c]["corrupt_backend"] == "torch"
        assert tor["conditions"][c]["version"] == "imagenet-c-torch/1@cpu"
        assert tor["conditions"][c]["cache_key"].endswith(":imagenet-c-torch/1@cpu")
        assert ref["conditions"][c]["cache_key"].endswith(":imagenet-c/2")

    def values(doc, cond):
        return {(r["direction"], r["metric"], r.get("k")): r["value"] for r in doc["results"]
                if r["condition"] == cond}

    # pixelate's torch code gives the reference's pixels (docs table: 0 grey levels), so the same numbers
    assert values(tor, "img:pixelate:3") == values(ref, "img:pixelate:3")
    assert values(tor, "clean") == values(ref, "clean")
    # a second torch run encodes nothing: its own cache entries are found
    before = read_counts(counts)["images"]
    assert _run(manifest, tmp_path / "torch2", cache, "torch") == 0
    assert read_counts(counts)["images"] == before


def test_torch_backend_needs_image_corruptions(manifest, tmp_path, capsys):
    rc = main(["run", "--model", "counting", "--dataset", f"custom:{manifest}", "--corrupt-backend", "torch",
               "--out", str(tmp_path / "o"), "--quiet"])
    assert rc == 2 and "--corrupt-backend" in capsys.readouterr().err




@pytest.mark.parametrize("workers", [0, 2])
def test_torch_corrupted_images_are_byte_identical_across_workers(manifest, workers):
    import hashlib

    from vlbench.datasets.core import load_dataset
    from vlbench.encoding.encode import load_image
    from vlbench.imageperturb import CorruptedLoader
    from vlbench.imageperturb.conditions import CorruptionTransform

    ds = load_dataset(f"custom:{manifest}")
    names = ("gaussian_noise", "glass_blur", "frost", "fog")
    transforms = [CorruptionTransform(n, 3, 7, "input", backend="torch") for n in names]
    jobs, got = corrupted_image_hashes(ds, transforms, workers)  # image-major, as the encoder orders its jobs
    ref = [hashlib.sha256(pixels_bytes(CorruptedLoader(t.name, 3, 7, input_size=32, backend="torch")(load_image(p), c)))
           .hexdigest() for p, i, c, t in jobs]
    assert got == ref and len(set(got)) == len(got)
    reference = [hashlib.sha256(pixels_bytes(CorruptedLoader(t.name, 3, 7, input_size=32)(load_image(p), c))).hexdigest()
                 for p, i, c, t in jobs]
    assert not set(reference) & set(got)  # random corruptions: other draws, other pixels
