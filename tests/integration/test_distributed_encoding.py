"""torchrun runs (gloo, 2 processes on the CPU): every rank encodes its share and scores its slice of every
gallery (the sharded exact scorer); the run equals one process, bit for bit, and records its ranks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from support.data import ROOT


@pytest.mark.slow
def test_torchrun_two_processes_identical_to_one(tiny_models, manifest, tmp_path):
    from support.data import write_images

    folder = tiny_models("clip")
    write_images(tmp_path / "neg", 5, seed=9)
    env = dict(os.environ, OMP_NUM_THREADS="1", VLBENCH_CACHE_DIR=str(tmp_path / "cache-1"))
    common = ["run", "--model", f"clip:{folder}", "--dataset", f"custom:{manifest}", "--num-workers", "0",
              "--batch-size", "4", "--quiet", "--no-cache", "--perturb", "char-swap", "--perturb-images",
              "gaussian_noise:2", "--distractors", f"images:{tmp_path / 'neg'}", "--validity", "off",
              "--bootstrap", "50"]
    one = subprocess.run([sys.executable, "-m", "vlbench", *common, "--out", str(tmp_path / "one")],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert one.returncode == 0, one.stderr
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                          "--master-port", "29517", "-m", "vlbench", *common, "--out", str(tmp_path / "two")],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert two.returncode == 0, two.stderr[-3000:]
    a = json.loads((tmp_path / "one" / "results.json").read_text())
    b = json.loads((tmp_path / "two" / "results.json").read_text())
    assert b["encoding"]["processes"] == 2
    assert b["hardware"]["score_ranks"] == 2 and "score_ranks" not in a["hardware"]  # both ranks scored
    assert a["results"] == b["results"]  # identical numbers, not merely close
    assert a["deltas"] == b["deltas"] and a["results_hash"] == b["results_hash"]
    for name in ("per_query.csv.gz", "flips.csv"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


@pytest.mark.slow
def test_a_rank_that_fails_does_not_hang_the_others(tiny_models, manifest, tmp_path):
    """A corrupt image that only rank 1 decodes: both ranks stop with the file named, no hang. Its header is
    sound (every rank checks every header before loading the model), its pixel data truncated."""
    bad = manifest.parent / "images" / "img005.png"
    bad.write_bytes(bad.read_bytes()[:60])
    folder = tiny_models("clip")
    env = dict(os.environ, OMP_NUM_THREADS="1", VLBENCH_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                           "--master-port", "29519", "-m", "vlbench", "run", "--model", f"clip:{folder}",
                           "--dataset", f"custom:{manifest}", "--num-workers", "0", "--batch-size", "4", "--quiet",
                           "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert proc.returncode != 0
    assert "img005.png" in proc.stderr
    assert "rank 1 failed while encoding" in proc.stderr  # rank 0's message names the failing rank
    assert not (tmp_path / "o" / "results.json").exists()
