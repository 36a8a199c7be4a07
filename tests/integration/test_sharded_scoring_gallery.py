"""Issue #29 item 4: a 200,000-item gallery with exact ties and bit-identical duplicates scored in blocks, in
one process and by two torchrun processes (gloo) that each score half the gallery, gives the one-piece
values bit for bit (every per-query column, the top lists and the records)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from support.data import ROOT
from support.sharded_gallery import gallery, per_query
from vlbench.metrics.compute import EmbeddingSource, evaluate


@pytest.fixture(scope="module")
def one_piece():
    img, txt, c2i = gallery()
    return per_query(evaluate(EmbeddingSource(img, txt), c2i)), (img, txt, c2i)


@pytest.mark.slow
def test_blocks_in_one_process_equal_the_one_piece_pass(one_piece):
    ref, (img, txt, c2i) = one_piece
    got = per_query(evaluate(EmbeddingSource(img, txt), c2i, score_block="64x16000"))
    assert ref.keys() == got.keys()
    for key in ref:
        assert np.array_equal(ref[key], got[key]), key
    # the case has teeth: ties at the top, positives far down the ranking, duplicates in every shard
    assert (ref["t2i/best_rank"] > 10).mean() > 0.5 and (ref["t2i/best_rank"] == 1).any()


@pytest.mark.slow
def test_two_torchrun_processes_equal_the_one_piece_pass(one_piece, tmp_path):
    ref, _ = one_piece
    out = tmp_path / "ranks.npz"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                           "29531", str(ROOT / "tests" / "support" / "sharded_gallery.py"), str(out), "128x40000",
                           "200000"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = dict(np.load(out))
    assert ref.keys() == got.keys()
    for key in ref:
        assert np.array_equal(ref[key], got[key]), key


def test_a_run_with_score_block_gives_the_same_results_and_records_the_block(counting_plugin, manifest, tmp_path):
    import json

    import vlbench
    from support.data import write_images

    write_images(tmp_path / "neg", 3, seed=7)
    kw = dict(model="counting", dataset=f"custom:{manifest}", quiet=True, num_workers=0, validity="off", n_boot=20,
              perturb="char-swap", distractors=f"images:{tmp_path / 'neg'}", cache_dir=str(tmp_path / "cache"))
    vlbench.run(out=str(tmp_path / "one"), **kw)
    vlbench.run(out=str(tmp_path / "blocks"), score_block="2x256", **kw)
    a, b = (json.loads((tmp_path / n / "results.json").read_text()) for n in ("one", "blocks"))
    assert a["results"] == b["results"] and a["deltas"] == b["deltas"] and a["results_hash"] == b["results_hash"]
    assert a["hardware"]["score_block"] is None and b["hardware"]["score_block"] == "2x256"
    assert a["settings"] == {**b["settings"], "device": a["settings"]["device"]}  # not a number-changing setting
    for name in ("per_query.csv.gz", "flips.csv"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "blocks" / name).read_bytes()
