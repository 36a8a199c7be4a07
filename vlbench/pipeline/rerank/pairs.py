"""The pair model's work in a reranked run: each distinct (image, caption) pair of a condition scored once, its
image state computed once per image and condition, and every score kept in the pair-score cache.

The cache is the embedding cache's store (encoding/cache.py: checksummed shards, atomic writes, ``vlbench cache``
lists and clears it) under the pair model's own hash (``PairScorer.model_hash``), modality ``pairs``: one float32
score per key, the key a SHA-256 of the image's content key (its file's hash, and the condition's image transform
where it changes the image: the key the embedding cache gives that image) and the caption's text key (what the
pair model reads, ``PairScorer.text_keys``). So a condition that leaves the images as they are re-scores only the
pairs whose captions changed, and a second run re-scores nothing. ``--no-cache``: neither read nor written;
``--restart``: written, not read.

The pairs to score go to the model grouped by image: a chunk of ``batch_size`` images is decoded (through the
condition's image transform), preprocessed and encoded (``encode_images``), then all of the chunk's pairs are
scored in batches of ``batch_size`` pairs, in a fixed order (image, then caption).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from ...encoding.cache import EmbeddingCache, item_key
from ...encoding.images import file_key, load_image
from ...encoding.variant_images import variant_key
from ...errors import VlbenchError

MODALITY = "pairs"


class PairWork:
    """Scores pairs for a run; counts what it scored and what the cache gave (``counts``)."""

    def __init__(self, scorer, *, cache_dir=None, read: bool = True, write: bool = True, batch_size: int = 64,
                 progress: bool = True, label: str | None = None):
        self.scorer = scorer
        self.hash = scorer.model_hash()
        self.cache = EmbeddingCache(cache_dir, self.hash, read=read, write=write, label=label) \
            if (read or write) else None
        self.batch_size = int(batch_size)
        self.progress = progress
        self.counts = {"pairs": 0, "scored": 0, "cached": 0, "images_encoded": 0, "image_seconds": 0.0,
                       "pair_seconds": 0.0}

    def score(self, img: np.ndarray, txt: np.ndarray, texts: list, image_keys: list, load) -> np.ndarray:
        """float32 scores of the pairs (``img[i]``, ``txt[i]``): gallery image ids and caption ids; ``texts``:
        the condition's captions; ``image_keys``: each gallery image's content key under the condition;
        ``load(i)``: image i as the condition shows it (a PIL image)."""
        img, txt = np.asarray(img, dtype=np.int64), np.asarray(txt, dtype=np.int64)
        self.counts["pairs"] += len(img)
        if not len(img):
            return np.zeros(0, dtype=np.float32)
        used = np.unique(txt)
        tkeys = dict(zip(used.tolist(), self.scorer.text_keys([texts[j] for j in used])))
        keys = [item_key(f"{image_keys[i]}|{tkeys[j]}") for i, j in zip(img.tolist(), txt.tolist())]
        distinct, first, back = np.unique(np.array(keys), return_index=True, return_inverse=True)
        scores = np.full(len(distinct), np.nan, dtype=np.float32)
        if self.cache is not None and self.cache.read:
            found, vals = self.cache.lookup(MODALITY, distinct.tolist())
            if vals is not None:
                scores[found] = vals[:, 0]
            self.counts["cached"] += int(found.sum())
        todo = np.flatnonzero(np.isnan(scores))
        if len(todo):
            scores[todo] = self._forward(img[first[todo]], txt[first[todo]], distinct[todo], texts, load)
        return scores[np.asarray(back).ravel()]

    def _forward(self, img, txt, keys, texts, load) -> np.ndarray:
        """The pairs nobody scored yet, through the model: by image chunk, pairs in batches."""
        order = np.lexsort((txt, img))
        img, txt, keys = img[order], txt[order], keys[order]
        out = np.empty(len(img), dtype=np.float32)
        images = np.unique(img)
        bar = _bar(len(img), self.progress)
        bs = self.batch_size
        for a in range(0, len(images), bs):
            chunk = images[a:a + bs]
            t0 = time.perf_counter()
            state = self.scorer.encode_images(self.scorer.collate([self.scorer.preprocess(load(int(i)))
                                                                   for i in chunk]))
            self.counts["images_encoded"] += len(chunk)
            t1 = time.perf_counter()
            self.counts["image_seconds"] += t1 - t0
            lo, hi = np.searchsorted(img, chunk[0]), np.searchsorted(img, chunk[-1], side="right")
            row = np.searchsorted(chunk, img[lo:hi])
            for b in range(lo, hi, bs):
                e = min(hi, b + bs)
                got = np.asarray(self.scorer.score_pairs(state[row[b - lo:e - lo]],
                                                         [texts[j] for j in txt[b:e]]), dtype=np.float32)
                if got.shape != (e - b,) or not np.isfinite(got).all():
                    raise VlbenchError(f"the pair scorer {getattr(self.scorer, 'name', '?')} returned "
                                       f"{'shape ' + str(got.shape) if got.shape != (e - b,) else 'non-finite scores'} "
                                       f"for {e - b} pairs", "score_pairs must return one finite float per pair "
                                       "(vlbench.testing.check_pair_scorer checks a scorer)")
                out[b:e] = got
                if bar is not None:
                    bar.update(e - b)
            self.counts["pair_seconds"] += time.perf_counter() - t1
            if self.cache is not None:
                self.cache.add(MODALITY, keys[lo:hi].tolist(), out[lo:hi, None])
        if bar is not None:
            bar.close()
        self.counts["scored"] += len(img)
        back = np.empty_like(order)
        back[order] = np.arange(len(order))
        return out[back]


def _bar(total: int, progress: bool):
    if not progress or not total:
        return None
    from tqdm.auto import tqdm  # lazy: only when there are pairs to score and progress is shown

    return tqdm(total=total, desc="pair scoring", unit="pair", file=sys.stderr, leave=False)


def image_loader(paths: list, condition):
    """``load(i)``: gallery image i as ``condition`` shows it (decoded by the suite's rules, then the condition's
    image transform, as the first stage saw it), and each image's content key under the condition."""
    contents = [file_key(p) for p in paths]
    transform = getattr(condition, "image", None)
    keys = [item_key(c) if transform is None else variant_key(transform, i, c) for i, c in enumerate(contents)]

    def load(i: int):
        image = load_image(paths[i])
        return image if transform is None else transform(image, i, contents[i])

    return load, keys
