"""results.json records where the time went (stages that add up to the wall time, with items
and items per second) and the hardware; the clock's exclusive attribution is checked on a fake timer."""

from __future__ import annotations

import json
import os

import pytest

from support.data import write_manifest
from vlbench.pipeline import timing as T
from vlbench.results import RunRecord

NAMED = ("startup_model_load", "perturbation", "image_decode_preprocess", "image_forward", "text_forward",
         "validity", "scoring", "bootstrap", "writing")


@pytest.fixture(scope="module")
def small_run(tiny_models, tmp_path_factory):
    root = tmp_path_factory.mktemp("timed")
    man = write_manifest(root / "data", 12)
    from vlbench.cli import main

    common = ["--model", f"clip:{tiny_models('clip')}", "--dataset", f"custom:{man}", "--perturb", "char-swap",
              "--quiet", "--num-workers", "0", "--batch-size", "5", "--cache-dir", str(root / "cache")]
    assert main(["run", *common, "--out", str(root / "cold")]) == 0
    assert main(["run", *common, "--out", str(root / "warm")]) == 0
    return {n: json.loads((root / n / "results.json").read_text()) for n in ("cold", "warm")}


def test_stages_add_up_to_the_wall_time_and_count_items(small_run):
    res = small_run["cold"]
    t = res["timings"]
    stages = t["stages"]
    assert set(NAMED) <= set(stages)
    total = sum(s["seconds"] for s in stages.values())
    assert total == pytest.approx(t["wall_seconds"], rel=0.05)
    assert stages.get("other", {"seconds": 0})["seconds"] <= 0.05 * t["wall_seconds"]
    assert abs(t["wall_seconds"] - res["wall_time_s"]) <= 0.05 * res["wall_time_s"]
    enc = res["encoding"]
    # items: 12 images and every distinct caption encoded once (cold cache); 12 x 5 perturbed captions;
    # 1,000 bootstrap resamples for the one condition besides clean; clean + char-swap scored
    assert stages["image_forward"]["items"] == enc["images_encoded"] == 12
    assert stages["image_decode_preprocess"]["items"] == 12
    assert stages["text_forward"]["items"] == enc["texts_encoded"] == enc["texts_distinct"]
    assert stages["perturbation"]["items"] == 60
    assert stages["bootstrap"]["items"] == 1000
    assert stages["scoring"]["items"] == 2
    assert stages["image_forward"]["seconds"] == pytest.approx(enc["image_forward_seconds"], abs=1e-5)
    assert stages["text_forward"]["seconds"] == pytest.approx(enc["text_forward_seconds"], abs=1e-5)
    s = stages["text_forward"]
    assert s["items_per_s"] == pytest.approx(s["items"] / s["seconds"], rel=1e-3)
    rec = RunRecord.from_json(res)
    assert rec.timings == t and rec.hardware == res["hardware"]
    assert list(res)[list(res).index("wall_time_s") + 1:][:2] == ["timings", "hardware"]


def test_warm_run_encodes_nothing_and_its_forward_stages_are_empty(small_run):
    stages = small_run["warm"]["timings"]["stages"]
    # the device it ran on, resolved without loading the model (issue 44: it said "auto (model not loaded: ...)")
    cold = small_run["cold"]["hardware"]["device"]
    assert small_run["warm"]["hardware"]["device"] == cold and cold in ("cpu", "cuda", "mps")
    assert small_run["warm"]["settings"]["device"] == cold and small_run["warm"]["encoding"]["model_loaded"] is False
    assert stages["image_forward"]["items"] == 0 and stages["text_forward"]["items"] == 0
    assert stages["image_forward"]["seconds"] == 0 and stages["image_forward"]["items_per_s"] is None
    assert sum(s["seconds"] for s in stages.values()) == pytest.approx(small_run["warm"]["timings"]["wall_seconds"],
                                                                       rel=0.05)


def test_hardware_fields(small_run):
    import platform

    import torch

    hw = small_run["cold"]["hardware"]
    assert hw == {"device": "cpu", "gpu_name": None, "cpu_count": os.cpu_count(), "torch": torch.__version__,
                  "cuda": torch.version.cuda, "precision": "fp32", "batch_size": 5, "num_workers": 0,
                  "platform": platform.platform(), "pixels": "reference", "pixels_from_cache": 0,
                  "attention": "sdpa", "float32_matmul": torch.get_float32_matmul_precision(), "score_block": None,
                  "threads": hw["threads"]}
    assert isinstance(hw["threads"], int) and hw["threads"] >= 1  # the model forward's CPU threads (docs/scale.md)
    assert small_run["warm"]["hardware"]["attention"] is None  # nothing loaded


def test_clock_attributes_each_second_to_one_stage(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(T.time, "perf_counter", lambda: now[0])
    clock = T.start("startup_model_load")
    now[0] += 2  # start-up: 2 s
    with T.stage("scoring", items=4):
        now[0] += 3
        with T.stage("bootstrap"):  # nested: pauses scoring
            now[0] += 5
        now[0] += 1
    T.enter("writing")
    now[0] += 0.5
    clock.move("scoring", "image_forward", 10)  # never more than the source holds
    rep = clock.report()
    assert rep["wall_seconds"] == 11.5
    got = {k: v["seconds"] for k, v in rep["stages"].items()}
    assert got == {"startup_model_load": 2, "image_forward": 4, "scoring": 0, "bootstrap": 5, "writing": 0.5}
    assert rep["stages"]["scoring"]["items"] == 4 and rep["stages"]["scoring"]["items_per_s"] is None


def test_legacy_results_have_no_timings():
    rec = RunRecord.from_json({"schema_version": 1, "metric_version": "1", "run_id": "r",
                               "created": "2024-01-01T00:00:00+00:00", "model": {"spec": "m", "hash": "h"},
                               "dataset": {"name": "d", "hash": "h"}, "conditions": {"clean": {}},
                               "results": [{"condition": "clean", "direction": "t2i", "metric": "recall", "k": 1,
                                            "value": 1.0}]})
    assert rec.timings is None and rec.hardware is None
