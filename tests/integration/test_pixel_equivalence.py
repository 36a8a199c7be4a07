"""Scripts/benchmarks/pixel_equivalence.py runs on the CPU on real photographs (scikit-image's) and reports
the pixel and embedding differences of --pixels device against the reference path, and every metric's change
on a run; one image's pixel difference is recomputed here with the libraries alone (no vlbench code)."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
from support.data import ROOT


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    import skimage.data  # noqa: F401
    spec = importlib.util.spec_from_file_location("pixel_equivalence", ROOT / "scripts" / "benchmarks" / "pixel_equivalence.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path_factory.mktemp("equivalence")
    return mod.main(["--out", str(out), "--device", "cpu"]), out


def test_the_report_covers_every_photograph_and_metric(report):
    rep, out = report
    assert json.loads((out / "pixel_equivalence.json").read_text()) == rep
    names = [r["image"] for r in rep["pixels"]]
    assert len(names) == 11 and "logo.png" in names and "astronaut.jpg" in names
    for r in rep["pixels"]:
        assert 0 <= r["mean_abs"] <= r["max_abs"] <= 255 and -1 <= r["cosine"] <= 1.000001
    keys = {r["metric"] for r in rep["metrics"]}
    assert {"t2i recall@1", "i2t recall@1", "t2i recall@10", "both rsum"} <= keys
    for r in rep["metrics"]:
        assert r["change"] == pytest.approx(r["device"] - r["reference"])
    # on the CPU both paths decode with libjpeg and resize with the same torchvision code: the same pixels
    assert all(r["max_abs"] <= 2 and r["cosine"] > 0.999 for r in rep["pixels"])


def test_one_difference_recomputed_with_the_libraries_alone(report):
    import torch
    from PIL import Image
    from torchvision.io import ImageReadMode, decode_jpeg, read_file
    from transformers import CLIPImageProcessor

    rep, out = report
    path = out / "photos" / "coffee.jpg"
    proc = CLIPImageProcessor(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224})
    kw = dict(return_tensors="pt", do_rescale=False, do_normalize=False)
    ref = proc(images=Image.open(path).convert("RGB"), **kw)["pixel_values"][0]
    dev = proc(images=decode_jpeg(read_file(str(path)), mode=ImageReadMode.RGB), **kw)["pixel_values"][0]
    diff = (ref.to(torch.int32) - dev.to(torch.int32)).abs().numpy()
    row = next(r for r in rep["pixels"] if r["image"] == "coffee.jpg")
    assert row["max_abs"] == int(diff.max()) and row["mean_abs"] == pytest.approx(float(np.mean(diff)), abs=1e-4)


def test_precision_effects_script_on_the_cpu(tmp_path):
    """scripts/benchmarks/precision_effects.py: fp32 and bf16 on the CPU (TF32 and fp16 skipped, named); fp32 against itself
    changes nothing; bf16's changes are the differences of its own values (recomputed here)."""
    import skimage.data  # noqa: F401
    spec = importlib.util.spec_from_file_location("precision_effects", ROOT / "scripts" / "benchmarks" / "precision_effects.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rep = mod.main(["--out", str(tmp_path), "--device", "cpu"])
    rows = {r["precision"]: r for r in rep["rows"]}
    assert set(rows) == {"fp32", "bf16"} and rep["skipped"] == ["tf32", "fp16"]
    assert rows["fp32"]["metrics_changed"] == 0 and rows["fp32"]["cosine_min"] == pytest.approx(1.0, abs=1e-6)
    bf = rows["bf16"]
    changes = [bf["values"][m] - rows["fp32"]["values"][m] for m in bf["values"]]
    assert bf["largest_change"] == max(changes, key=abs)
    assert 0.99 < bf["cosine_min"] <= 1.0 + 1e-6
