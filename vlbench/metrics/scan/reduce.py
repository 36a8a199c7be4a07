"""Exact heads and ranks from the tile grid, tile by tile, with small per-query state.

The similarities are the tile grid's (metrics/tiles.py): a tile here is the same single product the grid
defines, with duplicate rows and columns read from their first copies exactly as ``TileGrid.scores`` reads
them, so every value has the bits every other schedule sees. What is new is the schedule: a query tile (up
to 512 queries) walks the candidate tiles of its slice of the gallery, and each tile is reduced in the thread
that computed it, while it is in the core's cache:

* **the best positive first**: every query's positives are read from the grid before the walk (the tiles
  that hold them, usually one per query tile), so its score ``s`` and index ``c`` are known;
* **its rank by one comparison**: the candidates ranked above it are those scoring above ``s`` plus those
  equal to ``s`` at a lower index; in a tile wholly below ``c`` that is ``x >= s``, wholly above it ``x > s``,
  one comparison per similarity (``x > nextafter(s, -inf)`` for the first), and only the tile holding ``c``
  counts its ties row by row;
* **the head by a threshold**: a query's column enters the head only if its largest value reaches the
  ``K``-th best score so far (a threshold that only rises, so one a few tiles old keeps a superset), and
  then only its exact top ``K`` in the tie order (an argpartition, a stable sort where a tie straddles the
  cut) is merged (score desc, index asc).

Nothing is approximated: the head is the exact top ``K`` of the slice and the count is exact, whatever
order the tiles finish in. Used by metrics/sharded.py whenever no relevance model or graded gains need whole
blocks and the similarities cannot be NaN or infinite (``TileGrid.finite_range``).
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future

import numpy as np

from ..tiles import TileGrid, blas_one_thread, pool


def usable(source, relevance, graded) -> bool:
    """Whether the streamed scan can serve this scoring (else the block path of metrics/sharded.py does)."""
    grid = getattr(source, "grid", None)
    return isinstance(grid, TileGrid) and relevance is None and not graded and grid.finite_range()


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


def _tile_head(sub: np.ndarray, kk: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact top ``kk`` rows of each column of ``sub`` in the tie order (row ids, values), (columns, kk)."""
    if kk >= len(sub):
        return np.broadcast_to(np.arange(len(sub)), (sub.shape[1], len(sub))).copy(), sub.T.copy()
    part = np.argpartition(-sub, kk - 1, axis=0)[:kk]
    vals = np.take_along_axis(sub, part, axis=0)
    kth = vals.min(axis=0)
    for j in np.flatnonzero(np.count_nonzero(sub >= kth, axis=0) > kk):  # a tie straddles the cut
        part[:, j] = np.argsort(-sub[:, j], kind="stable")[:kk]
        vals[:, j] = sub[part[:, j], j]
    return part.T, vals.T


class ArrayOps:
    """The reducer's few array operations, for NumPy (``device`` None: the CPU grid's tiles) or torch (a device
    grid: the tile stays where it was computed; only the counts, the column maxima and the columns that may
    change a head come back to the host). Everything else the reducer writes once, as plain indexing and
    comparisons that mean the same in both; comparisons are exact, so the two agree bit for bit on the same
    tile."""

    def __init__(self, device=None):
        self.device = device
        if device:
            import torch  # lazy: device grids only, where the model has loaded torch

            self.torch = torch

    def put(self, a: np.ndarray):
        """A host array where the tile is."""
        return self.torch.from_numpy(np.ascontiguousarray(a)).to(self.device) if self.device else a

    def get(self, a) -> np.ndarray:
        """A result back on the host."""
        return a.cpu().numpy() if self.device else a

    def copy(self, a):
        return a.clone() if self.device else a.copy()

    def below(self, s):
        """The next representable value below each of ``s``."""
        if self.device:
            return self.torch.nextafter(s, self.torch.full_like(s, -np.inf))
        return np.nextafter(s, s.dtype.type(-np.inf))

    def where(self, c, a, b):
        return self.torch.where(c, a, b) if self.device else np.where(c, a, b)

    def column_counts(self, hits) -> np.ndarray:
        """Per column, the true entries of a boolean tile (int32: a tile has fewer than 2**31 rows)."""
        return self.get(hits.sum(0, dtype=self.torch.int32 if self.device else np.int32))

    def column_max(self, x) -> np.ndarray:
        return self.get(x.max(0).values if self.device else x.max(axis=0))


def _tile(grid: TileGrid, xp: ArrayOps, a: int, b: int, base, patch):
    """Tile ``(a, b)`` where the reducer runs, its duplicate rows and columns read from their first copies
    (``base``: the grid's stored copy, never written to)."""
    t = xp.put(base) if base is not None else grid.product(a, b, on_device=True)
    if patch is not None:
        t = xp.copy(t) if base is not None else t
        if patch[1] is not None:
            t[xp.put(patch[0])] = xp.put(patch[1])
        if patch[3] is not None:
            t[:, xp.put(patch[2])] = xp.put(patch[3])
    return t


def _reduce(grid, direction, a, b, base, patch, offs, rows, thr, bs, bc, K):
    """One tile, reduced where it was computed (in the worker thread on the CPU, on the device for a device
    grid): (candidates ranked above each query's best positive, queries whose head it may change, their top
    candidates' ids and scores)."""
    xp = ArrayOps(grid.device)
    t = _tile(grid, xp, a, b, base, patch)
    x = t if direction == "t2i" else t.T  # candidates x queries
    c0 = (a * grid.ti if direction == "t2i" else b * grid.tt) + rows.start
    x = (x if offs is None else x[:, xp.put(offs)])[rows]
    n = len(x)
    s = xp.put(bs.astype(grid.dtype))
    below = bc >= c0 + n  # the whole tile ranks before the best positive: equal scores count too
    cnt = xp.column_counts(x > xp.where(xp.put(below), xp.below(s), s))
    for j in np.flatnonzero((bc >= c0) & ~below):  # the tile holding the best positive: ties before it
        cnt[j] += int((x[:int(bc[j]) - c0, j] == s[j]).sum())
    hit = np.flatnonzero(xp.column_max(x) >= thr)
    if not len(hit):
        return cnt, hit, None, None
    ids, vals = _tile_head(xp.get(x[:, xp.put(hit)]), min(K, n))
    return cnt, hit, ids + c0, vals.astype(np.float64)


class _Walk:
    """One query tile's state while its candidate tiles are reduced (head, threshold, counts)."""

    def __init__(self, n: int, K: int):
        self.K, self.ix, self.v = K, np.zeros((n, 0), dtype=np.int64), np.zeros((n, 0))
        self.counts = np.zeros(n, dtype=np.int64)

    def threshold(self) -> np.ndarray:
        return self.v[:, self.K - 1] if self.v.shape[1] == self.K else np.full(len(self.v), -np.inf)

    def merge(self, cnt, hit, ids, vals) -> None:
        self.counts += cnt  # int32 per tile, int64 over the gallery
        if ids is None:
            return
        ix, v = np.hstack([self.ix[hit], ids]), np.hstack([self.v[hit], vals])
        order = np.lexsort((ix, -v), axis=1)[:, :self.K]
        ix, v = np.take_along_axis(ix, order, axis=1), np.take_along_axis(v, order, axis=1)
        if len(hit) == len(self.ix):
            self.ix, self.v = ix, v
        else:  # only a full head has a threshold, so a partial merge keeps the width
            self.ix[hit], self.v[hit] = ix, v


def scan(grid: TileGrid, direction: str, queries: np.ndarray, pos, K: int, lo: int, hi: int, *,
         inflight: int = 4, progress=None):
    """Per query: the exact head over candidates ``lo:hi`` ((n, <=K) ids and float64 scores, score desc then
    index asc), the best positive (score, index) over all candidates, and how many candidates of ``lo:hi``
    rank above it. ``inflight``: tiles computed or queued at once (the memory bound, in tiles)."""
    n = len(queries)
    best_s, best_c = best_positives(grid, direction, queries, pos)
    ix, v, counts = np.zeros((n, min(K, hi - lo)), dtype=np.int64), np.zeros((n, min(K, hi - lo))), \
        np.zeros(n, dtype=np.int64)
    tq, tc = _axes(grid, direction)
    dups = grid.duplicates()
    qtile = queries // tq
    edges = np.flatnonzero(np.r_[True, qtile[1:] != qtile[:-1], True]) if n else np.zeros(1, dtype=np.int64)
    with blas_one_thread(grid.device):
        for e0, e1 in zip(edges[:-1], edges[1:]):  # a run of queries in one query tile (they are ascending)
            g, walk = int(qtile[e0]), _Walk(e1 - e0, K)
            offs = queries[e0:e1] - g * tq
            full = min(tq, (grid.n_captions if direction == "t2i" else grid.n_images) - g * tq)
            whole = np.array_equal(offs, np.arange(full))  # the whole query tile: no gather
            _walk(grid, direction, g, None if whole else offs, walk, best_s[e0:e1], best_c[e0:e1], (lo, hi, tc),
                  dups, inflight)
            w = walk.v.shape[1]
            ix[e0:e1, :w], v[e0:e1, :w], counts[e0:e1] = walk.ix, walk.v, walk.counts
            if progress:
                progress(e1 - e0)
    return ix, v, best_s, best_c, counts


def _walk(grid, direction, g, offs, walk, bs, bc, span, dups, inflight) -> None:
    """The candidate tiles of ``lo:hi`` for query tile ``g``, ``inflight`` at a time, merged in order."""
    lo, hi, tc = span
    pending: deque = deque()
    for ct in range(lo // tc, -(-hi // tc)):
        a, b = (ct, g) if direction == "t2i" else (g, ct)
        rows = slice(max(lo, ct * tc) - ct * tc, min(hi, (ct + 1) * tc) - ct * tc)
        base = grid.cached(a, b)
        grid.products += base is None
        args = (grid, direction, a, b, base, _patch(grid, a, b, dups), offs, rows, walk.threshold(), bs, bc,
                walk.K)
        if grid.device:  # one tile at a time on the device, reduced there
            pending.append(Future())
            pending[-1].set_result(_reduce(*args))
        else:
            pending.append(pool().submit(_reduce, *args))
        while len(pending) >= inflight:
            walk.merge(*pending.popleft().result())
    while pending:
        walk.merge(*pending.popleft().result())
