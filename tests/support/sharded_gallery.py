"""A large gallery with exact ties and bit-identical duplicates, for the sharded-scoring tests; run as a
script under torchrun, each rank scores its slice of the gallery and rank 0 saves the per-query values."""

from __future__ import annotations

import sys

import numpy as np


def gallery(n_images: int = 200_000, n_captions: int = 600, dim: int = 16, seed: int = 0):
    """(images, captions, caption_to_image): coarse values (halves) make many exact score ties; every 97th
    image repeats image 3 and every 89th caption repeats caption 2 bit for bit (so duplicates sit in every
    shard, and the first copy in the first); captions describe the first tenth of the gallery."""
    rng = np.random.default_rng(seed)
    img = (np.round(rng.standard_normal((n_images, dim)) * 2) / 2).astype(np.float32)
    txt = (np.round(rng.standard_normal((n_captions, dim)) * 2) / 2).astype(np.float32)
    img[5::97] = img[3]
    txt[9::89] = txt[2]
    c2i = rng.integers(0, max(1, n_images // 10), n_captions)
    txt[::3] = img[c2i[::3]]  # a third of the captions equal their image: ties at the top of the ranking
    return img, txt, c2i


def per_query(ev) -> dict:
    """Every per-query column of both directions and the top lists, as flat arrays."""
    out = {}
    for d in ("i2t", "t2i"):
        for name, col in ev.per_query(d).items():
            out[f"{d}/{name}"] = np.asarray(col)
        out[f"{d}/top"] = ev.direction(d).top
    return out


def main(out: str, block: str, n_images: int) -> None:
    import torch.distributed as dist

    from vlbench.metrics.compute import EmbeddingSource, evaluate
    from vlbench.metrics.sharded import TorchGroup

    dist.init_process_group("gloo")
    img, txt, c2i = gallery(n_images)
    ev = evaluate(EmbeddingSource(img, txt), c2i, score_block=block, group=TorchGroup(dist))
    if dist.get_rank() == 0:
        np.savez(out, **per_query(ev))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
