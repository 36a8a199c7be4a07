"""The reducers of the exact scan: what one tile of similarities contributes to its queries' results.

A tile (candidates x queries, the grid's single product with duplicates read from their first copies) is
reduced where it was computed, while it is in the core's cache, into

* **the count** of candidates ranked above each query's best positive (score ``s``, index ``c``, read before
  the walk): ``x >= s`` in a tile wholly before ``c`` (as ``x > nextafter(s, -inf)``), ``x > s`` wholly after
  it, one comparison per similarity, and only the tile holding ``c`` counts its ties row by row;
* **the top-k head**: a query's column is looked at only if its largest value reaches the ``K``-th best score
  so far (a threshold that only rises, so one a few tiles old keeps a superset), and then only its exact top
  ``K`` in the tie order (an argpartition, a stable sort where a tie straddles the cut) joins the :class:`Head`;
* **the relevances and graded gains** (:class:`Side`): those of the head's candidates travel with them, and
  each query's ``p`` largest relevances among non-positives and ``p`` largest gains (the ideal DCG lists)
  are kept as values.

The flip analysis and retrieved.npz read the head's first ten (metrics/flips.py), so they come from the same
reduction. :meth:`Head.merge` combines heads in the tie order (score desc, index asc) and the largest values
as multisets, so merging tiles, slices or torchrun ranks in any grouping gives the same result, bit for bit.

One code path serves NumPy and torch: :class:`ArrayOps` holds the few operations whose spelling differs
(moving arrays, ``nextafter``, ``where``, counting and maxima per column, the finiteness check); the rest
is indexing and comparisons that read the same in both. On a device the tile stays there and only counts,
column maxima and the columns that may change a head come back; the head's exact order and the side values are
then taken on the host, as on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ranking import check_finite
from ..tiles import TileGrid


def columns(src, direction: str, queries: np.ndarray, c0: int, c1: int) -> np.ndarray:
    """Candidates ``c0:c1`` of the queries' rows: the source's own block when it has one, else a slice."""
    if hasattr(src, "block"):
        return src.block(direction, queries, c0, c1)
    return np.asarray(src.rows(direction, queries))[:, c0:c1]


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
    """The reducer's array operations whose spelling differs between NumPy (``device`` None: the CPU grid's
    tiles) and torch (a device grid: the tile stays where it was computed, and only counts, column maxima and
    the columns that may change a head come back to the host). The rest of the reducer is indexing and
    comparisons that read the same in both; comparisons are exact, so both agree bit for bit on a tile."""

    def __init__(self, device=None):
        self.device = device
        if device:
            import torch  # lazy: device grids only, where the model has loaded torch

            self.torch = torch

    def put(self, a: np.ndarray):
        """A host array where the tile is (a new array on a device, the same one in NumPy)."""
        return self.torch.from_numpy(np.ascontiguousarray(a)).to(self.device) if self.device else a

    def get(self, a) -> np.ndarray:
        """A result back on the host."""
        return a.cpu().numpy() if self.device else a

    def cut(self, s, below: np.ndarray):
        """Per query, the value a candidate must exceed to rank above its best positive ``s``: ``s`` itself, or
        the next value below it where the whole tile comes before the positive (``below``: ties count too)."""
        if self.device:
            return self.torch.where(self.put(below), self.torch.nextafter(s, self.torch.full_like(s, -np.inf)), s)
        return np.where(below, np.nextafter(s, s.dtype.type(-np.inf)), s)

    def column_counts(self, hits) -> np.ndarray:
        """Per column, the true entries of a boolean tile (int32: a tile has fewer than 2**31 rows)."""
        return self.get(hits.sum(0, dtype=self.torch.int32 if self.device else np.int32))

    def column_max(self, x) -> np.ndarray:
        return self.get(x.max(0).values if self.device else x.max(axis=0))


def _tile(grid: TileGrid, xp: ArrayOps, a: int, b: int, base, patch):
    """Tile ``(a, b)`` where the reducer runs, its duplicate rows and columns read from their first copies
    (``base``: the grid's stored copy, never written to)."""
    t = xp.put(base.copy() if patch is not None else base) if base is not None else grid.product(a, b, True)
    if patch is not None:
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
class TileRun:
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


def reduce_tile(run: TileRun, a: int, b: int, base, patch, rows: slice, thr: np.ndarray, side):
    """One tile, reduced where it was computed (in the worker thread on the CPU, on the device for a device
    grid): (candidates ranked above each query's best positive, the queries whose head it may change, the
    tile's part of their :class:`Head`)."""
    grid, direction, bs, bc = run.grid, run.direction, run.bs, run.bc
    xp = ArrayOps(grid.device)
    t = _tile(grid, xp, a, b, base, patch)
    x = t if direction == "t2i" else t.T  # candidates x queries
    c0 = (a * grid.ti if direction == "t2i" else b * grid.tt) + rows.start
    x = (x if run.offs is None else x[:, xp.put(run.offs)])[rows]
    n = len(x)
    if run.check:  # a grid whose values may not be finite (rare): the tile is looked at on the host
        bad = np.flatnonzero(~np.isfinite(xp.get(x)).all(axis=0))
        if len(bad):
            raise ValueError(f"similarity has NaN or infinite values ({direction} query {int(run.queries[bad[0]])})"
                             "; check the model's embeddings")
    s = xp.put(bs.astype(grid.dtype))
    below = bc >= c0 + n  # the whole tile ranks before the best positive: equal scores count too
    cnt = xp.column_counts(x > xp.cut(s, below))
    for j in np.flatnonzero((bc >= c0) & ~below):  # the tile holding the best positive: ties before it
        cnt[j] += int((x[:int(bc[j]) - c0, j] == s[j]).sum())
    hit = np.flatnonzero(xp.column_max(x) >= thr)
    ids, vals = _tile_head(xp.get(x[:, xp.put(hit)]), min(run.K, n)) if len(hit) else (None, None)
    return cnt, hit, _part(run, side, c0, hit, ids, vals)


def _part(run: TileRun, side, c0: int, hit: np.ndarray, ids, vals) -> Head:
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
