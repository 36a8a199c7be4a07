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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ranking import check_finite
from ..tiles import TileGrid, blas_one_thread, pool, tile_shape


def unchecked(source) -> bool:
    """Whether the source's similarities cannot be NaN or infinite (a tile grid whose embeddings' norms say so):
    the scan then checks no tile; otherwise every tile is checked, and a NaN or infinite value is an error that
    names its query."""
    grid = getattr(source, "grid", None)
    return isinstance(grid, TileGrid) and grid.finite_range()


def columns(src, direction: str, queries: np.ndarray, c0: int, c1: int) -> np.ndarray:
    """Candidates ``c0:c1`` of the queries' rows: the source's own block when it has one, else a slice."""
    if hasattr(src, "block"):
        return src.block(direction, queries, c0, c1)
    return np.asarray(src.rows(direction, queries))[:, c0:c1]


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
        self.dtype = np.dtype(getattr(getattr(source, "sim", None), "dtype", np.float32))
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

    def isfinite(self, x):
        return self.torch.isfinite(x) if self.device else np.isfinite(x)

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


@dataclass
class Side:
    """What travels with the head besides ids and scores: the DCG relevances (a relevance source) and the graded
    gains (name -> source of labels, gain ``2**label - 1``), read from their own sources for each tile's
    candidates and reduced with it into :class:`Head`'s ``rel`` / ``nonpos`` and ``gain`` / ``gtop``."""

    relevance: Any
    graded: dict
    pp: int

    def blocks(self, direction: str, queries: np.ndarray, c0: int, c1: int):
        """(relevances, graded name -> gains) of the queries x candidates ``c0:c1`` (float64)."""
        rel = None
        if self.relevance is not None:
            rel = np.asarray(columns(self.relevance, direction, queries, c0, c1)).astype(np.float64)
            check_finite(rel, queries, 0, direction, "relevance", "")
        return rel, {g: np.exp2(np.asarray(columns(src, direction, queries, c0, c1), dtype=np.float64)) - 1.0
                     for g, src in self.graded.items()}


@dataclass
class _Run:
    """A run of queries in one query tile, as every tile of its walk reads it."""

    grid: Any
    direction: str
    offs: np.ndarray | None  # the run's queries within the query tile (None: the whole tile, no gather)
    queries: np.ndarray  # their ids (a NaN or infinite value names one)
    bs: np.ndarray  # best positive's score and index per query
    bc: np.ndarray
    K: int
    check: bool  # check every tile for NaN or infinite values
    prow: np.ndarray  # the run's positives: row in the run, candidate id
    pcol: np.ndarray
    pp: int


def _reduce(run: _Run, a: int, b: int, base, patch, rows: slice, thr: np.ndarray, side):
    """One tile, reduced where it was computed (in the worker thread on the CPU, on the device for a device
    grid): (candidates ranked above each query's best positive, queries whose head it may change, their top
    candidates' ids and scores, the side values: :func:`_side_values`)."""
    grid, direction, bs, bc = run.grid, run.direction, run.bs, run.bc
    xp = ArrayOps(grid.device)
    t = _tile(grid, xp, a, b, base, patch)
    x = t if direction == "t2i" else t.T  # candidates x queries
    c0 = (a * grid.ti if direction == "t2i" else b * grid.tt) + rows.start
    x = (x if run.offs is None else x[:, xp.put(run.offs)])[rows]
    n = len(x)
    if run.check:
        bad = np.flatnonzero(~xp.get(xp.isfinite(x).all(0)))
        if len(bad):
            raise ValueError(f"similarity has NaN or infinite values ({direction} query {int(run.queries[bad[0]])})"
                             "; check the model's embeddings")
    s = xp.put(bs.astype(grid.dtype))
    below = bc >= c0 + n  # the whole tile ranks before the best positive: equal scores count too
    cnt = xp.column_counts(x > xp.where(xp.put(below), xp.below(s), s))
    for j in np.flatnonzero((bc >= c0) & ~below):  # the tile holding the best positive: ties before it
        cnt[j] += int((x[:int(bc[j]) - c0, j] == s[j]).sum())
    hit = np.flatnonzero(xp.column_max(x) >= thr)
    ids, vals = _tile_head(xp.get(x[:, xp.put(hit)]), min(run.K, n)) if len(hit) else (None, None)
    return cnt, hit, _part(run, side, c0, hit, ids, vals)


def _part(run: _Run, side, c0: int, hit: np.ndarray, ids, vals) -> Head:
    """One tile's contribution to the run's head: its top candidates for the queries ``hit`` (``ids``: rows of
    the tile; None: no query's head can change) with their relevances and gains, and every query's ``pp``
    largest relevances among the tile's non-positives and ``pp`` largest gains."""
    head = Head(np.zeros((0, 0), dtype=np.int64) if ids is None else ids + c0,
                np.zeros((0, 0)) if vals is None else vals.astype(np.float64))
    if side is None:
        return head
    rel, gains = side

    def at_head(b: np.ndarray) -> np.ndarray:
        return np.zeros((0, 0)) if ids is None else np.take_along_axis(b[hit], ids, axis=1)

    if rel is not None:
        inside = (run.pcol >= c0) & (run.pcol < c0 + rel.shape[1])
        masked = rel.copy()
        masked[run.prow[inside], run.pcol[inside] - c0] = -np.inf
        head.rel, head.nonpos = at_head(rel), _largest(masked, run.pp)
    head.gain = {g: at_head(b) for g, b in gains.items()}
    head.gtop = {g: _largest(b, run.pp) for g, b in gains.items()}
    return head


def _largest(a: np.ndarray, pp: int) -> np.ndarray:
    """The ``pp`` largest values of each row, descending."""
    return np.ascontiguousarray(-np.sort(-a, axis=1)[:, :pp])


@dataclass
class Head:
    """Per query: the best candidates so far in the tie order (score desc, index asc) and what travels with
    them (relevances and gains at the head), beside the ``pp`` largest relevances among non-positives and the
    ``pp`` largest gains (values only). One merge serves the tiles of a walk and the ranks of torchrun."""

    ix: np.ndarray  # (n, <=K) int64 candidate ids
    v: np.ndarray  # their scores (float64: every float32 value exactly)
    rel: np.ndarray | None = None  # relevance at the head (float64), with a relevance source
    gain: dict = field(default_factory=dict)  # graded name -> gains at the head
    nonpos: np.ndarray | None = None  # the pp largest relevances among non-positives, descending
    gtop: dict = field(default_factory=dict)  # graded name -> the pp largest gains, descending

    @classmethod
    def empty(cls, n: int, side: Side | None) -> Head:
        e, rel = np.zeros((n, 0)), side is not None and side.relevance is not None
        graded = side.graded if side is not None else {}
        return cls(np.zeros((n, 0), dtype=np.int64), e, e if rel else None, {g: e for g in graded},
                   e if rel else None, {g: e for g in graded})

    def merge(self, o: Head, K: int, pp: int, rows: np.ndarray | None = None) -> None:
        """``o``'s candidates merged into the heads of ``rows`` (every query: None), its largest values into
        every query's (``o.nonpos`` / ``o.gtop`` cover every query, or are None: none in ``o``)."""
        if o.nonpos is not None and self.nonpos is not None:
            self.nonpos = _largest(np.hstack([self.nonpos, o.nonpos]), pp)
        for g, a in o.gtop.items():
            self.gtop[g] = _largest(np.hstack([self.gtop[g], a]), pp)
        if rows is not None and not len(rows):
            return
        sel = slice(None) if rows is None else rows
        ix, v = np.hstack([self.ix[sel], o.ix]), np.hstack([self.v[sel], o.v])
        order = np.lexsort((ix, -v), axis=1)[:, :K]
        whole = rows is None or len(rows) == len(self.ix)  # else only a full head has a threshold: same width

        def take(mine: np.ndarray, new: np.ndarray) -> np.ndarray:
            out = np.take_along_axis(np.hstack([mine[sel], new]), order, axis=1)
            if whole:
                return out
            mine[sel] = out
            return mine

        if self.rel is not None and o.rel is not None:
            self.rel = take(self.rel, o.rel)
        self.gain = {g: take(a, o.gain[g]) for g, a in self.gain.items()}
        self.ix, self.v = take(self.ix, o.ix), take(self.v, o.v)

    def fields(self) -> list[np.ndarray]:
        return [self.ix, self.v, *([self.rel, self.nonpos] if self.rel is not None else []),
                *[a for g in self.gain for a in (self.gain[g], self.gtop[g])]]

    def with_fields(self, arrs: list[np.ndarray]) -> Head:
        it = iter(arrs)
        ix, v = next(it), next(it)
        rel, nonpos = (next(it), next(it)) if self.rel is not None else (None, None)
        gain, gtop = {}, {}
        for g in self.gain:
            gain[g], gtop[g] = next(it), next(it)
        return Head(ix, v, rel, gain, nonpos, gtop)


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
            run = _Run(grid, direction, None if np.array_equal(offs, np.arange(full)) else offs, queries[e0:e1],
                       best_s[e0:e1], best_c[e0:e1], K, check, prow[ps] - e0, pos.idx[ps], walk.pp)
            _walk(run, g, walk, (lo, hi, tc), dups, inflight, side)
            heads.append(walk.head)
            counts[e0:e1] = walk.counts
            if progress:
                progress(e1 - e0)
    head = heads[0].with_fields([np.concatenate(a) for a in zip(*(h.fields() for h in heads))]) if heads else \
        Head.empty(0, side)
    return head, best_s, best_c, counts


def _walk(run: _Run, g: int, walk: _Walk, span, dups, inflight: int, side: Side | None) -> None:
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
            pending[-1].set_result(_reduce(*args))
        else:
            pending.append(pool().submit(_reduce, *args))
        while len(pending) >= inflight:
            walk.merge(*pending.popleft().result())
    while pending:
        walk.merge(*pending.popleft().result())
