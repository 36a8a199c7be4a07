"""Retrieval metrics for image-text retrieval, computed block by block.

Definitions (protocols_and_metrics.md section 2; docs/metrics.md has the full text):

* ranking: for a query, candidates are ordered by similarity, highest first; **ties are broken by
  candidate index, lower index first** (a stable sort of ``-similarity``). Ranks are 1-based.
* Recall@k (hit rate): 100 if the best-ranked positive has rank <= k, else 0.
* MedR / MeanR: plain median / mean over queries of the best positive's rank.
* R-precision: 100 * (#positives in the top R) / R, R = number of positives of the query.
* mAP@R: 100 * (1/R) * sum_{i<=R} precision@i * rel(i)   (ECCV Caption, Chun et al. 2022).
* DCG_CM@p: sum_{i<=p} rel_i / log2(i+1), rel_i = 1 for a positive, otherwise the relevance of
  (query, candidate): by default the evaluated similarity itself (cosine), or a separate relevance
  model's similarity. nDCG_CM@p divides by the ideal DCG over the same relevance values.
* RSUM: the sum of Recall@{1,5,10} over both directions (max 600), also per direction.

An image with no positive caption (a distractor in an enlarged gallery) is a candidate for t2i but
not an i2t query. Aggregates are means over queries of per-query values, which are kept.

Memory: only a block of ``block_rows x n_candidates`` similarities (plus same-size temporaries)
exists at a time; the block size is chosen so a block holds at most ``block_bytes`` (64 MiB).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

METRIC_VERSION = "1.0"  # bump on any change of semantics
DEFAULT_K = (1, 5, 10)
DEFAULT_P = 10
BLOCK_BYTES = 32 << 20
DIRECTIONS = ("i2t", "t2i")


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
    def from_lists(cls, lists: Sequence[Sequence[int]], n_candidates: int) -> "Positives":
        rows = [np.unique(np.asarray(list(r), dtype=np.int64)) for r in lists]
        for q, r in enumerate(rows):
            if len(r) and (r[0] < 0 or r[-1] >= n_candidates):
                raise ValueError(f"positive index out of range for query {q}: {r.tolist()} "
                                 f"(there are {n_candidates} candidates)")
        ptr = np.zeros(len(rows) + 1, dtype=np.int64)
        ptr[1:] = np.cumsum([len(r) for r in rows])
        idx = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        return cls(ptr, idx.astype(np.int64), n_candidates)


def _as_lists(extra, n: int, name: str) -> list[list[int]]:
    if extra is None:
        return [[] for _ in range(n)]
    if isinstance(extra, dict):
        out = [[] for _ in range(n)]
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
    i2t_extra = _as_lists(extra_positives.get("i2t"), n_gallery, "i2t")
    t2i_extra = _as_lists(extra_positives.get("t2i"), n_captions, "t2i")
    by_image = [[] for _ in range(n_gallery)]
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


class EmbeddingSource(SimilaritySource):
    """Dot products of (normalized) embeddings, computed per block; never the full matrix.

    With ``device`` set (e.g. "cuda"), the block products run there and only the block comes back.
    """

    def __init__(self, image_emb, text_emb, device: str | None = None):
        self.img = _to_numpy(image_emb)
        self.txt = _to_numpy(text_emb)
        if self.img.shape[1] != self.txt.shape[1]:
            raise ValueError(f"image embeddings have size {self.img.shape[1]} but text embeddings "
                             f"{self.txt.shape[1]}")
        self.n_images, self.n_captions = len(self.img), len(self.txt)
        self.device = device if device and device != "cpu" else None
        if self.device:
            import torch

            self._t = {"img": torch.from_numpy(self.img).to(self.device),
                       "txt": torch.from_numpy(self.txt).to(self.device)}

    def rows(self, direction, queries):
        q, c = ("img", "txt") if direction == "i2t" else ("txt", "img")
        if self.device:
            import torch

            idx = torch.from_numpy(np.asarray(queries)).to(self.device)
            return (self._t[q][idx] @ self._t[c].T).cpu().numpy()
        mats = {"img": self.img, "txt": self.txt}
        return mats[q][queries] @ mats[c].T


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
# per-direction computation

@dataclass
class DirectionResult:
    direction: str
    query_ids: np.ndarray  # query indices (image rows for i2t, caption indices for t2i)
    best_rank: np.ndarray  # 1-based rank of the best positive
    r_precision: np.ndarray  # fraction (0..1)
    map_at_r: np.ndarray  # fraction (0..1)
    dcg: np.ndarray
    ndcg: np.ndarray
    n_positives: np.ndarray
    graded: dict = field(default_factory=dict)  # name -> per-query nDCG with graded relevance labels

    def recall(self, k: int) -> np.ndarray:
        return (self.best_rank <= k).astype(np.float64)


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


def _discounts(p: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, p + 2, dtype=np.float64))


def graded_ndcg_rows(gain: np.ndarray, top_ix: np.ndarray, disc: np.ndarray) -> np.ndarray:
    """nDCG of each row with purely graded gains: ``gain`` (rows x candidates) the gain of every
    candidate, ``top_ix`` the model's top-p candidates in ranked order, ``disc`` the p discounts.
    The ideal DCG sorts the gains themselves; a row whose ideal DCG is <= 0 gets 0."""
    pp = top_ix.shape[1]
    dcg = np.take_along_axis(gain, top_ix, axis=1) @ disc
    top_g = -np.partition(-gain, pp - 1, axis=1)[:, :pp] if gain.shape[1] > pp else gain
    idcg = -np.sort(-top_g, axis=1)[:, :pp] @ disc
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(idcg > 0, dcg / idcg, 0.0)


def _direction(source: SimilaritySource, direction: str, queries: np.ndarray, pos: Positives, *,
               kmax: int, p: int, relevance: SimilaritySource | None, block_bytes: int,
               progress: Callable[[int], None] | None = None, graded: dict | None = None) -> DirectionResult:
    n_q = len(queries)
    n_cand = pos.n_candidates
    counts = pos.counts
    rmax = int(counts.max()) if n_q else 1
    K = min(n_cand, max(kmax, rmax, p + rmax))
    disc = _discounts(p)
    pos_keys = pos.keys()

    best_rank = np.zeros(n_q, dtype=np.int64)
    r_prec = np.zeros(n_q)
    map_r = np.zeros(n_q)
    dcg = np.zeros(n_q)
    ndcg = np.zeros(n_q)
    block_rows = max(1, min(n_q, block_bytes // max(1, 4 * n_cand)))
    graded = {name: src for name, src in (graded or {}).items() if direction in getattr(src, "directions", DIRECTIONS)}
    graded_out = {name: np.zeros(n_q) for name in graded}

    for b0 in range(0, n_q, block_rows):
        b1 = min(n_q, b0 + block_rows)
        qs = np.arange(b0, b1)
        blk = source.rows(direction, queries[b0:b1])
        if blk.dtype not in (np.float32, np.float64):
            blk = blk.astype(np.float32)
        if not np.isfinite(blk).all():
            bad = int(queries[b0 + np.flatnonzero(~np.isfinite(blk).all(axis=1))[0]])
            raise ValueError(f"similarity has NaN or infinite values ({direction} query {bad}); "
                             f"check the model's embeddings")
        # ranking head with exact ties
        top_ix, top_v = _sorted_topk(blk, K)
        keys = (qs[:, None] + 0) * n_cand + top_ix
        loc = np.searchsorted(pos_keys, keys)
        loc = np.minimum(loc, len(pos_keys) - 1) if len(pos_keys) else loc
        is_pos = (pos_keys[loc] == keys) if len(pos_keys) else np.zeros_like(keys, dtype=bool)
        R = counts[b0:b1]

        # best positive: highest score, ties -> lowest index; exact rank by counting
        pstart, pend = pos.ptr[b0], pos.ptr[b1]
        prow = np.repeat(np.arange(b1 - b0), R)
        pcol = pos.idx[pstart:pend]
        pscore = blk[prow, pcol]
        best_score = np.full(b1 - b0, -np.inf, dtype=blk.dtype)
        np.maximum.at(best_score, prow, pscore)
        is_best = pscore == best_score[prow]
        best_col = np.full(b1 - b0, n_cand, dtype=np.int64)
        np.minimum.at(best_col, prow[is_best], pcol[is_best])
        found = is_pos.any(axis=1)
        first_hit = np.where(found, np.argmax(is_pos, axis=1) + 1, 0)
        rank = first_hit.astype(np.int64)
        need = np.flatnonzero(~found)
        if len(need):
            sub = blk[need]
            t = best_score[need][:, None]
            gt = np.count_nonzero(sub > t, axis=1)
            eq = np.count_nonzero(sub == t, axis=1)
            rank_need = gt + 1
            for r in np.flatnonzero(eq > 1):  # ties with the best positive: count those before it
                row = need[r]
                rank_need[r] += int(np.count_nonzero(blk[row, :best_col[row]] == best_score[row]))
            rank[need] = rank_need
        best_rank[b0:b1] = rank

        # R-precision and mAP@R from the ranking head (K >= R)
        ranks_1 = np.arange(1, K + 1)
        within_R = ranks_1[None, :] <= R[:, None]
        hits_R = is_pos & within_R
        r_prec[b0:b1] = hits_R.sum(axis=1) / R
        cum = np.cumsum(is_pos, axis=1)
        map_r[b0:b1] = (np.where(hits_R, cum / ranks_1[None, :], 0.0)).sum(axis=1) / R

        # DCG_CM@p and its normalized form
        pp = min(p, K)
        if relevance is None:
            rel_top = top_v[:, :pp].astype(np.float64)
            nonpos = np.where(is_pos, -np.inf, top_v.astype(np.float64))
            nonpos = -np.sort(-nonpos, axis=1)[:, :pp]
        else:
            rblk = relevance.rows(direction, queries[b0:b1]).astype(np.float64)
            if not np.isfinite(rblk).all():
                bad = int(queries[b0 + np.flatnonzero(~np.isfinite(rblk).all(axis=1))[0]])
                raise ValueError(f"relevance has NaN or infinite values ({direction} query {bad})")
            rel_top = np.take_along_axis(rblk, top_ix[:, :pp], axis=1)
            rblk[prow, pcol] = -np.inf
            if rblk.shape[1] > pp:
                part = np.partition(-rblk, pp - 1, axis=1)[:, :pp]
            else:
                part = -rblk
            nonpos = -np.sort(part, axis=1)
        gains = np.where(is_pos[:, :pp], 1.0, rel_top)
        dcg[b0:b1] = gains @ disc[:pp]
        ones = (np.arange(pp)[None, :] < R[:, None]).astype(np.float64)
        ideal = np.concatenate([np.where(ones > 0, 1.0, -np.inf), nonpos], axis=1)
        ideal = -np.sort(-ideal, axis=1)[:, :pp]
        ideal = np.where(np.isfinite(ideal), ideal, 0.0)
        idcg = ideal @ disc[:pp]
        with np.errstate(divide="ignore", invalid="ignore"):
            ndcg[b0:b1] = np.where(idcg > 0, dcg[b0:b1] / idcg, 0.0)
        for name, src in graded.items():  # graded labels (Messina et al.): gain 2^rel - 1, no override
            gblk = np.exp2(np.asarray(src.rows(direction, queries[b0:b1]), dtype=np.float64)) - 1.0
            graded_out[name][b0:b1] = graded_ndcg_rows(gblk, top_ix[:, :pp], disc[:pp])
        if progress:
            progress(b1 - b0)

    return DirectionResult(direction, queries, best_rank, r_prec, map_r, dcg, ndcg, counts.copy(), graded_out)


# ---------------------------------------------------------------------------------------------
# public API

@dataclass
class Evaluation:
    """Per-query values of both directions and their aggregates."""

    i2t: DirectionResult
    t2i: DirectionResult
    k: tuple = DEFAULT_K
    p: int = DEFAULT_P
    extra: dict = field(default_factory=dict)
    _plugin_cols: dict = field(default_factory=dict, repr=False)  # direction -> plug-in per-query values

    def direction(self, d: str) -> DirectionResult:
        return self.i2t if d == "i2t" else self.t2i

    def records(self) -> list[dict]:
        """Structured metric records {direction, metric, k, value}: the registered metrics
        (vlbench.benchmark.metric_specs) in registration order per direction, the graded nDCGs,
        the metric plug-ins, then the total RSUM and any extra records."""
        from .metric_specs import BUILTINS

        out = []
        for d in DIRECTIONS:
            r = self.direction(d)
            for m in BUILTINS:
                out.extend(dict(direction=d, metric=m.name, k=k, value=v) for k, v in m.values(r, self))
            for name, vals in sorted(r.graded.items()):
                out.append(dict(direction=d, metric=f"ndcg_{name}", k=self.p, value=float(vals.mean())))
            for name, vals in self._plugins(d).items():
                out.append(dict(direction=d, metric=name, k=None, value=float(vals.mean())))
        total = sum(rec["value"] for rec in out if rec["metric"] == "rsum")
        out.append(dict(direction="both", metric="rsum", k=None, value=total))
        for rec in self.extra.get("records", []):
            out.append(rec)
        return out

    def _plugins(self, d: str) -> dict:
        from .metric_specs import plugin_columns

        if d not in self._plugin_cols:
            self._plugin_cols[d] = plugin_columns(self.direction(d), self)
        return self._plugin_cols[d]

    def as_dict(self) -> dict:
        return flat_keys(self.records())

    def per_query(self, d: str) -> dict[str, np.ndarray]:
        r = self.direction(d)
        cols = {"query": r.query_ids, "best_rank": r.best_rank, "n_positives": r.n_positives}
        for k in self.k:
            cols[f"recall@{k}"] = 100.0 * r.recall(k)
        cols["rsum"] = sum(cols[f"recall@{k}"] for k in self.k)
        cols["r_precision"] = 100.0 * r.r_precision
        cols["map_at_r"] = 100.0 * r.map_at_r
        cols[f"dcg_cm@{self.p}"] = r.dcg
        cols[f"ndcg_cm@{self.p}"] = r.ndcg
        for name, vals in sorted(r.graded.items()):
            cols[f"ndcg_{name}@{self.p}"] = vals
        cols.update(self._plugins(d))
        return cols


def flat_keys(records: list[dict]) -> dict:
    """``{direction}_{metric}[@k]`` keys; ``rsum`` for the total."""
    out = {}
    for rec in records:
        if rec["direction"] == "both":
            key = rec["metric"]
        else:
            key = f"{rec['direction']}_{rec['metric']}" + (f"@{rec['k']}" if rec["k"] is not None else "")
        out[key] = rec["value"]
    return out


def evaluate(source: SimilaritySource, caption_to_image, *, extra_positives=None, k=DEFAULT_K, p: int = DEFAULT_P,
             relevance: SimilaritySource | None = None, block_bytes: int = BLOCK_BYTES,
             progress: Callable[[int], None] | None = None, graded: dict | None = None) -> Evaluation:
    """Metrics of both directions from a similarity source, or a plain (n_images, n_captions) array.

    relevance: the DCG_CM relevance of non-positives (default: the similarity itself); a source
        whose ``directions`` attribute excludes a direction is used only for the others.
    graded: {name: relevance source} of graded labels (vlbench.benchmark.graded: ROUGE-L, MiniLM);
        each adds a per-query nDCG with gains 2^rel - 1 as metric ``ndcg_<name>`` (t2i).
    """
    if not isinstance(source, SimilaritySource):  # a plain (n_images, n_captions) array: numpy, torch, lists
        source = ArraySource(source)
    if relevance is not None and not isinstance(relevance, SimilaritySource):
        relevance = ArraySource(relevance)
    k = tuple(sorted({int(x) for x in k}))
    if not k or k[0] < 1:
        raise ValueError(f"k must be positive integers, got {k}")
    if p < 1:
        raise ValueError(f"p must be >= 1, got {p}")
    i2t_pos, t2i_pos, query_images = build_positives(caption_to_image, source.n_images, extra_positives)
    if len(caption_to_image) != source.n_captions:
        raise ValueError(f"caption_to_image has {len(caption_to_image)} entries but the similarity matrix has "
                         f"{source.n_captions} caption columns")
    if relevance is not None and (relevance.n_images, relevance.n_captions) != (source.n_images, source.n_captions):
        raise ValueError("relevance must have the same shape as the similarity matrix")
    def rel_for(d):
        return relevance if relevance is not None and d in getattr(relevance, "directions", DIRECTIONS) else None

    kw = dict(kmax=max(k), p=p, block_bytes=block_bytes, progress=progress, graded=graded)
    i2t = _direction(source, "i2t", query_images, i2t_pos, relevance=rel_for("i2t"), **kw)
    t2i = _direction(source, "t2i", np.arange(source.n_captions), t2i_pos, relevance=rel_for("t2i"), **kw)
    return Evaluation(i2t, t2i, k, p)


def score(similarity, caption_to_image, *, extra_positives=None, k=DEFAULT_K, p: int = DEFAULT_P,
          relevance=None) -> dict:
    """All retrieval metrics for a precomputed similarity matrix.

    similarity: array of shape (n_images, n_captions) (numpy or torch); row i, column j is the
        score of image i and caption j.
    caption_to_image: caption_to_image[j] is the row of caption j's image.
    extra_positives: optional {"i2t": {image: [caption, ...]}, "t2i": {caption: [image, ...]}}
        (dicts or full lists), added to the original positives (CxC / ECCV Caption).
    relevance: optional array of the same shape giving the non-positive relevance for DCG_CM
        (default: ``similarity`` itself).

    Returns {"i2t_recall@1": ..., "t2i_medr": ..., "rsum": ...}: recalls, R-precision and mAP@R in
    percent, ranks 1-based, DCG values raw.
    """
    src = ArraySource(similarity)
    rel = None if relevance is None else ArraySource(relevance)
    return evaluate(src, caption_to_image, extra_positives=extra_positives, k=k, p=p, relevance=rel).as_dict()
