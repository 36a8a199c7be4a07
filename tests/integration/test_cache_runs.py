"""Runs and the embedding cache. Warm runs: nothing encoded, the model not even loaded; both top-k paths give the
same ranking. Runs over a damaged cache give the numbers of a clean cache: the damaged shard
is reported in the run's cache statistics and on the console, its items are encoded again."""

from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pytest

import vlbench.encoding.cache as C


def _run(manifest, cache, out, **kw):
    from vlbench.pipeline.runner import run

    return run(model="counting", dataset=f"custom:{manifest}", cache_dir=str(cache), out=str(out), quiet=True,
               num_workers=0, n_boot=10, batch_size=4, **kw).results


def _image_shards(cache):
    return sorted(cache.glob("embeddings/*/image/*.npz"))


def _tamper(shard, how):
    with np.load(shard, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    v = data["vectors"]
    nan = v.copy()
    nan[0] = np.nan
    data["vectors"] = {"scaled": v * 3, "zeroed": np.zeros_like(v), "swapped": v[::-1].copy(), "fewer": v[:-1],
                       "nan": nan}[how]
    buf = io.BytesIO()
    np.savez(buf, **data)
    shard.write_bytes(buf.getvalue())


@pytest.fixture
def clean(counting_plugin, manifest, tmp_path):
    cache = tmp_path / "cache"
    res = _run(manifest, cache, tmp_path / "clean")
    assert len(_image_shards(cache)) == 3  # 12 images in batches of 4
    return cache, res


@pytest.mark.parametrize("how", ["scaled", "zeroed", "swapped", "fewer", "nan"])
def test_a_run_over_a_changed_shard_equals_a_clean_run(clean, manifest, tmp_path, monkeypatch, capsys, how):
    cache, ref = clean
    shard = _image_shards(cache)[1]
    _tamper(shard, how)
    backup = tmp_path / "tampered.npz"
    backup.write_bytes(shard.read_bytes())
    capsys.readouterr()
    got = _run(manifest, cache, tmp_path / "after")
    assert got["results"] == ref["results"]
    cache_stats = got["encoding"]["cache"]
    assert cache_stats["bad_shards"] == 1 and cache_stats["refused_shards"] == [f"image/{shard.name}"]
    assert got["encoding"]["images_encoded"] == 4 and got["encoding"]["texts_encoded"] == 0
    err = capsys.readouterr().err
    assert f"embedding cache shard {shard}" in err and "is damaged" in err
    if how in ("fewer", "nan"):
        return  # read unchecked, these ended in a traceback (IndexError, or NaN scores)
    # the reference: had the tampered shard been read without its check, the numbers would differ
    monkeypatch.setattr(C, "_shard_problem", lambda *a: None)
    shard.with_name(shard.name + ".damaged").unlink()
    shard.write_bytes(backup.read_bytes())
    unchecked = _run(manifest, cache, tmp_path / "unchecked")
    assert unchecked["encoding"]["images_encoded"] == 0 and unchecked["results"] != ref["results"]


def test_a_cache_cleared_while_the_run_reads_it_is_encoded_again(clean, manifest, tmp_path, monkeypatch, capsys):
    cache, ref = clean
    load = C.EmbeddingCache._load_index

    def clear_after_listing(self, modality):
        index = load(self, modality)
        from vlbench.encoding.cache import clear_cache

        clear_cache(cache)  # `vlbench cache clear` in another terminal, after the run listed the shards
        return index

    monkeypatch.setattr(C.EmbeddingCache, "_load_index", clear_after_listing)
    capsys.readouterr()
    got = _run(manifest, cache, tmp_path / "after")
    assert got["results"] == ref["results"]
    assert got["encoding"]["images_encoded"] == 12 and got["encoding"]["cache"]["vanished_shards"] >= 3
    assert "removed while this run was reading the cache" in capsys.readouterr().err


def test_an_old_cache_without_checksums_is_encoded_again_once(clean, manifest, tmp_path, capsys):
    cache, ref = clean
    for shard in cache.glob("embeddings/*/*/*.npz"):
        with np.load(shard, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files if k != "checksum"}
        buf = io.BytesIO()
        np.savez(buf, **data)
        shard.write_bytes(buf.getvalue())
    capsys.readouterr()
    first = _run(manifest, cache, tmp_path / "first")
    assert first["results"] == ref["results"] and first["encoding"]["cache"]["unverified_shards"] >= 4
    assert "older vlbench without a checksum" in capsys.readouterr().err
    second = _run(manifest, cache, tmp_path / "second")
    assert second["encoding"]["images_encoded"] == 0 and second["encoding"]["texts_encoded"] == 0
    assert second["encoding"]["cache"]["unverified_shards"] == 0 and "checksum" not in capsys.readouterr().err
    assert json.loads((tmp_path / "second" / "results.json").read_text())["results"] == ref["results"]


# ------------------------------------------------------------------------------------------------------------
# warm runs


def test_warm_run_does_not_load_the_model(tiny_models, manifest, tmp_path):
    from vlbench.pipeline.runner import run

    folder = tmp_path / "clip"
    shutil.copytree(tiny_models("clip"), folder)
    cache = str(tmp_path / "cache")
    kw = dict(dataset=f"custom:{manifest}", quiet=True, num_workers=0, cache_dir=cache, n_boot=50,
              perturb="distraction-true,shuffle-all-words")
    cold = run(model=f"clip:{folder}", out=str(tmp_path / "cold"), **kw)
    warm = run(model=f"clip:{folder}", out=str(tmp_path / "warm"), **kw)
    assert cold.results["encoding"]["model_loaded"] is True
    assert warm.results["encoding"]["model_loaded"] is False
    assert warm.results["encoding"]["images_encoded"] == 0 and warm.results["encoding"]["texts_encoded"] == 0
    assert warm.results["results"] == cold.results["results"]
    assert warm.results["model"] == cold.results["model"]
    # other weights in the same folder: a different fingerprint, so the model is loaded and re-encodes
    from safetensors.torch import load_file, save_file

    wfile = next(folder.glob("*.safetensors"))
    state = load_file(wfile)
    key = next(k for k in state if k.endswith("text_projection.weight"))
    state[key] = state[key] * 2 + 0.01
    save_file(state, wfile, metadata={"format": "pt"})
    changed = run(model=f"clip:{folder}", out=str(tmp_path / "changed"), **kw)
    assert changed.results["encoding"]["model_loaded"] is True
    assert changed.results["model"]["hash"] != cold.results["model"]["hash"]
    assert changed.results["encoding"]["texts_encoded"] > 0


@pytest.mark.parametrize("seed", range(20))
def test_numpy_and_torch_topk_paths_agree(seed, monkeypatch):
    from vlbench.metrics import ranking as M  # the shared ranking step

    rng = np.random.default_rng(seed)
    S = rng.integers(0, 4, size=(int(rng.integers(3, 30)), int(rng.integers(3, 60)))).astype(np.float32)
    K = int(rng.integers(1, S.shape[1] + 1))
    monkeypatch.setattr(M, "_use_torch", lambda block: True)
    a = M._sorted_topk(S, K)
    monkeypatch.setattr(M, "_use_torch", lambda block: False)
    b = M._sorted_topk(S, K)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    ref = np.argsort(-S, axis=1, kind="stable")[:, :K]
    assert np.array_equal(a[0], ref)
