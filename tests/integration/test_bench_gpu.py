"""scripts/benchmarks/bench_gpu.py runs in its --quick mode on the CPU: every case at a tiny size, one
table and one JSON file, each figure with its precision, batch size, workers and pixel path; the pixel-cache
row decoded nothing; the full suite corrupts on the device (no CPU corruption stage); options a vlbench lacks
(the torch corruption backend, the scoring block) are skipped by name rather than failing."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys

import pytest
from support.data import ROOT


@pytest.mark.slow  # about a minute and a half on two shared cores
def test_bench_gpu_quick_on_the_cpu(tmp_path, capsys, monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "scripts" / "benchmarks" / "bench_gpu.py")
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_gpu", mod)  # its dataclass looks its module up
    spec.loader.exec_module(mod)
    rep = mod.main(["--quick", "--out", str(tmp_path)])
    assert json.loads((tmp_path / "bench_gpu.json").read_text())["rows"] == json.loads(json.dumps(rep["rows"]))
    measured = [r for r in rep["rows"] if "skipped" not in r]
    for r in measured:
        assert {"precision", "batch_size", "workers", "pixels"} <= set(r) and r["seconds"] > 0
    sizes = sorted({r["images"] for r in measured if "images" in r})  # the image cases (scoring has a gallery)
    scoring = [r for r in measured if r["case"].startswith("scoring")]
    assert len(scoring) == 1 and scoring[0]["score_block"] and scoring[0]["gallery"] == 10_000
    assert sizes == [8, 12]
    for n in sizes:
        rows = {(r["case"], r["precision"], r["pixels"]): r for r in measured if r.get("images") == n}
        assert rows[("cold run", "fp32", "reference")]["images_decoded"] == n
        assert rows[("cold run, pixel cache", "bf16", "reference")]["images_decoded"] == 0
        assert rows[("cold run, pixel cache", "bf16", "reference")]["pixels_from_cache"] == n
        assert rows[("warm run", "bf16", "reference")]["images_encoded"] == 0
        assert rows[("cold run", "bf16", "device")]["images_decoded"] == n
        fwd = rows[("pure forward (staged tensors)", "fp32", "reference")]
        assert fwd["images_per_s"] == pytest.approx(n / fwd["image_seconds"])
    from vlbench.pipeline.run_config import RunConfig

    has_backend = "corrupt_backend" in {f.name for f in dataclasses.fields(RunConfig)}
    sweep = [r for r in rep["rows"] if r["case"].startswith("corruption sweep")]
    assert len(sweep) == 2 and (("skipped" in sweep[1]) != has_backend)
    assert sweep[0]["images_encoded"] == 8 * 3  # 8 clean + 8 x 2 corrupted
    suite = [r for r in rep["rows"] if r["case"].startswith("full suite")]
    assert len(suite) == 1 and suite[0]["pixels"] == "device"
    if has_backend:  # the corruptions ran on the device: a device stage, no CPU corruption stage
        assert suite[0]["images_encoded"] == 8 * 3 and suite[0]["image_corrupt_device_s"] > 0
        assert suite[0]["image_corrupt_cpu_s"] is None and sweep[1]["image_corrupt_cpu_s"] > 0
    out = capsys.readouterr().out
    assert "| case | images | precision | batch | workers | pixels |" in out
