"""The preprocessed-pixel cache. A second model with the same preprocessing decodes no image
(the run's ``timings`` item count of image_decode_preprocess) and gives the numbers it gives without any cache;
image corruptions at --corrupt-at input share the cache too; `vlbench cache` lists and clears it; a damaged
pixel file is refused and its image decoded again."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.data import write_manifest


def _run(model, manifest, out, cache=None, **kw):
    from vlbench.pipeline.runner import run

    opts = dict(cache_dir=str(cache)) if cache is not None else dict(no_cache=True)
    return run(model=f"clip:{model}", dataset=f"custom:{manifest}", out=str(out), quiet=True, num_workers=0,
               n_boot=10, batch_size=5, **opts, **kw).results


def _values(res):
    return [(v["condition"], v["direction"], v["metric"], v.get("k"), v["value"]) for v in res["results"]]


def _decoded(res):
    return res["timings"]["stages"]["image_decode_preprocess"]["items"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("pixels")
    return root, write_manifest(root / "data", 12, fmt="jpg")


def test_a_second_model_with_the_same_preprocessing_decodes_no_image(tiny_models, data, tmp_path):
    root, man = data
    first, second = tiny_models("clip", seed=0), tiny_models("clip", seed=1)
    cache = tmp_path / "cache"
    a = _run(first, man, tmp_path / "a", cache, perturb_images="gaussian_noise:1")
    assert _decoded(a) == 24 and a["encoding"]["pixels_cached"] == 0  # 12 clean + 12 corrupted
    assert len(list((cache / "pixels").rglob("*.npz"))) == 24
    b = _run(second, man, tmp_path / "b", cache, perturb_images="gaussian_noise:1")
    assert b["model"]["hash"] != a["model"]["hash"]  # another model: every vector encoded again ...
    assert b["encoding"]["images_encoded"] == 24
    assert _decoded(b) == 0 and b["encoding"]["images_decoded"] == 0  # ... from the first model's pixels
    assert b["encoding"]["pixels_cached"] == 24
    alone = _run(second, man, tmp_path / "alone", perturb_images="gaussian_noise:1")  # no cache at all
    assert _decoded(alone) == 24
    assert _values(b) == _values(alone)


def test_the_pixel_cache_is_listed_cleared_and_proves_its_files(tiny_models, data, tmp_path, capsys):
    from vlbench.cli import main

    root, man = data
    model = tiny_models("clip", seed=0)
    cache = tmp_path / "cache"
    ref = _run(model, man, tmp_path / "ref", cache)
    files = sorted((cache / "pixels").rglob("*.npz"))
    assert len(files) == 12
    with np.load(files[0]) as z:  # tamper: change the pixels, keep the checksum
        data_ = {k: z[k] for k in z.files}
    data_["pixels"] = 255 - data_["pixels"]
    np.savez(files[0], **data_)
    (cache / "embeddings").rename(tmp_path / "embeddings-aside")  # the vectors must be encoded again
    again = _run(model, man, tmp_path / "again", cache)
    assert again["encoding"]["pixel_files_damaged"] == 1 and _decoded(again) == 1
    assert _values(again) == _values(ref)
    assert files[0].with_name(files[0].name + ".damaged").exists()
    assert "pixel cache file" in capsys.readouterr().err
    assert main(["cache", "ls", "--cache-dir", str(cache)]) == 0
    listing = capsys.readouterr().out
    assert "pixels" in listing
    assert main(["cache", "clear", "--cache-dir", str(cache)]) == 0
    assert not (cache / "pixels").exists()


def test_results_record_the_pixel_route(tiny_models, data, tmp_path):
    root, man = data
    res = _run(tiny_models("clip", seed=0), man, tmp_path / "r", tmp_path / "cache")
    enc = res["encoding"]
    assert enc["images_decoded"] == 12 and enc["pixels_cached"] == 0
    assert json.loads(json.dumps(res["hardware"]))["num_workers"] == 0


def test_the_device_path_runs_on_the_cpu_under_its_own_identity(tiny_models, data, tmp_path):
    """--pixels device (JPEGs decoded by torchvision on --device, here the CPU; a PNG through PIL in the same
    batch): every image encoded, the path recorded, another model hash (caches never mix), and on the CPU, where
    torchvision and PIL both decode with libjpeg and resample with the same code, the reference path's pixels
    exactly (docs/performance.md), hence the same numbers: every metric record equal, not close."""
    from PIL import Image

    root, man = data
    model = tiny_models("clip", seed=0)
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    rows = [json.loads(line) for line in man.read_text().splitlines()]
    for i, r in enumerate(rows):
        im = Image.open(man.parent / r["image"])
        name = f"{i:03d}." + ("png" if i == 3 else "jpg")
        im.save(mixed / name)
        r["image"] = name
    (mixed / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cache = tmp_path / "cache"
    ref = _run(model, mixed / "m.jsonl", tmp_path / "ref", cache)
    dev = _run(model, mixed / "m.jsonl", tmp_path / "dev", cache, pixels="device")
    assert dev["model"]["hash"] != ref["model"]["hash"] and dev["model"]["identity"]["pixels"] == "device"
    assert dev["hardware"]["pixels"] == "device" and ref["hardware"]["pixels"] == "reference"
    enc = dev["encoding"]
    assert enc["images_encoded"] == 12 and enc["images_device_decoded"] == 11 and _decoded(dev) == 12
    assert len(_values(dev)) == len(_values(ref)) > 0
    for got, want in zip(_values(dev), _values(ref)):
        assert got == want  # (condition, direction, metric, k, value): the same record, to the last bit


def test_the_device_path_needs_a_pixel_split(counting_plugin, manifest, tmp_path):
    """A model without the uint8 split (a plug-in's own preprocess) cannot take device pixels: a clear error."""
    from vlbench.errors import VlbenchError
    from vlbench.pipeline.runner import run

    with pytest.raises(VlbenchError, match="--pixels device needs"):
        run(model="counting", dataset=f"custom:{manifest}", out=str(tmp_path / "o"), quiet=True, num_workers=0,
            n_boot=10, no_cache=True, pixels="device")
