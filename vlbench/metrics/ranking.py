"""The ranking step shared by every metric: positives, similarity blocks and the tie-broken ranking head.

Ties are broken by candidate index, lower index first (a stable sort of ``-similarity``); ranks are
1-based. :func:`rank_blocks` walks the queries in blocks of at most ``block_bytes`` of similarities
and gives, per block, the top-K candidates in that exact order and which of them are positives; the
metric functions (metrics.py) read only these blocks. Identical vectors score bit for bit the same
(``EmbeddingSource`` reads the one tiled scorer, metrics/tiles.py, where a duplicate takes its first
copy's scores), so the tie rule also holds for duplicate captions and images.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ..results import DIRECTIONS
from .tiles import TileGrid, first_copies

BLOCK_BYTES = 32 << 20


# ---------------------------------------------------------------------------------------------
# positives

@dataclass
class Positives:
    """For each query, the sorted candidate indices that are positives (CSR layout)."""

    ptr: np.ndarray  # (n_queries + 1,) int64
    idx: np.ndarray  # (nnz,) int64
    n_candidates: int

    @property
    def n_queries(self) -> int:
        return len(self.ptr) - 1

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.ptr)

    def keys(self) -> np.ndarray:
        q = np.repeat(np.arange(self.n_queries, dtype=np.int64), self.counts)
        return q * self.n_candidates + self.idx  # sorted because idx is sorted within each query

    @classmethod
    def from_lists(cls, lists: Sequence[Sequence[int]], n_candidates: int) -> Positives:
        """Sorted, de-duplicated positives per query (one vectorized pass: no per-row numpy call)."""
        rows = [r if isinstance(r, (list, tuple, np.ndarray)) else list(r) for r in lists]
        n = len(rows)
        lens = np.fromiter((len(r) for r in rows), dtype=np.int64, count=n)
        flat = np.fromiter((int(x) for r in rows for x in r), dtype=np.int64, count=int(lens.sum()))
        q = np.repeat(np.arange(n, dtype=np.int64), lens)
        bad = (flat < 0) | (flat >= n_candidates)
        if bad.any():
            first = int(q[np.argmax(bad)])
            raise ValueError(f"positive index out of range for query {first}: "
                             f"{np.unique(np.asarray(rows[first], dtype=np.int64)).tolist()} "
                             f"(there are {n_candidates} candidates)")
        width = max(n_candidates, 1)  # one key per (query, candidate): sorting them sorts each row
        keys = np.unique(q * width + flat)
        ptr = np.zeros(n + 1, dtype=np.int64)
        ptr[1:] = np.cumsum(np.bincount(keys // width, minlength=n))
        return cls(ptr, keys % width, n_candidates)


def _as_lists(extra, n: int, name: str) -> list[list[int]]:
    if extra is None:
        return [[] for _ in range(n)]
    if isinstance(extra, dict):
        out: list[list[int]] = [[] for _ in range(n)]
        for q, v in extra.items():
            q = int(q)
            if not 0 <= q < n:
                raise ValueError(f"extra_positives[{name!r}] has query index {q}, outside 0..{n - 1}")
            out[q] = [int(x) for x in v]
        return out
    extra = list(extra)
    if len(extra) != n:
        raise ValueError(f"extra_positives[{name!r}] has {len(extra)} rows, expected {n}")
    return [[int(x) for x in v] for v in extra]


def build_positives(caption_to_image, n_gallery: int, extra_positives=None):
    """(i2t positives over query images, t2i positives over caption queries, i2t query image ids)."""
    c2i = np.asarray(caption_to_image, dtype=np.int64)
    n_captions = len(c2i)
    if n_captions and (c2i.min() < 0 or c2i.max() >= n_gallery):
        raise ValueError(f"caption_to_image refers to image {int(c2i.max())}, but the similarity matrix "
                         f"has {n_gallery} image rows")
    extra_positives = extra_positives or {}
    unknown = set(extra_positives) - set(DIRECTIONS)
    if unknown:
        raise ValueError(f"extra_positives keys must be 'i2t' and/or 't2i', got {sorted(unknown)}")
    none = [v is None or (isinstance(v, dict) and not v) for v in map(extra_positives.get, DIRECTIONS)]
    if all(none):  # the dataset's own pairs: no per-image lists, so
        # a million-image gallery costs arrays, not a million Python lists (the same Positives as below)
        order = np.argsort(c2i, kind="stable")  # captions by image, in caption order within an image
        query_images, counts = np.unique(c2i, return_counts=True)
        ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        t2i = Positives(np.arange(n_captions + 1, dtype=np.int64), c2i.copy(), n_gallery)
        return Positives(ptr, order.astype(np.int64), n_captions), t2i, query_images.astype(np.int64)
    i2t_extra = _as_lists(extra_positives.get("i2t"), n_gallery, "i2t")
    t2i_extra = _as_lists(extra_positives.get("t2i"), n_captions, "t2i")
    by_image: list[list[int]] = [[] for _ in range(n_gallery)]
    for j, i in enumerate(c2i):
        by_image[i].append(j)
    i2t_lists = [by_image[i] + i2t_extra[i] for i in range(n_gallery)]
    query_images = np.asarray([i for i in range(n_gallery) if i2t_lists[i]], dtype=np.int64)
    i2t = Positives.from_lists([i2t_lists[i] for i in query_images], n_captions)
    t2i = Positives.from_lists([[int(c2i[j])] + t2i_extra[j] for j in range(n_captions)], n_gallery)
    return i2t, t2i, query_images


# ---------------------------------------------------------------------------------------------
# similarity sources: give blocks of query rows x all candidates

class SimilaritySource:
    """Blocks of the (n_images x n_captions) similarity matrix, in either orientation."""

    n_images: int
    n_captions: int

    def rows(self, direction: str, queries: np.ndarray) -> np.ndarray:  # (len(queries), n_cand) float32
        raise NotImplementedError


class ArraySource(SimilaritySource):
    def __init__(self, similarity):
        sim = _to_numpy(similarity)
        if sim.ndim != 2:
            raise ValueError(f"similarity must be 2-D (n_images, n_captions), got shape {sim.shape}")
        self.sim = sim
        self.n_images, self.n_captions = sim.shape

    def rows(self, direction, queries):
        # keep the caller's precision (float64 input is ranked in float64, float32 in float32)
        if direction == "i2t":
            return np.ascontiguousarray(self.sim[queries])
        if len(queries) and queries[-1] - queries[0] + 1 == len(queries):  # a contiguous range: slice, no gather
            return np.ascontiguousarray(self.sim[:, queries[0]:queries[-1] + 1].T)
        return np.ascontiguousarray(self.sim[:, queries].T)

    def block(self, direction: str, queries, c0: int, c1: int) -> np.ndarray:
        """Candidates ``c0:c1`` of the queries' rows (those columns of :meth:`rows`, read without the rest)."""
        if direction == "i2t":
            return self.sim[queries, c0:c1]
        return self.sim[c0:c1, queries].T


def duplicate_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dup, first): the rows of ``x`` that repeat an earlier row bit for bit, and that earlier row's index."""
    first = first_copies(x)
    dup = np.flatnonzero(first != np.arange(len(x)))
    return dup, first[dup]


class EmbeddingSource(SimilaritySource):
    """Dot products of (normalized) embeddings, read from the one tiled scorer (metrics/tiles.py); never the
    full matrix.

    Every similarity is an element of a fixed grid of tile products (fixed by the two gallery sizes), and a
    vector that repeats an earlier one bit for bit takes that copy's scores: whatever rows and columns a
    caller asks for (a query block, a shard of the gallery, a torchrun rank's slice), the same entry has the
    same bits, and the tie rule holds for duplicate captions and images. With ``device`` set (e.g. "cuda"),
    the tile products run there and only the tiles come back.
    """

    def __init__(self, image_emb, text_emb, device: str | None = None):
        self.img = _to_numpy(image_emb)
        self.txt = _to_numpy(text_emb)
        if self.img.ndim != 2 or self.txt.ndim != 2:
            raise ValueError(f"embeddings must be 2-D (n, dim), got image {self.img.shape} and text {self.txt.shape}")
        if self.img.shape[1] != self.txt.shape[1]:
            raise ValueError(f"image embeddings have size {self.img.shape[1]} but text embeddings "
                             f"{self.txt.shape[1]}")
        self.n_images, self.n_captions = len(self.img), len(self.txt)
        self.device = device if device and device != "cpu" else None
        self.grid = TileGrid(self.img, self.txt, device=self.device)

    def rows(self, direction, queries):
        return self.block(direction, queries, 0, self.n_captions if direction == "i2t" else self.n_images)

    def tiles(self, direction: str) -> tuple[int, int]:
        """(query rows, candidate columns) per tile in this direction: blocks that follow them compute each
        tile once (a schedule, never the bits)."""
        g = self.grid
        return (g.ti, g.tt) if direction == "i2t" else (g.tt, g.ti)

    def block(self, direction: str, queries, c0: int, c1: int) -> np.ndarray:
        """Candidates ``c0:c1`` of the queries' rows (the same bits as those columns of :meth:`rows`: both
        are entries of the one tile grid)."""
        qi = np.asarray(queries, dtype=np.int64)
        cand = np.arange(c0, c1, dtype=np.int64)
        if direction == "i2t":
            return self.grid.scores(qi, cand)
        return self.grid.scores(cand, qi, by_caption=True)


def _to_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):  # torch tensor
        x = x.detach()
        if str(x.dtype) in ("torch.float16", "torch.bfloat16"):
            x = x.float()
        x = x.cpu().numpy()
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float32)
    return x


# ---------------------------------------------------------------------------------------------
# the ranking head

def _use_torch(block: np.ndarray) -> bool:
    return "torch" in sys.modules or block.size * 8 >= BLOCK_BYTES


def _sorted_topk(block: np.ndarray, K: int):
    """Top-K candidate ids per row in the exact tie-broken order (score desc, index asc)."""
    n = block.shape[1]
    K = min(K, n)
    kk = min(K + 1, n)
    # torch.topk is several times faster than argpartition on big blocks, but importing torch costs
    # ~2 s: use it when it is loaded anyway or the problem is big enough to pay for it
    if _use_torch(block):
        import torch

        v, ix = torch.topk(torch.from_numpy(block), kk, dim=1, largest=True, sorted=True)
        v, ix = v.numpy(), ix.numpy()
    else:
        ix = np.argpartition(-block, kk - 1, axis=1)[:, :kk] if kk < n else np.tile(np.arange(n), (len(block), 1))
        v = np.take_along_axis(block, ix, axis=1)
    order = np.lexsort((ix, -v), axis=1)
    ix = np.take_along_axis(ix, order, axis=1)
    v = np.take_along_axis(v, order, axis=1)
    if kk > K:
        ambiguous = np.flatnonzero(v[:, K - 1] == v[:, K])
        for r in ambiguous:  # a tie straddles the cut: sort the row exactly (rare with real models)
            full = np.argsort(-block[r], kind="stable")[:kk]
            ix[r] = full
            v[r] = block[r, full]
    return ix[:, :K], v[:, :K]


@dataclass
class RankedBlock:
    """One block of queries ``b0:b1`` ranked: similarities, the top-K head and its positives."""

    b0: int
    b1: int
    sim: np.ndarray | None  # (b1 - b0, n_candidates) similarities (None: scored in blocks, metrics/sharded.py)
    top_ix: np.ndarray  # (rows, K) candidate ids, tie-broken order
    top_v: np.ndarray  # their similarities
    is_pos: np.ndarray  # (rows, K) bool: the candidate is a positive of the query
    n_pos: np.ndarray  # (rows,) number of positives R
    prow: np.ndarray  # row (within the block) of every positive of the block's queries
    pcol: np.ndarray  # candidate id of every positive
    #: scored in blocks (metrics/sharded.py), where no block holds a whole row: what the metrics would read off
    #: ``sim``, combined over the blocks: the best positive's rank, (relevance at the head, the largest
    #: non-positive relevances), graded name -> (gains at the head, the largest gains)
    best_rank: np.ndarray | None = None
    rel: tuple | None = None
    graded: dict | None = None


def head_size(pos: Positives, kmax: int, p: int) -> int:
    """How many ranked candidates the metrics need: Recall@kmax and the cut-off metrics (MRR, Precision, mAP and
    binary nDCG at every k <= kmax), R-precision (R), DCG@p below R positives."""
    rmax = int(pos.counts.max()) if pos.n_queries else 1
    return min(pos.n_candidates, max(kmax, rmax, p + rmax))


def check_finite(blk: np.ndarray, queries: np.ndarray, b0: int, direction: str, what: str, hint: str) -> None:
    if not np.isfinite(blk).all():
        bad = int(queries[b0 + np.flatnonzero(~np.isfinite(blk).all(axis=1))[0]])
        raise ValueError(f"{what} has NaN or infinite values ({direction} query {bad}){hint}")


def query_block_rows(source: SimilaritySource, direction: str, n_q: int, n_cand: int, block_bytes: int) -> int:
    """Queries per block: as many as ``block_bytes`` of similarities hold, rounded down to a whole number of the
    source's query tiles when that is at least one tile (each tile then computed once); below one tile the
    pass goes by whole query tiles instead (metrics.sharded.one_piece_block; the same bits). The store of
    recent tiles is held to the same budget (two tiles at least)."""
    rows = max(1, block_bytes // max(1, 4 * n_cand))
    tile = source.tiles(direction)[0] if hasattr(source, "tiles") else 1
    if rows >= tile:
        rows = rows // tile * tile
    if hasattr(source, "grid"):
        source.grid.cache_bytes = max(block_bytes, 2 * source.grid.tile_bytes)
    return max(1, min(n_q, rows))


def rank_blocks(source: SimilaritySource, direction: str, queries: np.ndarray, pos: Positives, K: int,
                block_bytes: int = BLOCK_BYTES) -> Iterator[RankedBlock]:
    """The queries in blocks, each ranked once (the one ranking every metric reads)."""
    n_q, n_cand = len(queries), pos.n_candidates
    counts, pos_keys = pos.counts, pos.keys()
    block_rows = query_block_rows(source, direction, n_q, n_cand, block_bytes)
    for b0 in range(0, n_q, block_rows):
        b1 = min(n_q, b0 + block_rows)
        qs = np.arange(b0, b1)
        blk = source.rows(direction, queries[b0:b1])
        if blk.dtype not in (np.float32, np.float64):
            blk = blk.astype(np.float32)
        check_finite(blk, queries, b0, direction, "similarity", "; check the model's embeddings")
        top_ix, top_v = _sorted_topk(blk, K)
        keys = (qs[:, None] + 0) * n_cand + top_ix
        loc = np.searchsorted(pos_keys, keys)
        loc = np.minimum(loc, len(pos_keys) - 1) if len(pos_keys) else loc
        is_pos = (pos_keys[loc] == keys) if len(pos_keys) else np.zeros_like(keys, dtype=bool)
        R = counts[b0:b1]
        prow = np.repeat(np.arange(b1 - b0), R)
        pcol = pos.idx[pos.ptr[b0]:pos.ptr[b1]]
        yield RankedBlock(b0, b1, blk, top_ix, top_v, is_pos, R, prow, pcol)
