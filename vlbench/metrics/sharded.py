"""Exact scoring of a gallery of any size: blocks of at most ``rows x cols`` similarities, and torchrun ranks.

The similarities are the entries of the one tiled scorer (metrics/tiles.py): the same bits whichever block,
tile or rank asks for them. Every schedule here is the exact scan (metrics/scan/walk.py) over a slice of the
gallery, the block's bytes bounding the tiles in flight (docs/metrics.md, "Scoring in blocks"):

* the ranked head (the best ``K`` candidates in the tie-broken order, score desc then index asc) is the
  merge of the tiles' own heads, and under torchrun of the ranks' heads (``Head.merge``, the same merge);
* the best positive (the highest score, then the lowest index) is read from the grid before the walk, by
  every rank alike;
* its rank, when it is not in the head, is ``1 + sum over tiles and ranks of (#scores > it + #equal scores at
  a lower index)``: counts, added up;
* the DCG ideal lists (the ``p`` largest relevances among non-positives, the ``p`` largest graded gains)
  are merges of the tiles' ``p`` largest, and the relevances / gains at the head travel with the head.

Nothing is approximated and nothing depends on where a cut falls. Under torchrun each rank walks a contiguous
slice of the gallery (cut at tile edges); heads and counts are exchanged through torch.distributed (gloo on
CPU, NCCL on GPU). A reranking stage plugs in after that exchange, on the RankedBlocks (metrics/scan/__init__.py).

The per-query values are then computed by the same functions as in the one-piece pass (metrics.compute),
in the same query blocks, so even their floating-point sums are the same.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .ranking import Positives, RankedBlock
from .scan.reducers import Head, Side
from .scan.walk import SourceGrid, cuts_query_tiles, scan
from .tiles import WORKERS, TileGrid

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


def one_piece_block(source, direction: str, n_q: int, block_rows: int, block_bytes: int) -> ScoreBlock | None:
    """The one-piece pass's bytes as a block where whole rows would cut the query tiles (a large gallery, then
    streamed tile by tile in those bytes), else None."""
    return ScoreBlock(1, max(MIN_COLS, block_bytes // 4)) if cuts_query_tiles(source, direction, n_q, block_rows) \
        else None


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


def _positives_of(pos: Positives, r0: int, r1: int) -> tuple[np.ndarray, np.ndarray]:
    return np.repeat(np.arange(r1 - r0), pos.counts[r0:r1]), pos.idx[pos.ptr[r0]:pos.ptr[r1]]


def _in_head(keys: np.ndarray, n_cand: int, r0: int, ix: np.ndarray) -> np.ndarray:
    """Which head entries (rows of queries ``r0:``) are positives; ``keys``: sorted query * n_cand + candidate."""
    hk = (r0 + np.arange(len(ix), dtype=np.int64))[:, None] * n_cand + ix
    if not len(keys):
        return np.zeros(hk.shape, dtype=bool)
    return keys[np.minimum(np.searchsorted(keys, hk), len(keys) - 1)] == hk


def _all_ranks(head: Head, group, K: int, pp: int) -> Head:
    """Every rank's heads merged (the same result on each rank)."""
    if group.world == 1:
        return head
    fields = head.fields()
    width = [f.shape[1] for f in fields]
    pad = [max(group.gather(np.asarray([w]))) for w in width]  # ranks without columns have narrower heads
    padded = [np.pad(f, ((0, 0), (0, int(p[0]) - w)), constant_values=_fill(f)) for f, w, p in zip(fields, width, pad)]
    gathered = [group.gather(f) for f in padded]
    out = head.with_fields([g[0] for g in gathered])
    for r in range(1, group.world):
        out.merge(head.with_fields([g[r] for g in gathered]), K, pp)
    return out


def _fill(f: np.ndarray):
    return np.iinfo(np.int64).max if f.dtype == np.int64 else -np.inf


def sharded_blocks(source, direction: str, queries: np.ndarray, pos: Positives, K: int, block: ScoreBlock, *,
                   pp: int, relevance=None, graded: dict | None = None, block_rows: int, group=None,
                   progress=None) -> Iterator[RankedBlock]:
    """The RankedBlocks of metrics.ranking.rank_blocks (query blocks of ``block_rows``, as the one-piece pass
    makes them), from the tile scan with the block's bytes in flight; the best positive's rank, the DCG
    relevances and the graded gains come precomputed (``best_rank``, ``rel``, ``graded``); ``sim`` is None."""
    group = group or LocalGroup()
    graded = graded or {}
    n_q, n_cand = len(queries), pos.n_candidates
    grid = source.grid if isinstance(getattr(source, "grid", None), TileGrid) else SourceGrid(source)
    grid.cache_bytes = max(block.bytes, 2 * grid.tile_bytes)  # recent tiles kept within the block's bound
    lo, hi = split(0, n_cand, group.world, grid.tt if direction == "i2t" else grid.ti)[group.rank]
    side = Side(relevance, graded, pp) if relevance is not None or graded else None
    inflight = max(1, min(2 * WORKERS, block.bytes // grid.tile_bytes))
    head, _, _, local = scan(grid, direction, queries, pos, K, lo, hi, inflight=inflight, progress=progress, side=side)
    head = _all_ranks(head, group, K, pp)  # every rank read the same best positives: only heads and counts travel
    counts = group.sum(local)
    keys = np.repeat(np.arange(n_q, dtype=np.int64), pos.counts) * n_cand + pos.idx
    is_pos = _in_head(keys, n_cand, 0, head.ix)
    found = is_pos.any(axis=1)
    rank = np.where(found, np.argmax(is_pos, axis=1) + 1, counts + 1).astype(np.int64)
    for b0 in range(0, n_q, block_rows):
        b1 = min(n_q, b0 + block_rows)
        s = slice(b0, b1)
        prow, pcol = _positives_of(pos, b0, b1)
        yield RankedBlock(b0, b1, None, head.ix[s], head.v[s], is_pos[s], pos.counts[s], prow, pcol,
                          best_rank=rank[s],
                          rel=None if head.rel is None or head.nonpos is None else (head.rel[s], head.nonpos[s]),
                          graded={g: (head.gain[g][s], head.gtop[g][s]) for g in graded})
