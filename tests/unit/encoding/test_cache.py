"""The embedding cache: keys, atomicity, CLI, and the memory bound of block-wise metrics; shards prove their
contents: a shard whose vectors were changed on disk (scaled, zeroed, NaN, swapped between keys,
fewer than its keys), a shard of an older vlbench without a checksum and a shard removed while a run reads the
cache are never used; their items are encoded again."""

from __future__ import annotations

import io
import tracemalloc

import numpy as np
import pytest

from vlbench.cli import main
from vlbench.encoding.cache import EmbeddingCache, clear_cache, list_cache, shard_checksum


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


def test_cache_cli_ls_and_clear(counting_plugin, manifest, tmp_path, capsys):
    from vlbench.pipeline.runner import run

    cache = tmp_path / "c"
    run(model="counting", dataset=f"custom:{manifest}", cache_dir=str(cache), out=str(tmp_path / "r"), quiet=True,
        num_workers=0)
    capsys.readouterr()
    assert main(["cache", "ls", "--cache-dir", str(cache)]) == 0  # in-process: `vlbench cache ls`
    rows = {ln.split()[2]: ln.split() for ln in capsys.readouterr().out.splitlines()[1:3]}  # hash, model, ...
    assert rows["image"][1] == "counting" and rows["image"][3] == "12" and rows["text"][3] == "60"
    assert clear_cache(cache) == 1 and list_cache(cache) == []


@pytest.mark.slow  # a 20,000 x 20,000 block-wise scoring pass
def test_block_metrics_memory_is_bounded():
    """From embeddings, the metric code holds O(block) memory, not the n_images x n_captions matrix."""
    from vlbench.metrics.compute import EmbeddingSource, evaluate

    rng = np.random.default_rng(0)
    n_img, per, d = 4000, 5, 32
    img = rng.standard_normal((n_img, d)).astype(np.float32)
    txt = np.repeat(img, per, axis=0) + rng.standard_normal((n_img * per, d)).astype(np.float32)
    full = n_img * n_img * per * 4  # 320 MB if materialized
    block = 2 << 20
    tracemalloc.start()
    evaluate(EmbeddingSource(img, txt), np.repeat(np.arange(n_img), per), block_bytes=block)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # a block plus its same-size temporaries, plus O(n) per-query state: the streamed scan's head (K <= 10 int64
    # ids and float64 scores: 160 B), the best positive and counts (24 B) and the per-query metric arrays (~14 x
    # 8 B) of the larger direction, about 300 B a query; 400 B leaves room without admitting O(n^2)
    assert peak < 8 * block + 400 * n_img * per, (peak, full)
    assert peak < full / 10


def _fake_model(root, model_hash, label=None):
    c = EmbeddingCache(root, model_hash, label=label)
    c.add("text", ["k1", "k2"], np.ones((2, 4), dtype=np.float32))
    return c


def test_clear_needs_an_exact_hash_or_an_unambiguous_prefix(tmp_path):
    """`cache clear --model-hash 2` removed every model whose hash starts with 2."""
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


def test_cache_ls_shows_a_header_model_names_and_perturbations(tmp_path, capsys):
    from vlbench.encoding.cache import list_perturbation_cache

    _fake_model(tmp_path, "4" * 64, label="clip:openai/clip-vit-base-patch32")
    (tmp_path / "perturbations").mkdir()
    (tmp_path / "perturbations" / "abc.json").write_text('{"typos": {}, "shuffle_words": {}}')
    assert list_cache(tmp_path)[0]["model"] == "clip:openai/clip-vit-base-patch32"
    assert [r["perturbations"] for r in list_perturbation_cache(tmp_path)] == [["shuffle_words", "typos"]]
    code = main(["cache", "ls", "--cache-dir", str(tmp_path)])  # in-process: `vlbench cache ls`
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert code == 0, err
    assert lines[0].split()[:3] == ["model", "hash", "model"]
    assert "clip:openai/clip-vit-base-patch32" in lines[1] and "4444444444444444" in lines[1]
    assert "perturbed captions: 1 cached set(s)" in out and "shuffle_words, typos" in out
    assert clear_cache(tmp_path) == 2  # one model folder + one perturbation file
    assert list_cache(tmp_path) == [] and list_perturbation_cache(tmp_path) == []


def test_cache_clear_refuses_empty_or_unmatched_hash_and_file_cache_dir(tmp_path, capsys):
    """`cache clear --model-hash ""` removed everything; a file as --cache-dir was a traceback."""
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


# ------------------------------------------------------------------------------------------------------------
# shards prove their contents

H = "a" * 64


def _rewrite(shard, **members):
    """Rewrite a shard's npz members on disk, keeping the others (the stored checksum included)."""
    with np.load(shard, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    data.update(members)
    for k in [k for k, v in members.items() if v is None]:
        del data[k]
    buf = io.BytesIO()
    np.savez(buf, **data)
    shard.write_bytes(buf.getvalue())


def _one_shard(tmp_path, vecs):
    c = EmbeddingCache(tmp_path, H)
    c.add("text", ["k1", "k2", "k3"], vecs)
    return next((tmp_path / "embeddings").rglob("*.npz"))


VECS = np.array([[0.6, 0.8], [1.0, 0.0], [0.0, 1.0]], np.float32)
TAMPER = {
    "scaled": lambda v: v * 2,
    "zeroed": lambda v: np.zeros_like(v),
    "swapped": lambda v: v[[1, 0, 2]],
    "nan": lambda v: np.where(np.arange(3)[:, None] == 2, np.nan, v).astype(np.float32),
    "fewer": lambda v: v[:2],
    "float64": lambda v: v.astype(np.float64),
}


@pytest.mark.parametrize("how", sorted(TAMPER))
def test_a_changed_shard_is_reported_moved_aside_and_never_used(tmp_path, how):
    shard = _one_shard(tmp_path, VECS)
    with np.load(shard) as z:
        assert str(z["checksum"]) == shard_checksum(H, "text", z["keys"], VECS)
    _rewrite(shard, vectors=TAMPER[how](VECS))
    said = []
    c = EmbeddingCache(tmp_path, H, warn=said.append)
    found, got = c.lookup("text", ["k1", "k2", "k3", "k4"])
    assert found.tolist() == [False] * 4 and got is None
    assert c.stats["bad_shards"] == 1 and c.stats["hits"] == 0 and c.stats["misses"] == 4
    assert c.stats["refused_shards"] == [f"text/{shard.name}"]
    assert len(said) == 1 and str(shard) in said[0] and "damaged" in said[0] and "encoded again" in said[0]
    assert not shard.exists() and shard.with_name(shard.name + ".damaged").is_file()
    # the next lookup, and the next run, meet nothing damaged: the shard was moved aside
    assert not c.lookup("text", ["k1"])[0].any() and len(said) == 1
    c.add("text", ["k1", "k2", "k3"], VECS)  # re-encoded
    again = EmbeddingCache(tmp_path, H, warn=said.append)
    found, got = again.lookup("text", ["k2", "k1"])
    assert found.all() and np.array_equal(got, VECS[[1, 0]]) and again.stats["bad_shards"] == 0 and len(said) == 1


def test_a_forged_checksum_over_nan_vectors_is_refused_too(tmp_path):
    shard = _one_shard(tmp_path, VECS)
    bad = VECS.copy()
    bad[0] = np.nan
    with np.load(shard) as z:
        keys = z["keys"]
    _rewrite(shard, vectors=bad, checksum=np.array(shard_checksum(H, "text", keys, bad)))
    said = []
    c = EmbeddingCache(tmp_path, H, warn=said.append)
    assert not c.lookup("text", ["k2"])[0].any()
    assert "NaN" in said[0] and c.stats["bad_shards"] == 1


def test_an_intact_shard_beside_a_damaged_one_is_still_used(tmp_path):
    c = EmbeddingCache(tmp_path, H)
    c.add("image", ["a1", "a2"], VECS[:2])
    c.add("image", ["b1"], VECS[2:])
    shards = sorted((tmp_path / "embeddings").rglob("*.npz"))
    bad = next(s for s in shards if len(np.load(s)["keys"]) == 2)
    _rewrite(bad, vectors=VECS[:2] * 0.5)
    fresh = EmbeddingCache(tmp_path, H, warn=lambda m: None)
    found, got = fresh.lookup("image", ["a1", "b1", "a2"])
    assert found.tolist() == [False, True, False] and np.array_equal(got, VECS[2:])
    assert fresh.stats["hits"] == 1 and fresh.stats["misses"] == 2 and fresh.stats["bad_shards"] == 1


def test_a_shard_of_an_older_vlbench_is_not_trusted_and_reported_once(tmp_path):
    shard = _one_shard(tmp_path, VECS)
    _rewrite(shard, checksum=None)  # what vlbench wrote before shards carried a checksum
    said = []
    c = EmbeddingCache(tmp_path, H, warn=said.append)
    assert not c.lookup("text", ["k1", "k2"])[0].any()
    assert not c.lookup("text", ["k3"])[0].any()
    assert c.stats["unverified_shards"] == 1 and c.stats["bad_shards"] == 0 and len(said) == 1
    assert "older vlbench without a checksum" in said[0] and "encoded again" in said[0]
    assert shard.exists()  # left for an older vlbench that may share the cache
    c.add("text", ["k1", "k2", "k3"], VECS)  # the same batch: the same name, now with a checksum
    again = EmbeddingCache(tmp_path, H, warn=said.append)
    found, got = again.lookup("text", ["k1", "k2", "k3"])
    assert found.all() and np.array_equal(got, VECS) and again.stats["unverified_shards"] == 0 and len(said) == 1


def test_keys_a_newer_shard_proves_are_served_without_a_word_about_an_old_one(tmp_path):
    shard = _one_shard(tmp_path, VECS)
    _rewrite(shard, checksum=None)
    shard.rename(shard.with_name("0000-old.npz"))
    EmbeddingCache(tmp_path, H).add("text", ["k1"], VECS[:1])
    said = []
    c = EmbeddingCache(tmp_path, H, warn=said.append)
    found, got = c.lookup("text", ["k1"])
    assert found.all() and np.array_equal(got, VECS[:1]) and said == [] and c.stats["unverified_shards"] == 0


def test_a_shard_removed_between_index_and_read_is_encoded_again_not_a_traceback(tmp_path):
    shard = _one_shard(tmp_path, VECS)
    said = []
    c = EmbeddingCache(tmp_path, H, warn=said.append)
    c._load_index("text")  # the run has listed the cache ...
    shard.unlink()  # ... and `vlbench cache clear` runs meanwhile
    found, got = c.lookup("text", ["k1", "k2"])
    assert found.tolist() == [False, False] and got is None
    assert c.stats["vanished_shards"] == 1 and c.stats["bad_shards"] == 0
    assert "removed while this run was reading" in said[0]
    import shutil

    shutil.rmtree(tmp_path / "embeddings")  # the whole store gone: writing the re-encoded batch still works
    c.add("text", ["k1", "k2"], VECS[:2])
    found, got = EmbeddingCache(tmp_path, H).lookup("text", ["k2"])
    assert found.all() and np.array_equal(got, VECS[1:2])


def test_writing_refuses_vectors_that_could_not_be_proven_useful(tmp_path):
    c = EmbeddingCache(tmp_path, H)
    with pytest.raises(ValueError, match="refusing to cache"):
        c.add("text", ["k1", "k2"], np.array([[1.0, np.nan], [0.0, 1.0]], np.float32))
    with pytest.raises(ValueError, match="refusing to cache"):
        c.add("text", ["k1", "k2"], VECS[:1])
    assert not list(tmp_path.rglob("*.npz"))
