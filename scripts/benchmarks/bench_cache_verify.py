"""The read cost of proving embedding-cache shards.

Writes N random unit vectors of size D through vlbench's own EmbeddingCache (shards of the run's default batch
sizes: 64 for images, 256 for texts), then times a full lookup of every key by a fresh cache object (what a warm
run does) with the checksum check on and off, alternating, REPEATS times each, and prints the medians.

    .venv/bin/python scripts/benchmarks/bench_cache_verify.py [--n 25000] [--dim 512] [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import vlbench.encoding.cache as C


def _timed_lookup(root: Path, model_hash: str, modality: str, keys: list[str], check: bool) -> float:
    real = C._shard_problem
    if not check:
        C._shard_problem = lambda *a: None
    try:
        cache = C.EmbeddingCache(root, model_hash)
        t0 = time.perf_counter()
        found, vecs = cache.lookup(modality, keys)
        dt = time.perf_counter() - t0
    finally:
        C._shard_problem = real
    assert found.all() and vecs.shape == (len(keys), vecs.shape[1])
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=25_000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((args.n, args.dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    keys = [C.item_key(f"item {i}") for i in range(args.n)]
    model_hash = "b" * 64
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cache = C.EmbeddingCache(root, model_hash)
        for modality, batch in (("image", 64), ("text", 256)):
            for i in range(0, args.n, batch):
                cache.add(modality, keys[i:i + batch], vecs[i:i + batch])
        print(f"{args.n:,} x {args.dim} float32 vectors ({vecs.nbytes / 1e6:.1f} MB), medians of {args.repeats}")
        for modality, batch in (("image", 64), ("text", 256)):
            times = {True: [], False: []}
            _timed_lookup(root, model_hash, modality, keys, True)  # page cache warm for both
            for _ in range(args.repeats):
                for check in (False, True):
                    times[check].append(_timed_lookup(root, model_hash, modality, keys, check))
            on, off = statistics.median(times[True]), statistics.median(times[False])
            print(f"{modality}: shards of {batch}: lookup {off:.3f} s unchecked, {on:.3f} s checked "
                  f"(+{on - off:.3f} s, +{(on - off) / off * 100:.0f}%)")


if __name__ == "__main__":
    main()
