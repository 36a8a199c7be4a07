"""The one scorer: every similarity of an (image, caption) embedding pair comes from one fixed grid of tiles.

A matrix product does not round an element the same wherever it sits: a BLAS picks its kernel (and, inside
it, the code for the edge of a register tile, a one-row side or a small problem) by the product's shape and
the element's position, and the same dot product of two float32 vectors can come out 1-2 ulp apart in two
products (docs/metrics.md, "One tiled scorer", has measured cases). So exactness is not left to where a
block, a shard or a rank happens to cut. The similarity matrix ``S`` (images x captions) is defined as:

* the **tile grid** is fixed by the data's shape only: ``TI`` image rows x ``TT`` caption columns
  (:func:`tile_shape`), tile ``(a, b)`` covering rows ``a*TI:(a+1)*TI`` and columns ``b*TT:(b+1)*TT``
  (the last ones shorter);
* tile ``(a, b)`` is ONE product ``image_rows @ caption_rows.T`` of exactly that shape, with the BLAS held to
  one thread (threadpoolctl), so its every element has the same bits whichever schedule asks for it;
* ``S[i, j]`` is the element of the tile holding ``(first(i), first(j))``, where ``first`` maps a vector to
  the lowest index holding the same bits: a duplicate's score IS its first copy's, never recomputed.

Every reader (the one-piece pass in query blocks, ``--score-block`` shards, torchrun ranks, the official
ECCV / CxC protocol, ``vlbench rescore``) asks this grid for the entries it needs, so they are different
schedules of identical products: one piece = blocks = ranks, bit for bit, on one device. Both directions
read the same matrix (a t2i query's row is a column of ``S``): i2t and t2i rank the same numbers.

Tiles are computed on demand and kept in a small least-recently-used store (``cache_bytes``), so a schedule
whose blocks cut through tiles computes each tile about once as long as its blocks walk the grid in order;
the tile scan (metrics/scan/walk.py) computes tiles with :meth:`TileGrid.product` in worker threads and
reads duplicates through :meth:`TileGrid.scores`, the same bits.
On a GPU (``device="cuda"``) the tiles are torch products on the device (one shape per tile: cuBLAS picks
one kernel per shape); CPU and GPU numbers agree within a stated tolerance, not bit for bit
(docs/metrics.md).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .scan.duplicates import first_copies

#: the longest tile side: a square tile of 512 x 512 float32 similarities (1 MiB) stays in a core's cache while
#: it is reduced, and its product has enough rows and columns for the BLAS to run near its peak
TILE_SIDE = 512
#: similarities per tile at most (a side shorter than TILE_SIDE lets the other grow up to this)
TILE_ELEMENTS = TILE_SIDE * TILE_SIDE


def _pow2_ceil(x: int) -> int:
    return 1 << max(0, int(x) - 1).bit_length()


def tile_shape(n_images: int, n_captions: int) -> tuple[int, int]:
    """(image rows, caption columns) per tile: a function of the two gallery sizes only. Each side is
    TILE_SIDE, or the side's size rounded up to a power of two when that is shorter; a short side lets the
    other grow until the tile holds TILE_ELEMENTS similarities (100 images x 1M captions: 128 x 2,048)."""
    ti, tt = min(TILE_SIDE, _pow2_ceil(n_images)), min(TILE_SIDE, _pow2_ceil(n_captions))
    if ti < TILE_SIDE:
        tt = min(_pow2_ceil(n_captions), TILE_ELEMENTS // ti)
    elif tt < TILE_SIDE:
        ti = min(_pow2_ceil(n_images), TILE_ELEMENTS // tt)
    return ti, tt


WORKERS = max(1, min(8, os.cpu_count() or 1))  # threads computing tiles at once
_POOL: ThreadPoolExecutor | None = None


def pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="vlbench-tile")
    return _POOL


BACKENDS = ("numpy", "torch")


class TileGrid:
    """``S = images @ captions.T`` on a fixed tile grid (module docstring); entries are read with
    :meth:`scores`.

    ``device``: None / "cpu" (NumPy, one BLAS thread per tile, tiles in parallel threads) or a torch device (the
    products run there, one tile at a time). ``backend``: "numpy" or "torch" (by default NumPy on the CPU, torch
    on any other device); ``backend="torch"`` with ``device="cpu"`` runs the device schedule with the CPU as the
    device (torch products, one tile at a time, reduced in torch), which is how the tests check that schedule on
    a machine without a GPU. ``device`` is then None for NumPy and the torch device otherwise."""

    def __init__(self, img: np.ndarray, txt: np.ndarray, device: str | None = None, cache_bytes: int = 64 << 20,
                 *, backend: str | None = None):
        backend = backend or ("numpy" if not device or device == "cpu" else "torch")
        if backend not in BACKENDS:
            raise ValueError(f"a tile grid's backend is one of {', '.join(BACKENDS)}, got {backend!r}")
        if backend == "numpy" and device and device != "cpu":
            raise ValueError(f"the numpy backend computes tiles on the CPU, not on {device!r}: use backend='torch'")
        self.img, self.txt = img, txt
        self.n_images, self.n_captions = len(img), len(txt)
        self.ti, self.tt = tile_shape(self.n_images, self.n_captions)
        self.first_img, self.first_txt = first_copies(img), first_copies(txt)
        self.dtype = np.result_type(img.dtype, txt.dtype)  # the similarities' (float32, or float64 embeddings')
        self.tile_bytes = self.ti * self.tt * self.dtype.itemsize
        self.device = (device or "cpu") if backend == "torch" else None
        self.cache_bytes = max(cache_bytes, 2 * self.tile_bytes)  # two tiles at least
        self._tiles: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()
        self._held = 0
        self.products = 0  # tiles computed (a test and the benchmarks read it)
        self._finite: bool | None = None
        self._dups: tuple[np.ndarray, np.ndarray] | None = None
        if self.device:
            import torch  # lazy: only with a device, where the model has loaded torch

            self._t = (torch.from_numpy(np.ascontiguousarray(img)).to(self.device),
                       torch.from_numpy(np.ascontiguousarray(txt)).to(self.device))

    # -- tiles ------------------------------------------------------------------------------------
    def product(self, a: int, b: int, on_device: bool = False):
        """Tile ``(a, b)`` as computed: ONE product of the tile's rows (duplicates not yet read from their
        copies; :meth:`scores` and metrics/scan/walk.py do that), a torch tensor left on the device with
        ``on_device``. Safe in any thread; the BLAS one-threaded by the caller (:class:`blas_one_thread`)."""
        i0, i1 = a * self.ti, min(self.n_images, (a + 1) * self.ti)
        t0, t1 = b * self.tt, min(self.n_captions, (b + 1) * self.tt)
        if self.device:
            t = self._t[0][i0:i1] @ self._t[1][t0:t1].T
            return t if on_device else t.cpu().numpy()
        return self.img[i0:i1] @ self.txt[t0:t1].T  # row slices of C-ordered arrays: contiguous

    def _compute(self, keys: list[tuple[int, int]]) -> None:
        todo = [k for k in keys if k not in self._tiles]
        if todo:
            parallel = not self.device and len(todo) > 1  # CPU: tiles in threads, each one BLAS thread
            out = list(pool().map(lambda k: self.product(*k), todo)) if parallel else \
                [self.product(*k) for k in todo]
            self.products += len(todo)
            for k, t in zip(todo, out):
                self._tiles[k] = t
                self._held += t.nbytes
        for k in keys:
            self._tiles.move_to_end(k)

    def cached(self, a: int, b: int) -> np.ndarray | None:
        """Tile ``(a, b)`` when the store holds it (as :meth:`product` gives it), else None."""
        return self._tiles.get((a, b))

    def duplicates(self) -> tuple[np.ndarray, np.ndarray]:
        """The image rows and the caption rows that repeat an earlier one (ascending): their entries are their
        first copies'."""
        if self._dups is None:
            self._dups = (np.flatnonzero(self.first_img != np.arange(self.n_images, dtype=self.first_img.dtype)),
                          np.flatnonzero(self.first_txt != np.arange(self.n_captions, dtype=self.first_txt.dtype)))
        return self._dups

    def finite_range(self) -> bool:
        """No similarity can be NaN or infinite (finite embeddings, norms whose product is far from overflow)."""
        if self._finite is None:
            big = float(np.finfo(self.dtype).max) / 4
            sq = [_largest_square_norm(self.img), _largest_square_norm(self.txt)]
            self._finite = bool(np.isfinite(sq).all() and np.sqrt(sq[0]) * np.sqrt(sq[1]) < big)
        return self._finite

    def _evict(self, keep: set) -> None:
        for k in list(self._tiles):
            if self._held <= self.cache_bytes:
                break
            if k not in keep:
                self._held -= self._tiles.pop(k).nbytes

    # -- entries ----------------------------------------------------------------------------------
    def scores(self, images: np.ndarray, captions: np.ndarray, *, by_caption: bool = False) -> np.ndarray:
        """``S[images][:, captions]`` as float32 (or the embeddings' float64), from whole tiles only;
        ``by_caption``: its transpose (captions x images, a t2i block), filled tile by tile."""
        fi = self.first_img[np.asarray(images, dtype=np.int64)]
        ft = self.first_txt[np.asarray(captions, dtype=np.int64)]
        shape = (len(ft), len(fi)) if by_caption else (len(fi), len(ft))
        out = np.empty(shape, dtype=self.dtype)
        if not out.size:
            return out
        rows, cols = _groups(fi, self.ti), _groups(ft, self.tt)
        step = 1 if self.device else WORKERS  # tiles computed together (in parallel threads)
        for b, oc, tc in cols:
            for c0 in range(0, len(rows), step):  # a few tiles at a time: held memory stays within the cache's
                chunk = rows[c0:c0 + step]
                keys = [(a, b) for a, _, _ in chunk]
                with blas_one_thread(self.device):
                    self._compute(keys)
                for a, orow, tr in chunk:
                    _copy(out, self._tiles[(a, b)], orow, oc, tr, tc, by_caption)
                self._evict(set(keys))
        return out


def _largest_square_norm(x: np.ndarray) -> float:
    """The largest squared row norm (NaN or inf when a row holds one), in slabs."""
    return float(np.max([np.einsum("ij,ij->i", x[i:i + 65536], x[i:i + 65536]).max()
                         for i in range(0, len(x), 65536)] or [0.0]))


def _copy(out: np.ndarray, tile: np.ndarray, orow, oc, tr, tc, by_caption: bool) -> None:
    """The tile's entries (rows ``tr``, columns ``tc``) into ``out`` at (``orow``, ``oc``), transposed for a
    t2i block; slices where they are runs (views), gathers otherwise."""
    part = tile[tr, tc] if isinstance(tr, slice) or isinstance(tc, slice) else tile[np.ix_(tr, tc)]
    if isinstance(orow, slice) and isinstance(oc, slice):
        if by_caption:
            out[oc, orow] = part.T
        else:
            out[orow, oc] = part
    elif by_caption:
        out[np.ix_(_ix(oc), _ix(orow))] = part.T
    else:
        out[np.ix_(_ix(orow), _ix(oc))] = part


def _ix(x):
    return np.arange(x.start, x.stop) if isinstance(x, slice) else x


def _groups(ids: np.ndarray, tile: int) -> list[tuple[int, Any, Any]]:
    """(tile, positions in ``ids``, offsets within the tile) per tile the ids fall in: slices for a contiguous
    run of ids (the usual case, no scan per tile), index arrays otherwise (duplicates read earlier tiles)."""
    n = len(ids)
    lo = int(ids[0])
    if _as_slice(ids) is not None:
        out: list[tuple[int, Any, Any]] = []
        for a in range(lo // tile, (lo + n - 1) // tile + 1):
            s0, s1 = max(lo, a * tile), min(lo + n, (a + 1) * tile)
            out.append((a, slice(s0 - lo, s1 - lo), slice(s0 - a * tile, s1 - a * tile)))
        return out
    t = ids // tile
    order = np.argsort(t, kind="stable")
    ts = t[order]
    edges = np.flatnonzero(np.r_[True, ts[1:] != ts[:-1], True])
    groups: list[tuple[int, Any, Any]] = []
    for e0, e1 in zip(edges[:-1], edges[1:]):
        pos = order[e0:e1]
        a = int(ts[e0])
        off = ids[pos] - a * tile
        groups.append((a, _as_slice(pos) or pos, _as_slice(off) or off))
    return groups


def _as_slice(ix: np.ndarray):
    """``ix`` as a slice when it is a contiguous ascending run (a view instead of a gather), else None."""
    if len(ix) and int(ix[-1]) - int(ix[0]) == len(ix) - 1 and (len(ix) < 2 or bool((np.diff(ix) == 1).all())):
        return slice(int(ix[0]), int(ix[-1]) + 1)
    return None


_CONTROLLER = None


class blas_one_thread:
    """The BLAS held to one thread while tiles are computed (each tile is then one single-threaded product:
    its bits do not depend on how many threads the process or the environment allows); tiles run in
    parallel threads instead."""

    def __init__(self, device):
        self.device, self._ctx = device, None

    def __enter__(self):
        global _CONTROLLER
        if not self.device:
            if _CONTROLLER is None:
                from threadpoolctl import ThreadpoolController

                _CONTROLLER = ThreadpoolController()
            self._ctx = _CONTROLLER.limit(limits=1, user_api="blas")
        return self

    def __exit__(self, *exc):
        if self._ctx is not None:
            self._ctx.restore_original_limits()
        return False
