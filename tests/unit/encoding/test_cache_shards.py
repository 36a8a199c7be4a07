"""Embedding-cache shards prove their contents (issue #21 item 7): a shard whose vectors were changed on disk
(scaled, zeroed, NaN, swapped between keys, fewer than its keys), a shard of an older vlbench without a checksum
and a shard removed while a run reads the cache are never used; their items are encoded again."""

from __future__ import annotations

import io

import numpy as np
import pytest

from vlbench.encoding.cache import EmbeddingCache, shard_checksum

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
