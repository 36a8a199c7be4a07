"""The embedding cache: keys, atomicity, CLI, and the memory bound of block-wise metrics."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

from support.data import ROOT
from vlbench.encoding.cache import EmbeddingCache, clear_cache, list_cache


def test_roundtrip_and_model_isolation(tmp_path):
    a = EmbeddingCache(tmp_path, "a" * 64)
    vecs = np.arange(6, dtype=np.float32).reshape(3, 2)
    a.add("text", ["k1", "k2", "k3"], vecs)
    found, got = EmbeddingCache(tmp_path, "a" * 64).lookup("text", ["k2", "zz", "k3"])
    assert found.tolist() == [True, False, True] and np.array_equal(got, vecs[[1, 2]])
    found, _ = EmbeddingCache(tmp_path, "b" * 64).lookup("text", ["k1"])  # another model sees nothing
    assert not found.any()
    found, _ = EmbeddingCache(tmp_path, "a" * 64).lookup("image", ["k1"])  # another modality neither
    assert not found.any()


def test_truncated_or_foreign_shard_is_never_read(tmp_path):
    c = EmbeddingCache(tmp_path, "a" * 64)
    c.add("text", ["k1"], np.ones((1, 4), np.float32))
    shard = next((tmp_path / "embeddings").rglob("*.npz"))
    data = shard.read_bytes()
    (shard.parent / "broken.npz").write_bytes(data[: len(data) // 2])  # what a non-atomic writer could leave
    (shard.parent / ".x.npz.123.tmp").write_bytes(data[:10])  # a killed atomic write leaves only a temp name
    fresh = EmbeddingCache(tmp_path, "a" * 64)
    found, got = fresh.lookup("text", ["k1"])
    assert found.all() and np.array_equal(got, np.ones((1, 4), np.float32))
    assert fresh.stats["bad_shards"] == 1


def test_killed_write_leaves_no_entry(tmp_path, monkeypatch):
    import os

    c = EmbeddingCache(tmp_path, "a" * 64)

    def boom(src, dst):
        raise KeyboardInterrupt  # the process dies between writing the temp file and the rename

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        c.add("image", ["k"], np.ones((1, 3), np.float32))
    monkeypatch.undo()
    assert not list(tmp_path.rglob("*.npz")) and not list(tmp_path.rglob("*.tmp"))
    found, _ = EmbeddingCache(tmp_path, "a" * 64).lookup("image", ["k"])
    assert not found.any()


@pytest.mark.slow  # two runs of a tiny CLIP
def test_precision_and_checkpoint_change_the_cache_folder(tiny_models, counting_plugin, manifest, tmp_path):
    from vlbench.pipeline.runner import run

    cache = tmp_path / "c"
    for spec, prec in ((f"clip:{tiny_models('clip', 0)}", "fp32"), (f"clip:{tiny_models('clip', 0)}", "bf16"),
                       (f"clip:{tiny_models('clip', 1)}", "fp32")):
        run(model=spec, dataset=f"custom:{manifest}", precision=prec, cache_dir=str(cache),
            out=str(tmp_path / f"r{len(list(tmp_path.iterdir()))}"), quiet=True, num_workers=0, n_boot=10)
    assert len({r["model_hash"] for r in list_cache(cache)}) == 3


def test_cache_cli_ls_and_clear(counting_plugin, manifest, tmp_path):
    from vlbench.pipeline.runner import run

    cache = tmp_path / "c"
    run(model="counting", dataset=f"custom:{manifest}", cache_dir=str(cache), out=str(tmp_path / "r"), quiet=True,
        num_workers=0)
    ls = subprocess.run([sys.executable, "-m", "vlbench", "cache", "ls", "--cache-dir", str(cache)],
                        capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert ls.returncode == 0
    rows = {ln.split()[2]: ln.split() for ln in ls.stdout.splitlines()[1:3]}  # hash, model, modality, vectors
    assert rows["image"][1] == "counting" and rows["image"][3] == "12" and rows["text"][3] == "60"
    assert clear_cache(cache) == 1 and list_cache(cache) == []


@pytest.mark.slow  # a 20,000 x 20,000 block-wise scoring pass
def test_block_metrics_memory_is_bounded():
    """From embeddings, the metric code holds O(block) memory, not the n_images x n_captions matrix."""
    from vlbench.metrics.compute import EmbeddingSource, evaluate

    rng = np.random.default_rng(0)
    n_img, per, d = 3000, 5, 32
    img = rng.standard_normal((n_img, d)).astype(np.float32)
    txt = np.repeat(img, per, axis=0) + rng.standard_normal((n_img * per, d)).astype(np.float32)
    full = n_img * n_img * per * 4  # 180 MB if materialized
    block = 2 << 20
    tracemalloc.start()
    evaluate(EmbeddingSource(img, txt), np.repeat(np.arange(n_img), per), block_bytes=block)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # a block plus its same-size temporaries, plus O(n) per-query arrays
    assert peak < 8 * block + 200 * n_img * per, (peak, full)
    assert peak < full / 10


def _fake_model(root, model_hash, label=None):
    c = EmbeddingCache(root, model_hash, label=label)
    c.add("text", ["k1", "k2"], np.ones((2, 4), dtype=np.float32))
    return c


def test_clear_needs_an_exact_hash_or_an_unambiguous_prefix(tmp_path):
    """issue #12: `cache clear --model-hash 2` removed every model whose hash starts with 2."""
    from vlbench.errors import VlbenchError

    a, b, c = "2" * 8 + "a" * 56, "2" * 8 + "b" * 56, "3" * 64
    for h in (a, b, c):
        _fake_model(tmp_path, h)
    with pytest.raises(VlbenchError, match="too short"):
        clear_cache(tmp_path, "2")
    with pytest.raises(VlbenchError, match="matches 2 models"):
        clear_cache(tmp_path, "22222222")
    assert len(list_cache(tmp_path)) == 3  # nothing removed by a refused clear
    assert clear_cache(tmp_path, "22222222a") == 1  # 9 characters, one model
    assert sorted(r["model_hash"] for r in list_cache(tmp_path)) == [b[:16], c[:16]]
    assert clear_cache(tmp_path, c) == 1  # the full 64-character hash
    assert [r["model_hash"] for r in list_cache(tmp_path)] == [b[:16]]


def test_cache_ls_shows_a_header_model_names_and_perturbations(tmp_path):
    from vlbench.encoding.cache import list_perturbation_cache

    _fake_model(tmp_path, "4" * 64, label="clip:openai/clip-vit-base-patch32")
    (tmp_path / "perturbations").mkdir()
    (tmp_path / "perturbations" / "abc.json").write_text('{"typos": {}, "shuffle_words": {}}')
    assert list_cache(tmp_path)[0]["model"] == "clip:openai/clip-vit-base-patch32"
    assert [r["perturbations"] for r in list_perturbation_cache(tmp_path)] == [["shuffle_words", "typos"]]
    ls = subprocess.run([sys.executable, "-m", "vlbench", "cache", "ls", "--cache-dir", str(tmp_path)],
                        capture_output=True, text=True, cwd=ROOT, timeout=60)
    lines = ls.stdout.splitlines()
    assert ls.returncode == 0, ls.stderr
    assert lines[0].split()[:3] == ["model", "hash", "model"]
    assert "clip:openai/clip-vit-base-patch32" in lines[1] and "4444444444444444" in lines[1]
    assert "perturbed captions: 1 cached set(s)" in ls.stdout and "shuffle_words, typos" in ls.stdout
    assert clear_cache(tmp_path) == 2  # one model folder + one perturbation file
    assert list_cache(tmp_path) == [] and list_perturbation_cache(tmp_path) == []


def test_cache_clear_refuses_empty_or_unmatched_hash_and_file_cache_dir(tmp_path, capsys):
    """issue #12: `cache clear --model-hash ""` removed everything; a file as --cache-dir was a traceback."""
    from vlbench import cli

    a, b = "4" * 64, "5" * 64
    for h in (a, b):
        _fake_model(tmp_path, h)
    (tmp_path / "perturbations").mkdir()
    (tmp_path / "perturbations" / "k.json").write_text("{}")
    for bad, message in (("", "--model-hash is empty"), ("  ", "--model-hash is empty"),
                         ("6" * 8, "no cached model matches --model-hash '66666666'"),
                         ("4", "too short")):
        assert cli.main(["cache", "clear", "--cache-dir", str(tmp_path), "--model-hash", bad]) == 2
        err = capsys.readouterr().err
        assert message in err and "fix:" in err and "Traceback" not in err
    assert len(list_cache(tmp_path)) == 2 and (tmp_path / "perturbations" / "k.json").exists()  # nothing removed
    f = tmp_path / "afile"
    f.write_text("x")
    for action in ("ls", "clear"):
        assert cli.main(["cache", action, "--cache-dir", str(f)]) == 2
        assert f"--cache-dir '{f}' is not a folder" in capsys.readouterr().err
    assert f.read_text() == "x"
