"""A sweep's run equals the same run made alone, even where the model's CPU forward depends on the thread count.

The forward of a small CLIP with wide feed-forward layers (64-d, 4,096 inner, 2 layers: support/tiny_models.py
save_clip_wide) gives other float32 values with 1 and with 2 threads (the first test shows it; MKL splits a long
inner product across threads), and the local executor caps each worker's thread pools (OMP_NUM_THREADS: cores /
workers). So the forward's thread count is the run's own (``--threads``; by default the cores the process
may use, vlbench.models.lazy.default_threads), never the executor's: a sweep of 2 workers gives every record of the
same runs made alone, nDCG and DCG_CM included, and both record the same ``hardware.threads``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.data import write_manifest

from vlbench.cli import main

ROOT = Path(__file__).resolve().parents[2]

#: what differs between two runs of the same options by construction (as in test_sweep_local.py)
NOT_COMPARED = ("run_id", "created", "wall_time_s", "timings", "hardware", "environment", "encoding", "record_hash",
                "files")

FORWARD = """
import sys, numpy as np, torch
from PIL import Image
from vlbench.models.adapter import load_model
torch.set_num_threads(int(sys.argv[2]))
m = load_model("clip:" + sys.argv[1], device="cpu")
rng = np.random.default_rng(0)
images = [Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)) for _ in range(64)]
plain = lambda x: np.asarray(x.detach().cpu() if hasattr(x, "detach") else x, dtype=np.float32)
np.savez(sys.argv[3], images=plain(m.encode_images(m.collate([m.preprocess(im) for im in images]))),
         texts=plain(m.encode_texts([f"a photo of {i} red dogs on the grass" for i in range(64)])))
"""


def _forward(model: Path, threads: int, out: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    subprocess.run([sys.executable, "-c", FORWARD, str(model), str(threads), str(out)], check=True, env=env,
                   timeout=600)
    return dict(np.load(out))


def test_the_wide_clip_forward_depends_on_the_thread_count(tiny_models, tmp_path):
    """The reason for the rule: on CPU the same 64 images and captions through the same weights give other values
    with 1 and 2 threads (so a run's numbers depend on the threads it encodes with)."""
    model = tiny_models("clip_wide", 0)
    one, two = _forward(model, 1, tmp_path / "one.npz"), _forward(model, 2, tmp_path / "two.npz")
    again = _forward(model, 2, tmp_path / "again.npz")
    for side in ("images", "texts"):
        assert np.array_equal(two[side], again[side])  # deterministic at a given thread count
        assert one[side].shape == two[side].shape
        assert np.abs(one[side] - two[side]).max() < 1e-4  # a rounding difference, not another model
    differ = int((one["images"] != two["images"]).sum())
    assert differ > one["images"].size // 10, f"only {differ} image values differ: the forward no longer depends " \
                                               "on threads, and the sweep tests below prove nothing"


@pytest.fixture(scope="module")
def grid(tmp_path_factory, tiny_models):
    root = tmp_path_factory.mktemp("threads")
    data = write_manifest(root / "d", 8)
    plan = root / "plan.toml"
    plan.write_text(f"""
[options]
n-boot = 20
validity = "off"
num-workers = 0
cache-dir = "{root / 'cache-sweep'}"

[models]
m0 = "clip:{tiny_models('clip_wide', 0)}"
m1 = "clip:{tiny_models('clip_wide', 1)}"

[datasets]
d = "custom:{data}"

[conditions]
clean = {{}}
typos = {{ perturb = ["char-swap"] }}
""")
    assert main(["sweep", str(plan), "--out", str(root / "study"), "--workers", "2", "--no-leaderboard"]) == 0
    return root


def test_a_sweep_of_two_workers_gives_every_record_of_the_runs_made_alone(grid):
    """The regression of issue 44: on a 2-core machine the workers' cores / workers = 1 thread against the lone
    run's 2 changed nDCG@10, DCG_CM and nDCG_CM at ~1e-8. Each run made alone in a fresh process (its own cache,
    so it encodes again) equals the sweep's: every record, every delta and interval. (The models are the wide
    CLIPs whose forward the test above shows to depend on the thread count.)"""
    runs = json.loads((grid / "study" / "plan.json").read_text())["runs"]
    assert len(runs) == 4
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    env.pop("OMP_NUM_THREADS", None)
    for r in runs:
        alone = grid / "alone" / r["run_id"]
        kwargs = {**r["kwargs"], "out": str(alone), "cache_dir": str(grid / "cache-alone" / r["run_id"])}
        subprocess.run([sys.executable, "-c", "import json, sys, vlbench; vlbench.run(**json.loads(sys.argv[1]))",
                        json.dumps(kwargs)], check=True, env=env, timeout=600)
        got = json.loads((Path(r["folder"]) / "results.json").read_text())
        want = json.loads((alone / "results.json").read_text())
        assert got["hardware"]["threads"] == want["hardware"]["threads"] >= 1  # recorded, and the same
        metrics = {x["metric"] for x in got["results"]}
        assert {"ndcg", "dcg_cm", "ndcg_cm"} <= metrics, metrics  # the records that moved before
        got_records = {(x["condition"], x["direction"], x["metric"], x.get("k")): x["value"] for x in got["results"]}
        want_records = {(x["condition"], x["direction"], x["metric"], x.get("k")): x["value"]
                        for x in want["results"]}
        differ = {k: (v, want_records.get(k)) for k, v in got_records.items() if want_records.get(k) != v}
        assert not differ and set(got_records) == set(want_records), (r["run_id"], differ)
        got.pop("settings", None), want.pop("settings", None)  # (settings name the cache folder)
        assert {k: v for k, v in got.items() if k not in NOT_COMPARED} == \
            {k: v for k, v in want.items() if k not in NOT_COMPARED}, r["run_id"]


def test_the_thread_count_is_the_runs_own_option_and_changes_its_numbers(grid, tiny_models):
    """``threads`` is a run option that changes numbers: given, it is recorded in settings.options (a finished run
    of another thread count is not resumed as the same run) and in hardware.threads."""
    import vlbench
    from vlbench.errors import VlbenchError

    runs = json.loads((grid / "study" / "plan.json").read_text())["runs"]
    r = runs[0]
    out = grid / "one-thread"
    vlbench.run(**{**r["kwargs"], "out": str(out), "threads": 1})
    doc = json.loads((out / "results.json").read_text())
    assert doc["hardware"]["threads"] == 1 and doc["settings"]["options"]["threads"] == 1
    with pytest.raises(VlbenchError, match="threads"):
        vlbench.run(**{**r["kwargs"], "out": str(out), "threads": 2, "resume": True})
