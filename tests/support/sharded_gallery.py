"""Galleries for the exactness tests of scoring (one piece = blocks = torchrun ranks), made where a claim of
bit-exactness could fail: real-valued, normalised float32 embeddings (whose products round), bit-identical
duplicate vectors, and near ties (vectors a few ulp apart, whose scores the rounding of a product decides).
Run as a script under torchrun, each rank scores its slice of the gallery and rank 0 saves the per-query values.
"""

from __future__ import annotations

import sys

import numpy as np


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def gallery(n_images: int = 200_000, n_captions: int = 600, dim: int = 64, seed: int = 0):
    """(images, captions, caption_to_image), real-valued and normalised: every 97th image repeats image 3 and
    every 89th caption repeats caption 2 bit for bit (duplicates in every shard, the first copy in the first);
    every 50th image is a near twin of the one before (a few ulp apart: near ties); a third of the captions
    are their image plus a little noise (positives at the top, competing with the twins), the rest random
    (positives far down); captions describe the first tenth of the gallery."""
    rng = np.random.default_rng(seed)
    img = _unit(rng.standard_normal((n_images, dim)))
    twins = np.arange(50, n_images, 50)
    img[twins] = img[twins - 1] * np.float32(1 + 2 ** -22)  # 1-2 ulp larger in every coordinate
    img[5::97] = img[3]
    c2i = rng.integers(0, max(1, n_images // 10), n_captions)
    txt = _unit(rng.standard_normal((n_captions, dim)))
    near = np.arange(0, n_captions, 3)
    txt[near] = _unit(img[c2i[near]] + 0.05 * rng.standard_normal((len(near), dim)))
    txt[9::89] = txt[2]
    return img, txt, c2i


def per_query(ev) -> dict:
    """Every per-query column of both directions and the top lists, as flat arrays."""
    out = {}
    for d in ("i2t", "t2i"):
        for name, col in ev.per_query(d).items():
            out[f"{d}/{name}"] = np.asarray(col)
        out[f"{d}/top"] = ev.direction(d).top
    return out


def independent_best_ranks(sim: np.ndarray, c2i: np.ndarray) -> dict:
    """The tie rule recomputed with plain NumPy, not vlbench's ranking: per query, the 1-based rank of its best
    positive when candidates are ordered by score descending, then index ascending (a stable sort of -score);
    i2t queries are the images with at least one caption."""
    n_img, n_cap = sim.shape
    t2i = np.empty(n_cap, dtype=np.int64)
    for j in range(n_cap):
        order = np.argsort(-sim[:, j], kind="stable")
        t2i[j] = int(np.flatnonzero(order == c2i[j])[0]) + 1
    queries = np.unique(c2i)
    i2t = np.empty(len(queries), dtype=np.int64)
    for q, i in enumerate(queries):
        order = np.argsort(-sim[i], kind="stable")
        i2t[q] = int(np.flatnonzero(np.isin(order, np.flatnonzero(c2i == i)))[0]) + 1
    return {"i2t": i2t, "t2i": t2i}


def main(out: str, block: str, n_images: int, dim: int) -> None:
    import torch.distributed as dist

    from vlbench.metrics.compute import EmbeddingSource, evaluate
    from vlbench.metrics.sharded import TorchGroup

    dist.init_process_group("gloo")
    img, txt, c2i = gallery(n_images, dim=dim)
    ev = evaluate(EmbeddingSource(img, txt), c2i, score_block=block, group=TorchGroup(dist))
    if dist.get_rank() == 0:
        np.savez(out, **per_query(ev))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
