"""The choice tasks' pair-score cache (vlbench/models/pairs/cache_tasks.py): scores kept per (pair model hash, image
content, text key), read back bit for bit; another model hash is another folder; a damaged file is a miss;
``read=False`` (--restart) reads nothing and writes over."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from vlbench import stores
from vlbench.errors import VlbenchError
from vlbench.models.pairs.cache_tasks import STORE, PairScoreCache

IMG = "img:" + hashlib.sha256(b"an image").hexdigest()


def test_scores_read_back_bit_for_bit_per_model_hash_and_image(tmp_path):
    values = np.array([0.1, 1.0, 3.0e-8, 0.999999940395], dtype=np.float32)  # 1.0 - 2**-24: a saturating p(match)
    keys = ["101 2023 102", "101 7592 102", "101 102", "101 2 102"]
    a = PairScoreCache(tmp_path, "hash-a")
    a.put(IMG, dict(zip(keys, values)))
    got = PairScoreCache(tmp_path, "hash-a").get(IMG, keys)
    assert [got[k] for k in keys] == list(values) and all(isinstance(v, np.float32) for v in got.values())
    assert PairScoreCache(tmp_path, "hash-b").get(IMG, keys) == {}  # another model: nothing shared
    other = "img:" + hashlib.sha256(b"another image").hexdigest()
    assert a.get(other, keys) == {}
    a.put(IMG, {"101 999 102": np.float32(0.5)})  # a later put keeps the scores already there
    assert set(PairScoreCache(tmp_path, "hash-a").get(IMG, [*keys, "101 999 102"])) == {*keys, "101 999 102"}
    assert a.stats["hits"] == 0 and a.stats["misses"] == 4 and a.stats["files_written"] == 2
    assert (stores.path(STORE.name, tmp_path) / "hash-a").is_dir()


def test_a_damaged_file_is_a_miss_and_restart_reads_nothing(tmp_path):
    c = PairScoreCache(tmp_path, "h")
    c.put(IMG, {"k": np.float32(0.25)})
    (path,) = (stores.path(STORE.name, tmp_path) / "h").rglob("*.json")
    assert PairScoreCache(tmp_path, "h", read=False).get(IMG, ["k"]) == {}
    path.write_text('{"scores": {"')  # cut short
    assert PairScoreCache(tmp_path, "h").get(IMG, ["k"]) == {}
    c.put(IMG, {"k": np.float32(0.75)})
    assert PairScoreCache(tmp_path, "h").get(IMG, ["k"]) == {"k": np.float32(0.75)}


@pytest.mark.parametrize("model_hash, image", [("../up", IMG), ("", IMG), ("h", "img:xyz"), ("h", "photo.jpg")])
def test_a_bad_model_hash_or_image_key_is_refused(tmp_path, model_hash, image):
    with pytest.raises(VlbenchError):
        PairScoreCache(tmp_path, model_hash).get(image, ["k"])
