"""The walk of the exact scan: which tiles are reduced, in what order, and with what per-query state.

The similarities are the tile grid's (metrics/tiles.py): a tile here is the same single product the grid
defines, with duplicate rows and columns read from their first copies exactly as ``TileGrid.scores`` reads
them, so every value has the bits every other schedule sees. A run of queries in one query tile (up to 512)
walks the candidate tiles of a slice ``lo:hi`` of the gallery in order, a few in flight (computed and reduced
in worker threads on the CPU, one at a time on a device), and merges what each contributes
(metrics/scan/reducers.py) into its head and counts; every query's best positive is read from the grid
before the walk (the tiles holding positives), so one pass gives the exact head and the exact rank.

Every schedule is this walk: ``--score-block`` (the block's bytes bound the tiles in flight), the one-piece
pass of a gallery too wide for whole rows, torchrun ranks (each rank walks its slice; heads merge, counts
add) and devices (the grid's tiles are the device's products). A source without a tile grid is read as one
(:class:`SourceGrid`); values that may be NaN or infinite are checked tile by tile. Nothing is approximated:
the head is the exact top ``K`` of the slice and the count exact, whatever order the tiles finish in.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future

import numpy as np

from ..tiles import TileGrid, blas_one_thread, pool, tile_shape
from .reducers import Head, Side, TileRun, columns, reduce_tile


class SourceGrid:
    """A similarity source without a tile grid (an ``ArraySource``, any ``SimilaritySource``) read as one: tile
    ``(a, b)`` is its block of those image rows and caption columns, on the grid :func:`tile_shape` fixes. No
    duplicates are looked for (its entries are what it gives) and nothing is stored; its values are not known to
    be finite, so the scan checks every tile."""

    device = None

    def __init__(self, source):
        self.source = source
        self.n_images, self.n_captions = source.n_images, source.n_captions
        self.ti, self.tt = tile_shape(self.n_images, self.n_captions)
        probe = np.asarray(columns(source, "i2t", np.arange(min(1, self.n_images)), 0, min(1, self.n_captions)))
        self.dtype = probe.dtype if probe.dtype in (np.float32, np.float64) else np.dtype(np.float32)  # as given
        self.tile_bytes = self.ti * self.tt * self.dtype.itemsize
        self.cache_bytes, self.products = 2 * self.tile_bytes, 0

    def product(self, a: int, b: int, on_device: bool = False) -> np.ndarray:
        i0, t0 = a * self.ti, b * self.tt
        blk = columns(self.source, "i2t", np.arange(i0, min(self.n_images, i0 + self.ti)), t0,
                      min(self.n_captions, t0 + self.tt))
        return blk if blk.dtype == self.dtype else blk.astype(self.dtype)

    def cached(self, a: int, b: int) -> None:
        return None

    def duplicates(self) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)

    def finite_range(self) -> bool:
        return False

    def scores(self, images: np.ndarray, captions: np.ndarray) -> np.ndarray:
        return np.asarray(self.source.rows("i2t", np.asarray(images)), dtype=self.dtype)[:, captions]


def cuts_query_tiles(source, direction: str, n_q: int, block_rows: int) -> bool:
    """Whole rows in query blocks of ``block_rows`` would cut the source's query tiles (a gallery too large for
    a tile's rows in the block's bytes): the one-piece pass then streams the tiles within those bytes."""
    grid = getattr(source, "grid", None)
    return isinstance(grid, TileGrid) and block_rows < min(n_q, _axes(grid, direction)[0])


def _axes(grid: TileGrid, direction: str) -> tuple[int, int]:
    """(query tile side, candidate tile side) in this direction."""
    return (grid.tt, grid.ti) if direction == "t2i" else (grid.ti, grid.tt)


def best_positives(grid: TileGrid, direction: str, queries: np.ndarray, pos) -> tuple[np.ndarray, np.ndarray]:
    """Per query: its best positive's score (float64) and index (the lowest among equal scores), read from the
    grid query tile by query tile (``pos``: metrics.ranking.Positives over ``queries``)."""
    n, tq = len(queries), _axes(grid, direction)[0]
    prow = np.repeat(np.arange(n), pos.counts)
    vals = np.empty(len(pos.idx))
    for g0 in range(0, n, tq):
        sel = slice(pos.ptr[g0], pos.ptr[min(n, g0 + tq)])
        cand = pos.idx[sel]
        if not len(cand):
            continue
        uniq = np.unique(cand)
        qs = queries[g0:g0 + tq]
        blk = grid.scores(uniq, qs) if direction == "t2i" else grid.scores(qs, uniq).T
        vals[sel] = blk[np.searchsorted(uniq, cand), prow[sel] - g0]
    best_s = np.full(n, -np.inf)
    with np.errstate(invalid="ignore"):  # a NaN (the scan's tile check then names its query)
        np.maximum.at(best_s, prow, vals)
    best_c = np.full(n, pos.n_candidates, dtype=np.int64)
    top = vals == best_s[prow]
    np.minimum.at(best_c, prow[top], pos.idx[top])
    return best_s, best_c


def _patch(grid: TileGrid, a: int, b: int, dups: tuple[np.ndarray, np.ndarray]):
    """The tile's duplicate rows and columns as their first copies score them (None: it has none)."""
    i0, i1 = a * grid.ti, min(grid.n_images, (a + 1) * grid.ti)
    t0, t1 = b * grid.tt, min(grid.n_captions, (b + 1) * grid.tt)
    dr = dups[0][np.searchsorted(dups[0], i0):np.searchsorted(dups[0], i1)]
    dc = dups[1][np.searchsorted(dups[1], t0):np.searchsorted(dups[1], t1)]
    if not len(dr) and not len(dc):
        return None
    return (dr - i0, grid.scores(dr, np.arange(t0, t1)) if len(dr) else None,
            dc - t0, grid.scores(np.arange(i0, i1), dc) if len(dc) else None)


class _Walk:
    """One query run's state while its candidate tiles are reduced: its head and its counts."""

    def __init__(self, n: int, K: int, side: Side | None):
        self.K, self.pp = K, side.pp if side is not None else 0
        self.head, self.counts = Head.empty(n, side), np.zeros(n, dtype=np.int64)

    def threshold(self) -> np.ndarray:
        v = self.head.v
        return v[:, self.K - 1] if v.shape[1] == self.K else np.full(len(v), -np.inf)

    def merge(self, cnt: np.ndarray, hit: np.ndarray, part: Head) -> None:
        self.counts += cnt  # int32 per tile, int64 over the gallery
        self.head.merge(part, self.K, self.pp, hit)


def scan(grid, direction: str, queries: np.ndarray, pos, K: int, lo: int, hi: int, *, inflight: int = 4,
         progress=None, side: Side | None = None) -> tuple[Head, np.ndarray, np.ndarray, np.ndarray]:
    """Per query: the exact head over candidates ``lo:hi`` ((n, <=K) ids and float64 scores, score desc then
    index asc; with ``side``, the relevances and gains that travel with it), the best positive (score, index)
    over all candidates, and how many candidates of ``lo:hi`` rank above it. ``grid``: a TileGrid or a
    SourceGrid; ``inflight``: tiles computed or queued at once (the memory bound, in tiles)."""
    n = len(queries)
    best_s, best_c = best_positives(grid, direction, queries, pos)
    heads, counts = [], np.zeros(n, dtype=np.int64)
    tq, tc = _axes(grid, direction)
    dups, check = grid.duplicates(), not grid.finite_range()
    qtile = queries // tq
    edges = np.flatnonzero(np.r_[True, qtile[1:] != qtile[:-1], True]) if n else np.zeros(1, dtype=np.int64)
    prow = np.repeat(np.arange(n), pos.counts)
    with blas_one_thread(grid.device):
        for e0, e1 in zip(edges[:-1], edges[1:]):  # a run of queries in one query tile (they are ascending)
            g, walk = int(qtile[e0]), _Walk(e1 - e0, K, side)
            offs = queries[e0:e1] - g * tq
            full = min(tq, (grid.n_captions if direction == "t2i" else grid.n_images) - g * tq)
            ps = slice(pos.ptr[e0], pos.ptr[e1])
            run = TileRun(grid, direction, None if np.array_equal(offs, np.arange(full)) else offs, queries[e0:e1],
                       best_s[e0:e1], best_c[e0:e1], K, check, prow[ps] - e0, pos.idx[ps], walk.pp)
            _walk(run, g, walk, (lo, hi, tc), dups, inflight, side)
            heads.append(walk.head)
            counts[e0:e1] = walk.counts
            if progress:
                progress(e1 - e0)
    head = heads[0].with_fields([np.concatenate(a) for a in zip(*(h.fields() for h in heads))]) if heads else \
        Head.empty(0, side)
    return head, best_s, best_c, counts


def _walk(run: TileRun, g: int, walk: _Walk, span, dups, inflight: int, side: Side | None) -> None:
    """The candidate tiles of ``lo:hi`` for the run's query tile ``g``, ``inflight`` at a time, merged in
    order (the side values read here, in the calling thread: their sources keep stores of their own)."""
    grid, direction = run.grid, run.direction
    lo, hi, tc = span
    pending: deque = deque()
    for ct in range(lo // tc, -(-hi // tc)):
        a, b = (ct, g) if direction == "t2i" else (g, ct)
        rows = slice(max(lo, ct * tc) - ct * tc, min(hi, (ct + 1) * tc) - ct * tc)
        base = grid.cached(a, b)
        grid.products += base is None
        extra = None if side is None else side.blocks(direction, run.queries, ct * tc + rows.start,
                                                      ct * tc + rows.stop)
        args = (run, a, b, base, _patch(grid, a, b, dups), rows, walk.threshold(), extra)
        if grid.device:  # one tile at a time on the device, reduced there
            pending.append(Future())
            pending[-1].set_result(reduce_tile(*args))
        else:
            pending.append(pool().submit(reduce_tile, *args))
        while len(pending) >= inflight:
            walk.merge(*pending.popleft().result())
    while pending:
        walk.merge(*pending.popleft().result())
