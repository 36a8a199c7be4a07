"""Exact MaxSim (late interaction) on the scan's tile grid: multi-vector models (ColQwen2, ColPali).

A multi-vector model gives each item a ragged set of token vectors (:class:`TokenVectors`: tokens x dim per
item, tokens varying across items). The score of a text query ``q`` and an image ``d`` is

    MaxSim(q, d) = sum over q's tokens t of  max over d's tokens s of  <q_t, d_s>

(what ``ColQwen2Processor.score_retrieval`` / ``ColPaliProcessor.score_retrieval`` compute, over the items' own
tokens: the processors pad a batch with zero vectors, so for a document shorter than the longest of its batch
their max also sees a 0; vlbench takes the max over the document's real tokens only). The similarity matrix is
images x captions as for a dual encoder: t2i ranks a column, i2t a row of the same matrix (i2t is t2i's
score matrix transposed: an image query ranks captions by the captions' MaxSim against it).

Exactness. A BLAS product does not round an element the same in two products of different shapes
(metrics/tiles.py), so the MaxSim values are defined on a fixed grid, as the dual encoders' are:

* the tiles are :func:`~vlbench.metrics.tiles.tile_shape`'s (images x captions, fixed by the two sizes);
* inside a tile, the token products run in fixed **units** of ``gd`` images x ``gq`` captions
  (:func:`unit_shape`, fixed by the sizes and the longest items only): ONE product of those images' tokens and
  those captions' tokens, the BLAS held to one thread, so each token dot product has the same bits whoever
  asks for it;
* the max over an image's tokens is exact; the sum over a caption's tokens is taken in token order, one
  float32 addition at a time, so it does not depend on which captions share the unit.

So every reader (the whole-row pass, ``--score-block``, the streamed scan in worker threads, :func:`maxsim_matrix`
all at once) sees the same bits. Working memory: one unit's token products (at most ``UNIT_BYTES``, unless one
image and one caption alone exceed it) per worker thread, plus the tiles in flight (``tile_bytes`` each):
the gallery's token vectors are never all multiplied at once.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import numpy as np

from .. import tiles
from ..ranking import EmbeddingSource
from ..tiles import TileGrid, blas_one_thread, tile_shape

#: the bytes of one unit's token products (float32): 8 MiB stays near the cache and keeps the BLAS busy
UNIT_BYTES = 8 << 20
#: caption tokens per unit at most (the columns of a unit's product)
UNIT_QUERY_TOKENS = 4096


class TokenVectors:
    """Ragged token vectors of ``n`` items: ``flat`` (total tokens x dim, float32) and ``offsets`` (n + 1):
    item ``i`` is ``flat[offsets[i]:offsets[i + 1]]``. Every item has at least one token."""

    def __init__(self, flat: np.ndarray, offsets: np.ndarray):
        flat, offsets = np.asarray(flat), np.asarray(offsets, dtype=np.int64)
        if flat.ndim != 2:
            raise ValueError(f"token vectors are (tokens, dim), got shape {flat.shape}")
        if offsets.ndim != 1 or not len(offsets) or offsets[0] != 0 or offsets[-1] != len(flat):
            raise ValueError(f"offsets must run from 0 to {len(flat)} tokens, got {offsets[:3]}...")
        lengths = np.diff(offsets)
        if (lengths < 1).any():
            raise ValueError(f"item {int(np.flatnonzero(lengths < 1)[0])} has no token vectors (every item needs "
                             "at least one)")
        self.flat = np.ascontiguousarray(flat, dtype=np.float32)
        self.offsets, self.lengths = offsets, lengths

    @classmethod
    def from_items(cls, items) -> TokenVectors:
        """From a sequence of (tokens, dim) arrays (one per item)."""
        items = [np.asarray(x, dtype=np.float32) for x in items]
        dim = items[0].shape[1] if items else 0
        for i, x in enumerate(items):
            if x.ndim != 2 or x.shape[1] != dim:
                raise ValueError(f"item {i} has token vectors of shape {x.shape}, expected (tokens, {dim})")
        offsets = np.concatenate([[0], np.cumsum([len(x) for x in items])]).astype(np.int64)
        return cls(np.concatenate(items) if items else np.zeros((0, dim), np.float32), offsets)

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def dim(self) -> int:
        return int(self.flat.shape[1])

    @property
    def nbytes(self) -> int:
        return int(self.flat.nbytes)

    def item(self, i: int) -> np.ndarray:
        return self.flat[self.offsets[i]:self.offsets[i + 1]]

    def __getitem__(self, key) -> TokenVectors:
        """The items ``key`` (a slice, a boolean mask or an index array) as new TokenVectors."""
        ix = np.arange(len(self))[key]
        if ix.ndim == 0:
            raise TypeError("TokenVectors[i] takes a slice or an index array; item(i) gives one item's tokens")
        if len(ix) and ix[-1] - ix[0] + 1 == len(ix) and (np.diff(ix) == 1).all():  # a run: slice, no gather
            o = self.offsets
            return TokenVectors(self.flat[o[ix[0]]:o[ix[-1] + 1]], o[ix[0]:ix[-1] + 2] - o[ix[0]])
        return TokenVectors.from_items([self.item(i) for i in ix]) if len(ix) else \
            TokenVectors(np.zeros((0, self.dim), np.float32), np.zeros(1, np.int64))

    def first_copies(self) -> np.ndarray:
        """For each item, the lowest index whose token vectors are the same bits (itself when none is)."""
        seen: dict[bytes, list[int]] = {}
        first = np.arange(len(self), dtype=np.int64)
        for i in range(len(self)):
            x = self.item(i)
            h = hashlib.blake2b(x.tobytes(), digest_size=16).digest() + len(x).to_bytes(8, "little")
            for j in seen.get(h, []):
                if np.array_equal(self.item(j), x):
                    first[i] = j
                    break
            else:
                seen.setdefault(h, []).append(i)
        return first


def unit_shape(ti: int, tt: int, max_image_tokens: int, max_caption_tokens: int) -> tuple[int, int]:
    """(images, captions) per unit: powers of two dividing the tile sides, the captions' tokens at most
    UNIT_QUERY_TOKENS and the unit's products at most UNIT_BYTES (down to one image x one caption)."""
    gq = tt
    while gq > 1 and gq * max_caption_tokens > UNIT_QUERY_TOKENS:
        gq //= 2
    gd = ti
    while gd > 1 and 4 * gd * max_image_tokens * gq * max_caption_tokens > UNIT_BYTES:
        gd //= 2
    return gd, gq


def _token_sums(m: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Per caption, the sum of its columns of ``m`` (images x caption tokens) in token order, one float32
    addition at a time (the same bits whatever other captions ``m`` holds)."""
    acc = m[:, starts].copy()
    for t in range(1, int(lengths.max()) if len(lengths) else 0):
        sel = np.flatnonzero(lengths > t)
        acc[:, sel] += m[:, starts[sel] + t]
    return acc


class MaxSimGrid(TileGrid):
    """``S[i, j] = MaxSim(caption j, image i)`` on the tile grid, each tile computed unit by unit (module
    docstring). A CPU grid (NumPy): the scan computes tiles in worker threads, one BLAS thread each."""

    def __init__(self, img: TokenVectors, txt: TokenVectors, cache_bytes: int = 64 << 20):
        if img.dim != txt.dim:
            raise ValueError(f"image token vectors have size {img.dim} but caption token vectors {txt.dim}")
        self.itok, self.ttok = img, txt  # (TileGrid's img / txt are arrays; these are ragged)
        self.n_images, self.n_captions = len(img), len(txt)
        self.ti, self.tt = tile_shape(self.n_images, self.n_captions)
        self.gd, self.gq = unit_shape(self.ti, self.tt, int(img.lengths.max(initial=1)),
                                      int(txt.lengths.max(initial=1)))
        self.first_img, self.first_txt = img.first_copies(), txt.first_copies()
        self.dtype = np.dtype(np.float32)
        self.tile_bytes = self.ti * self.tt * 4
        self.device = None
        self.cache_bytes = max(cache_bytes, 2 * self.tile_bytes)
        self._tiles: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()
        self._held, self.products = 0, 0
        self._finite: bool | None = None
        self._dups = None

    def unit_bytes(self) -> int:
        """The largest unit's token products in bytes (the working memory of one worker thread)."""
        return 4 * self.gd * int(self.itok.lengths.max(initial=1)) * self.gq * int(self.ttok.lengths.max(initial=1))

    def product(self, a: int, b: int, on_device: bool = False) -> np.ndarray:
        """Tile ``(a, b)``: its units' token products reduced to MaxSim (float32, images x captions)."""
        i0, i1 = a * self.ti, min(self.n_images, (a + 1) * self.ti)
        t0, t1 = b * self.tt, min(self.n_captions, (b + 1) * self.tt)
        io, to = self.itok.offsets, self.ttok.offsets
        out = np.empty((i1 - i0, t1 - t0), dtype=np.float32)
        for d0 in range(i0, i1, self.gd):
            d1 = min(i1, d0 + self.gd)
            docs = self.itok.flat[io[d0]:io[d1]]
            dstarts = io[d0:d1] - io[d0]
            for q0 in range(t0, t1, self.gq):
                q1 = min(t1, q0 + self.gq)
                prod = docs @ self.ttok.flat[to[q0]:to[q1]].T  # ONE product per unit (image tokens x caption tokens)
                best = np.maximum.reduceat(prod, dstarts, axis=0)  # per image: max over its tokens (exact)
                out[d0 - i0:d1 - i0, q0 - t0:q1 - t0] = _token_sums(best, to[q0:q1] - to[q0], self.ttok.lengths[q0:q1])
        return out

    def finite_range(self) -> bool:
        """No MaxSim can be NaN or infinite: finite tokens whose norms bound every sum far from overflow."""
        if self._finite is None:
            big = float(np.finfo(np.float32).max) / 4
            ni = float(np.sqrt(np.einsum("ij,ij->i", self.itok.flat, self.itok.flat, dtype=np.float64).max(initial=0)))
            nt = float(np.sqrt(np.einsum("ij,ij->i", self.ttok.flat, self.ttok.flat, dtype=np.float64).max(initial=0)))
            longest = int(self.ttok.lengths.max(initial=1))
            self._finite = bool(np.isfinite([ni, nt]).all() and longest * ni * nt < big)
        return self._finite


class MaxSimSource(EmbeddingSource):
    """The similarity source of a multi-vector model: MaxSim of the caption tokens against the image tokens,
    read from the one :class:`MaxSimGrid` (every schedule of the scan reads it, as for a dual encoder)."""

    def __init__(self, image_tokens: TokenVectors, text_tokens: TokenVectors, device: str | None = None):
        self.image_tokens, self.text_tokens = image_tokens, text_tokens
        self.n_images, self.n_captions = len(image_tokens), len(text_tokens)
        self.device = None  # MaxSim runs on the CPU (NumPy) whatever device the model ran on
        self.grid = MaxSimGrid(image_tokens, text_tokens)


def maxsim_matrix(image_tokens: TokenVectors, text_tokens: TokenVectors) -> np.ndarray:
    """The whole MaxSim matrix (images x captions, float32) at once: every tile of the grid, in order, in this
    thread; the reference the streamed scan equals bit for bit (it holds the full matrix: small galleries)."""
    grid = MaxSimGrid(image_tokens, text_tokens)
    out = np.empty((grid.n_images, grid.n_captions), dtype=np.float32)
    with blas_one_thread(None):
        for a in range(-(-grid.n_images // grid.ti)):
            for b in range(-(-grid.n_captions // grid.tt)):
                out[a * grid.ti:(a + 1) * grid.ti, b * grid.tt:(b + 1) * grid.tt] = grid.product(a, b)
    fi, ft = grid.first_img, grid.first_txt
    return out[fi][:, ft]  # a duplicate item's scores are its first copy's (as the grid reads them)


def plan_bytes(n_images: int, image_tokens: int, n_captions: int, caption_tokens: int, dim: int) -> dict:
    """The memory a multi-vector run holds, in bytes, before encoding: the gallery's and the captions' token
    vectors (float32), and the scan's working memory (the units in the worker threads and the tiles)."""
    ti, tt = tile_shape(n_images, n_captions)
    gd, gq = unit_shape(ti, tt, image_tokens, caption_tokens)
    return dict(per_image=4 * image_tokens * dim, images=4 * n_images * image_tokens * dim,
                captions=4 * n_captions * caption_tokens * dim,
                scan=tiles.WORKERS * (4 * gd * image_tokens * gq * caption_tokens + 2 * 4 * ti * tt))
