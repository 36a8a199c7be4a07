"""Exact scoring of a gallery of any size: blocks of at most ``rows x cols`` similarities, and torchrun ranks.

The similarities are the entries of the one tiled scorer (metrics/tiles.py): the same bits whichever block,
shard or rank asks for them. What remains here is combining per-query results over column shards of the
gallery, each exactly (docs/metrics.md, "Scoring in blocks"):

* the ranked head (the best ``K`` candidates in the tie-broken order, score desc then index asc) is the
  merge of the shards' own heads: every candidate of the global head is in its shard's head;
* the best positive (the highest score, then the lowest index) is the best of the shards' best positives;
* its rank, when it is not in the head, is ``1 + sum over shards of (#scores > it + #equal scores at a lower
  index)``: counts, added up;
* the DCG ideal lists (the ``p`` largest relevances among non-positives, the ``p`` largest graded gains)
  are merges of the shards' ``p`` largest, and the relevances / gains at the head travel with the head.

Nothing is approximated and nothing depends on where a cut falls. Without a relevance model or graded gains
the gallery is streamed tile by tile instead (metrics/scan/reduce.py: the same combination per tile, the
block's bytes bounding the tiles in flight). Otherwise query tiles meet shards that follow the tile grid's
columns when the block is at least a tile wide (each tile is then computed once); a narrower block cuts
inside a tile, whose other columns the scorer keeps for the next shard. Under torchrun each rank scores a contiguous
slice of the gallery; heads, best positives and counts are exchanged through torch.distributed (gloo on
CPU, NCCL on GPU).

The per-query values are then computed by the same functions as in the one-piece pass (metrics.compute),
in the same query blocks, so even their floating-point sums are the same.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .ranking import Positives, RankedBlock, _sorted_topk, check_finite
from .scan.reduce import cuts_query_tiles, scan, usable
from .tiles import WORKERS

MIN_COLS = 256  # the narrowest column bound: narrower blocks cost more in Python than they save in memory
_BLOCK = re.compile(r"^\s*(\d+)\s*[xX*]\s*(\d+)\s*$")


@dataclass(frozen=True)
class ScoreBlock:
    """At most ``rows`` queries x ``cols`` candidates of similarities at a time (float32: 4 bytes each)."""

    rows: int
    cols: int

    def __str__(self) -> str:
        return f"{self.rows}x{self.cols}"

    @property
    def bytes(self) -> int:
        return 4 * self.rows * self.cols


def parse_score_block(value) -> ScoreBlock:
    """``"ROWSxCOLS"`` (or a ScoreBlock / a (rows, cols) pair); ValueError says what a valid one looks like."""
    if isinstance(value, ScoreBlock):
        rows, cols = value.rows, value.cols
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        rows, cols = value
    else:
        m = _BLOCK.match(str(value))
        if not m:
            raise ValueError(f"a score block is ROWSxCOLS (e.g. 4096x65536), got {value!r}")
        rows, cols = int(m.group(1)), int(m.group(2))
    if isinstance(rows, bool) or isinstance(cols, bool) or int(rows) != rows or int(cols) != cols:
        raise ValueError(f"a score block takes whole numbers, got {value!r}")
    if rows < 1 or cols < MIN_COLS:
        raise ValueError(f"a score block needs at least 1 row and {MIN_COLS} columns, got {rows}x{cols}")
    return ScoreBlock(int(rows), int(cols))


def split(lo: int, hi: int, parts: int, align: int = 1) -> list[tuple[int, int]]:
    """``parts`` contiguous ranges over ``lo:hi`` whose inner edges are multiples of ``align`` past ``lo``
    (an empty range where there is too little to split)."""
    n = hi - lo
    edges = [lo] + [lo + min(n, (n * i // parts) // align * align) for i in range(1, parts)] + [hi]
    return list(zip(edges, edges[1:]))


def shard_width(n_q: int, block_rows: int, block: ScoreBlock, tile: int = 1) -> int:
    """Gallery columns per shard: ``block.rows * block.cols`` similarities over a query block's rows
    (``block_rows``, as the one-piece pass makes them), never below MIN_COLS, and a whole number of tiles
    (``tile`` columns) when it is at least one tile wide."""
    w = max(MIN_COLS, block.rows * block.cols // max(1, min(block_rows, n_q)))
    return w // tile * tile if w >= tile else w


def one_piece_block(source, direction: str, n_q: int, block_rows: int, block_bytes: int) -> ScoreBlock | None:
    """The one-piece pass's bytes as a block where whole rows would cut the query tiles (a large gallery, then
    streamed tile by tile in those bytes), else None."""
    return ScoreBlock(1, max(MIN_COLS, block_bytes // 4)) if cuts_query_tiles(source, direction, n_q, block_rows) \
        else None


def column_shards(lo: int, hi: int, cols: int) -> list[tuple[int, int]]:
    """The shards of ``lo:hi``, each ``cols`` wide (the last one what is left)."""
    return [(c, min(hi, c + cols)) for c in range(lo, hi, max(1, cols))]


class LocalGroup:
    """One process: nothing to exchange."""

    rank, world = 0, 1

    def gather(self, arr: np.ndarray) -> list[np.ndarray]:
        return [arr]

    def sum(self, arr: np.ndarray) -> np.ndarray:
        return arr


class TorchGroup:
    """The ranks of an initialised torch.distributed process group (gloo: CPU tensors; NCCL: ``device``)."""

    def __init__(self, dist, device: str | None = None):
        self.dist, self.rank, self.world = dist, dist.get_rank(), dist.get_world_size()
        self.device = device or ("cuda" if dist.get_backend() == "nccl" else "cpu")

    def _tensor(self, arr: np.ndarray):
        import torch  # lazy: only under torchrun, where torch is loaded anyway

        return torch.from_numpy(np.ascontiguousarray(arr)).to(self.device)

    def gather(self, arr: np.ndarray) -> list[np.ndarray]:
        t = self._tensor(arr)
        out = [t.clone() for _ in range(self.world)]
        self.dist.all_gather(out, t)
        return [o.cpu().numpy() for o in out]

    def sum(self, arr: np.ndarray) -> np.ndarray:
        t = self._tensor(arr)
        self.dist.all_reduce(t)
        return t.cpu().numpy()


def tiles_of(src, direction: str) -> tuple[int, int]:
    """(query rows, candidate columns) of the source's tiles in this direction ((1, 1): no tile grid)."""
    return src.tiles(direction) if hasattr(src, "tiles") else (1, 1)


def columns(src, direction: str, queries: np.ndarray, c0: int, c1: int) -> np.ndarray:
    """Candidates ``c0:c1`` of the queries' rows: the source's own block when it has one, else a slice."""
    if hasattr(src, "block"):
        return src.block(direction, queries, c0, c1)
    return np.asarray(src.rows(direction, queries))[:, c0:c1]


@dataclass
class _Head:
    """Per query: the best candidates so far in the tie-broken order, what travels with them, the best positive."""

    ix: np.ndarray  # (n, <=K) int64 candidate ids
    v: np.ndarray  # their scores (float64: every float32 value exactly)
    rel: np.ndarray | None  # relevance at the head (float64), with a relevance source
    gain: dict  # graded name -> gains at the head
    nonpos: np.ndarray | None  # the pp largest relevances among non-positives, descending
    gtop: dict  # graded name -> the pp largest gains, descending
    best_s: np.ndarray  # best positive's score (-inf: none seen)
    best_c: np.ndarray  # its candidate id (n_candidates: none seen)

    @classmethod
    def empty(cls, n: int, relevance: bool, graded, n_cand: int) -> _Head:
        e = np.zeros((n, 0))
        return cls(np.zeros((n, 0), dtype=np.int64), e, e if relevance else None, {g: e for g in graded},
                   e if relevance else None, {g: e for g in graded}, np.full(n, -np.inf), np.full(n, n_cand))

    def merge(self, o: _Head, K: int, pp: int) -> _Head:
        ix, v = np.hstack([self.ix, o.ix]), np.hstack([self.v, o.v])
        order = np.lexsort((ix, -v), axis=1)[:, :K]

        def take(a, b):
            return np.take_along_axis(np.hstack([a, b]), order, axis=1)

        def largest(a, b):
            return np.ascontiguousarray(-np.sort(-np.hstack([a, b]), axis=1)[:, :pp])

        better = (o.best_s > self.best_s) | ((o.best_s == self.best_s) & (o.best_c < self.best_c))
        return _Head(take(self.ix, o.ix), take(self.v, o.v), None if self.rel is None else take(self.rel, o.rel),
                     {g: take(a, o.gain[g]) for g, a in self.gain.items()},
                     None if self.nonpos is None else largest(self.nonpos, o.nonpos),
                     {g: largest(a, o.gtop[g]) for g, a in self.gtop.items()},
                     np.where(better, o.best_s, self.best_s), np.where(better, o.best_c, self.best_c))

    def fields(self) -> list[np.ndarray]:
        return [self.ix, self.v, *([self.rel, self.nonpos] if self.rel is not None else []),
                *[a for g in self.gain for a in (self.gain[g], self.gtop[g])], self.best_s, self.best_c]

    def with_fields(self, arrs: list[np.ndarray]) -> _Head:
        it = iter(arrs)
        ix, v = next(it), next(it)
        rel, nonpos = (next(it), next(it)) if self.rel is not None else (None, None)
        gain, gtop = {}, {}
        for g in self.gain:
            gain[g], gtop[g] = next(it), next(it)
        return _Head(ix, v, rel, gain, nonpos, gtop, next(it), next(it))


def _shard_head(blk, c0, prow, pcol, K, pp, rel_blk, gain_blks, n_cand) -> _Head:
    """The head of one (query block x shard) block, in global candidate ids."""
    ix, v = _sorted_topk(blk, K)
    m = len(blk)
    rel = nonpos = None
    if rel_blk is not None:
        rel = np.take_along_axis(rel_blk, ix, axis=1)
        masked = rel_blk.copy()
        masked[prow, pcol - c0] = -np.inf
        nonpos = -np.sort(-masked, axis=1)[:, :pp]
    gain = {g: np.take_along_axis(b, ix, axis=1) for g, b in gain_blks.items()}
    gtop = {g: -np.sort(-b, axis=1)[:, :pp] for g, b in gain_blks.items()}
    best_s, best_c = np.full(m, -np.inf), np.full(m, n_cand, dtype=np.int64)
    if len(prow):
        s = blk[prow, pcol - c0].astype(np.float64)
        np.maximum.at(best_s, prow, s)
        top = s == best_s[prow]
        np.minimum.at(best_c, prow[top], pcol[top])
    return _Head(ix + c0, v.astype(np.float64), rel, gain, nonpos, gtop, best_s, best_c)


def _positives_of(pos: Positives, r0: int, r1: int) -> tuple[np.ndarray, np.ndarray]:
    return np.repeat(np.arange(r1 - r0), pos.counts[r0:r1]), pos.idx[pos.ptr[r0]:pos.ptr[r1]]


def _count(blk: np.ndarray, t: np.ndarray, c: np.ndarray, c0: int) -> np.ndarray:
    """Per row of a shard block: scores above ``t`` (the row's best positive) or equal to it at a candidate
    index below ``c`` (its index)."""
    n = np.count_nonzero(blk > t[:, None], axis=1)
    for r in np.flatnonzero(np.count_nonzero(blk == t[:, None], axis=1)):  # ties: only those before it count
        n[r] += np.count_nonzero(blk[r, :max(0, int(c[r]) - c0)] == t[r])
    return n


def _in_head(keys: np.ndarray, n_cand: int, r0: int, ix: np.ndarray) -> np.ndarray:
    """Which head entries (rows of queries ``r0:``) are positives; ``keys``: sorted query * n_cand + candidate."""
    hk = (r0 + np.arange(len(ix), dtype=np.int64))[:, None] * n_cand + ix
    if not len(keys):
        return np.zeros(hk.shape, dtype=bool)
    return keys[np.minimum(np.searchsorted(keys, hk), len(keys) - 1)] == hk


def _local_heads(source, direction, queries, pos, K, pp, pieces, relevance, graded, shards, progress,
                 keys=None) -> tuple[_Head, np.ndarray | None]:
    """The heads of this rank's shards; with ``keys`` (one process) also the best positive's count of
    candidates before it: the shards holding a positive of the piece go first, so the best positive is known
    for every later shard (counted as it is scored); only the first ones are scored again, for the queries
    whose best positive is not in the head."""
    n_cand = pos.n_candidates
    parts, counts = [], []
    for r0, r1 in pieces:
        qs = queries[r0:r1]
        prow, pcol = _positives_of(pos, r0, r1)
        head = _Head.empty(r1 - r0, relevance is not None, graded, n_cand)
        has = [bool(((pcol >= c0) & (pcol < c1)).any()) for c0, c1 in shards]
        order = [i for i in range(len(shards)) if has[i]] + [i for i in range(len(shards)) if not has[i]]
        n = np.zeros(r1 - r0, dtype=np.int64)
        for i in order:
            c0, c1 = shards[i]
            blk = columns(source, direction, qs, c0, c1)
            if blk.dtype not in (np.float32, np.float64):
                blk = blk.astype(np.float32)
            check_finite(blk, queries, r0, direction, "similarity", "; check the model's embeddings")
            inside = (pcol >= c0) & (pcol < c1)
            rel_blk = None
            if relevance is not None:
                rel_blk = columns(relevance, direction, qs, c0, c1).astype(np.float64)
                check_finite(rel_blk, queries, r0, direction, "relevance", "")
            gains = {g: np.exp2(np.asarray(columns(src, direction, qs, c0, c1), dtype=np.float64)) - 1.0
                     for g, src in graded.items()}
            head = head.merge(_shard_head(blk, c0, prow[inside], pcol[inside], K, pp, rel_blk, gains, n_cand), K, pp)
            if keys is not None and not has[i]:  # every positive of the piece is seen: its best is final
                n += _count(blk, head.best_s, head.best_c, c0)
        if keys is not None:
            need = np.flatnonzero(~_in_head(keys, n_cand, r0, head.ix).any(axis=1))
            for i in (i for i in order if has[i] and len(need)):  # the same block again: the same bits
                c0, c1 = shards[i]
                blk = columns(source, direction, qs, c0, c1)
                n[need] += _count(blk[need] if len(need) < len(blk) else blk, head.best_s[need], head.best_c[need], c0)
            counts.append(n)
        parts.append(head)
        if progress and len(shards):
            progress(r1 - r0)
    if not parts:
        return _Head.empty(0, relevance is not None, graded, n_cand), np.zeros(0, dtype=np.int64)
    head = parts[0].with_fields([np.concatenate(a) for a in zip(*(p.fields() for p in parts))])
    return head, np.concatenate(counts) if keys is not None else None


def _all_ranks(head: _Head, group, K: int, pp: int) -> _Head:
    """Every rank's heads merged (the same result on each rank)."""
    if group.world == 1:
        return head
    fields = head.fields()
    width = [f.shape[1] if f.ndim == 2 else None for f in fields]
    pad = [max(group.gather(np.asarray([w or 0]))) for w in width]  # ranks without columns have narrower heads
    padded = [f if w is None else np.pad(f, ((0, 0), (0, int(p[0]) - w)), constant_values=_fill(f)) for f, w, p
              in zip(fields, width, pad)]
    gathered = [group.gather(f) for f in padded]
    out = head.with_fields([g[0] for g in gathered])
    for r in range(1, group.world):
        out = out.merge(head.with_fields([g[r] for g in gathered]), K, pp)
    return out


def _fill(f: np.ndarray):
    return np.iinfo(np.int64).max if f.dtype == np.int64 else -np.inf


def _count_above(source, direction, queries, need, head: _Head, pieces, shards, group) -> np.ndarray:
    """Per query of ``need``: candidates scoring above its best positive, or equal at a lower index (every
    rank's best positive known: a second pass over this rank's blocks, the counts summed over the ranks)."""
    counts = np.zeros(len(queries), dtype=np.int64)
    for r0, r1 in pieces:
        rows = np.flatnonzero(need[r0:r1])
        if not len(rows):
            continue
        for c0, c1 in shards:  # the same blocks as the first pass: the same products, the same bits
            blk = columns(source, direction, queries[r0:r1], c0, c1)
            counts[r0 + rows] += _count(blk[rows] if len(rows) < len(blk) else blk, head.best_s[r0 + rows],
                                        head.best_c[r0 + rows], c0)
    return group.sum(counts)


def sharded_blocks(source, direction: str, queries: np.ndarray, pos: Positives, K: int, block: ScoreBlock, *,
                   pp: int, relevance=None, graded: dict | None = None, block_rows: int, group=None,
                   progress=None) -> Iterator[RankedBlock]:
    """The RankedBlocks of metrics.ranking.rank_blocks (query blocks of ``block_rows``, as the one-piece pass
    makes them), from blocks of at most ``block`` similarities; the best positive's rank, the DCG relevances
    and the graded gains come precomputed (``best_rank``, ``rel``, ``graded``); ``sim`` is None."""
    group = group or LocalGroup()
    graded = graded or {}
    n_q, n_cand = len(queries), pos.n_candidates
    qtile, tile = tiles_of(source, direction)
    if hasattr(source, "grid"):  # the scorer keeps recent tiles within the block's bound (two tiles at least)
        source.grid.cache_bytes = max(block.bytes, 2 * source.grid.tile_bytes)
    lo, hi = split(0, n_cand, group.world, tile)[group.rank]
    keys = np.repeat(np.arange(n_q, dtype=np.int64), pos.counts) * n_cand + pos.idx
    if usable(source, relevance, graded):  # tile by tile, the block's bytes in flight (metrics/scan/reduce.py)
        inflight = max(1, min(2 * WORKERS, block.bytes // source.grid.tile_bytes))
        ix, v, best_s, best_c, local = scan(source.grid, direction, queries, pos, K, lo, hi, inflight=inflight,
                                            progress=progress)
        head = _Head(ix, v, None, {}, None, {}, best_s, best_c)
        counts = group.sum(local)
    else:  # pieces of whole query tiles (each tile computed about once) x shards of the gallery
        pieces = [(b0, min(n_q, b0 + qtile)) for b0 in range(0, n_q, qtile)]
        shards = column_shards(lo, hi, shard_width(n_q, qtile, block, tile))
        head, counts = _local_heads(source, direction, queries, pos, K, pp, pieces, relevance, graded, shards,
                                    progress, keys=keys if group.world == 1 else None)
    head = _all_ranks(head, group, K, pp)
    is_pos = _in_head(keys, n_cand, 0, head.ix)
    found = is_pos.any(axis=1)
    rank = np.where(found, np.argmax(is_pos, axis=1) + 1, 0).astype(np.int64)
    if counts is None:  # ranks: the best positive is known only once every rank's heads are in
        counts = _count_above(source, direction, queries, ~found, head, pieces, shards, group)
    rank[~found] = counts[~found] + 1
    for b0 in range(0, n_q, block_rows):
        b1 = min(n_q, b0 + block_rows)
        s = slice(b0, b1)
        prow, pcol = _positives_of(pos, b0, b1)
        yield RankedBlock(b0, b1, None, head.ix[s], head.v[s], is_pos[s], pos.counts[s], prow, pcol,
                          best_rank=rank[s],
                          rel=None if head.rel is None or head.nonpos is None else (head.rel[s], head.nonpos[s]),
                          graded={g: (head.gain[g][s], head.gtop[g][s]) for g in graded})
