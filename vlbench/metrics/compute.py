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
  model's similarity. nDCG_CM@p divides by the ideal DCG over the same relevance values. A p above the
  number of candidates gives the value at p = the number of candidates (nothing of size p is made).
* nDCG@p (the default table's): nDCG_CM@p with the relevance of non-positives clipped at 0, so every gain
  is in [0, 1] and nDCG@p in [0, 1] (docs/metrics.md argues the choice).
* RSUM: the sum of Recall@{1,5,10} over both directions (max 600), also per direction.
* MRR@k, Precision@k, mAP@k (/ R) and nDCG@k with binary gains, for each k: metrics/cutoff.py (trec_eval's).

An image with no positive caption (a distractor in an enlarged gallery) is a candidate for t2i but
not an i2t query. The per-query values are kept; which metrics are reported, their aggregates (means, the
median rank, RSUM's sum), record order and per-query columns come from the metric registry (specs.py).

Memory: only a block of ``block_rows x n_candidates`` similarities (plus same-size temporaries)
exists at a time; the block size is chosen so a block holds at most ``block_bytes`` (64 MiB).

The ranking (positives, similarity sources, the tie-broken ranking head) is one shared step in
ranking.py; here each per-query value is a small function of a ranked block (the i2t fraction recall too).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .cutoff import CUT_METRICS, cut_metrics, fraction_recall
from .official import official_values
from .ranking import (  # noqa: F401 -- re-exported: compute is where callers find them
    BLOCK_BYTES,
    DIRECTIONS,
    ArraySource,
    EmbeddingSource,
    Positives,
    RankedBlock,
    SimilaritySource,
    _sorted_topk,
    _to_numpy,
    build_positives,
    check_finite,
    head_size,
    query_block_rows,
    rank_blocks,
)
from .sharded import ScoreBlock, one_piece_block, parse_score_block, sharded_blocks
from .specs import builtins, from_stored, plugin_columns, plugin_metrics

# bump on any change of semantics (1.1: relevance gains from the query as evaluated; duplicates share scores; 1.2: one
# tiled scorer, metrics/tiles.py; 1.3: its tiles square, up to 512 x 512: a near tie can round the other way)
METRIC_VERSION = "1.3"
DEFAULT_K = (1, 5, 10)
DEFAULT_P = 10
TOP_KEEP = 10  # each query's best-ranked candidates kept from the scoring pass (metrics/flips.py reads them)
I2T_RECALLS = ("hit", "fraction")  # i2t Recall@k: any hit in the top k, or hits / min(#relevant, k)


# ---------------------------------------------------------------------------------------------
# per-direction computation

@dataclass(frozen=True)
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
    fraction_recall: dict = field(default_factory=dict)  # k -> per-query share of positives in the top k (0..1)
    #: column name -> per-query values computed outside the ranking pass: the plug-in metrics' (as their
    #: per_query gives them) and the distractors' false rate; read through specs.from_stored metrics
    plugins: dict = field(default_factory=dict)
    #: (n_queries, <=TOP_KEEP) int32: the best-ranked candidates, tie rule order (flip analysis, retrieved.npz)
    top: np.ndarray | None = None
    #: nDCG@p with the relevance gains of non-positives clipped at 0 (in [0, 1]; the default table's nDCG)
    ndcg_clipped: np.ndarray | None = None
    at_k: dict = field(default_factory=dict)  # CUT_METRICS name -> {k: per-query fraction} (metrics/cutoff.py)

    def recall(self, k: int) -> np.ndarray:
        if k in self.fraction_recall:  # --i2t-recall fraction
            return self.fraction_recall[k]
        return (self.best_rank <= k).astype(np.float64)


def _discounts(p: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, p + 2, dtype=np.float64))


def graded_ndcg_rows(gain: np.ndarray, top_ix: np.ndarray, disc: np.ndarray) -> np.ndarray:
    """nDCG of each row with purely graded gains: ``gain`` (rows x candidates) the gain of every
    candidate, ``top_ix`` the model's top-p candidates in ranked order, ``disc`` the p discounts.
    The ideal DCG sorts the gains themselves; a row whose ideal DCG is <= 0 gets 0."""
    pp = top_ix.shape[1]
    top_g = -np.partition(-gain, pp - 1, axis=1)[:, :pp] if gain.shape[1] > pp else gain
    return graded_ndcg_of(np.take_along_axis(gain, top_ix, axis=1), -np.sort(-top_g, axis=1)[:, :pp], disc)


def graded_ndcg_of(top_gain: np.ndarray, largest: np.ndarray, disc: np.ndarray) -> np.ndarray:
    """nDCG from the gains of the ranked top-p and the p largest gains of the row (descending)."""
    dcg = top_gain @ disc
    idcg = largest @ disc
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(idcg > 0, dcg / idcg, 0.0)


def _best_rank(b: RankedBlock, n_cand: int) -> np.ndarray:
    """1-based rank of each query's best positive: highest score, ties -> lowest index; exact rank by counting."""
    if b.best_rank is not None:  # scored in blocks: counted over them (metrics/sharded.py)
        return b.best_rank
    blk, prow, pcol = b.sim, b.prow, b.pcol
    assert blk is not None  # a one-piece block holds its similarities
    pscore = blk[prow, pcol]
    best_score = np.full(b.b1 - b.b0, -np.inf, dtype=blk.dtype)
    np.maximum.at(best_score, prow, pscore)
    is_best = pscore == best_score[prow]
    best_col = np.full(b.b1 - b.b0, n_cand, dtype=np.int64)
    np.minimum.at(best_col, prow[is_best], pcol[is_best])
    found = b.is_pos.any(axis=1)
    first_hit = np.where(found, np.argmax(b.is_pos, axis=1) + 1, 0)
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
    return rank


def _precision_at_r(b: RankedBlock, K: int) -> tuple[np.ndarray, np.ndarray]:
    """R-precision and mAP@R (fractions) from the ranking head (K >= R)."""
    R = b.n_pos
    ranks_1 = np.arange(1, K + 1)
    within_R = ranks_1[None, :] <= R[:, None]
    hits_R = b.is_pos & within_R
    cum = np.cumsum(b.is_pos, axis=1)
    return hits_R.sum(axis=1) / R, (np.where(hits_R, cum / ranks_1[None, :], 0.0)).sum(axis=1) / R


def _nonpositive_relevance(b: RankedBlock, direction: str, queries: np.ndarray, pp: int,
                           relevance: SimilaritySource | None) -> tuple[np.ndarray, np.ndarray]:
    """Relevance of the top-pp candidates, and the pp largest relevances among non-positives."""
    if relevance is None:
        rel_top = b.top_v[:, :pp].astype(np.float64)
        nonpos = np.where(b.is_pos, -np.inf, b.top_v.astype(np.float64))
        return rel_top, -np.sort(-nonpos, axis=1)[:, :pp]
    if b.rel is not None:  # scored in blocks: the head's relevances and the largest ones, combined over them
        return np.ascontiguousarray(b.rel[0][:, :pp]), b.rel[1]
    rblk = relevance.rows(direction, queries[b.b0:b.b1]).astype(np.float64)
    check_finite(rblk, queries, b.b0, direction, "relevance", "")
    rel_top = np.take_along_axis(rblk, b.top_ix[:, :pp], axis=1)
    rblk[b.prow, b.pcol] = -np.inf
    part = np.partition(-rblk, pp - 1, axis=1)[:, :pp] if rblk.shape[1] > pp else -rblk
    return rel_top, -np.sort(part, axis=1)


def _dcg_cm(b: RankedBlock, direction: str, queries: np.ndarray, pp: int, disc: np.ndarray,
            relevance: SimilaritySource | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """DCG_CM@p and nDCG_CM@p (positives gain 1, other candidates their relevance), and nDCG@p with the
    relevance of the other candidates clipped at 0 (same ranking, same ideal order; in [0, 1])."""
    rel_top, nonpos = _nonpositive_relevance(b, direction, queries, pp, relevance)
    gains = np.where(b.is_pos[:, :pp], 1.0, rel_top)
    dcg = gains @ disc[:pp]
    ones = (np.arange(pp)[None, :] < b.n_pos[:, None]).astype(np.float64)
    ideal = np.concatenate([np.where(ones > 0, 1.0, -np.inf), nonpos], axis=1)
    ideal = -np.sort(-ideal, axis=1)[:, :pp]
    ideal = np.where(np.isfinite(ideal), ideal, 0.0)
    idcg = ideal @ disc[:pp]
    # clipping is monotone, so the clipped ideal list is the clipped ideal list above; its first gain is 1
    # (every query has a positive), so its DCG is >= 1 and 0 <= DCG <= ideal DCG
    clipped = np.maximum(gains, 0.0) @ disc[:pp] / (np.maximum(ideal, 0.0) @ disc[:pp])
    with np.errstate(divide="ignore", invalid="ignore"):
        return dcg, np.where(idcg > 0, dcg / idcg, 0.0), clipped


def _direction(source: SimilaritySource, direction: str, queries: np.ndarray, pos: Positives, *,
               ks: tuple, p: int, relevance: SimilaritySource | None, block_bytes: int,
               progress: Callable[[int], None] | None = None, graded: dict | None = None,
               fraction: tuple = (), score_block: ScoreBlock | None = None, group=None) -> DirectionResult:
    """Every built-in per-query value of one direction, from one pass of the shared ranking step; ``ks``: the
    cut-offs k; ``fraction``: the k values whose recall is the fraction recall instead of the hit rate."""
    n_q, kmax = len(queries), max(ks)
    K = head_size(pos, kmax, p)
    keep = min(TOP_KEEP, pos.n_candidates)  # the head the flip analysis keeps; the metrics read K columns
    pp = min(p, K)  # p above the gallery size: DCG@p = DCG@gallery size (nothing of size p is made)
    disc = _discounts(pp)
    out = {name: np.zeros(n_q) for name in ("r_prec", "map_r", "dcg", "ndcg", "ndcg_clipped")}
    best_rank = np.zeros(n_q, dtype=np.int64)
    graded = {name: src for name, src in (graded or {}).items() if direction in getattr(src, "directions", DIRECTIONS)}
    graded_out = {name: np.zeros(n_q) for name in graded}
    frac = {k: np.zeros(n_q) for k in fraction}
    at_k = {name: {k: np.zeros(n_q) for k in ks} for name in CUT_METRICS}
    top = np.zeros((n_q, keep), dtype=np.int32)
    block_rows = query_block_rows(source, direction, n_q, pos.n_candidates, block_bytes)
    score_block = score_block or one_piece_block(source, direction, n_q, block_rows, block_bytes)  # large: streamed
    if score_block is None:
        blocks = rank_blocks(source, direction, queries, pos, max(K, keep), block_bytes)
    else:  # the gallery in blocks of rows x cols (and over torchrun ranks): the same blocks, combined exactly
        blocks = sharded_blocks(source, direction, queries, pos, max(K, keep), score_block, pp=pp, relevance=relevance,
                                graded=graded, group=group, progress=progress, block_rows=block_rows)
        progress = None
    for b in blocks:
        s = slice(b.b0, b.b1)
        top[s] = b.top_ix[:, :keep]
        if keep > K:  # the exact top-K is the start of the exact longer head: every value as with K
            b = dataclasses.replace(b, top_ix=b.top_ix[:, :K], top_v=b.top_v[:, :K], is_pos=b.is_pos[:, :K])
        best_rank[s] = _best_rank(b, pos.n_candidates)
        out["r_prec"][s], out["map_r"][s] = _precision_at_r(b, K)
        out["dcg"][s], out["ndcg"][s], out["ndcg_clipped"][s] = _dcg_cm(b, direction, queries, pp, disc, relevance)
        for name, src in graded.items():  # graded labels (Messina et al.): gain 2^rel - 1, no override
            if b.graded is not None:  # scored in blocks: gains at the head, the largest gains
                top_gain, largest = b.graded[name]
                graded_out[name][s] = graded_ndcg_of(np.ascontiguousarray(top_gain[:, :pp]), largest, disc[:pp])
                continue
            gblk = np.exp2(np.asarray(src.rows(direction, queries[s]), dtype=np.float64)) - 1.0
            graded_out[name][s] = graded_ndcg_rows(gblk, b.top_ix[:, :pp], disc[:pp])
        for k, v in fraction_recall(b.is_pos, b.n_pos, K, fraction).items():
            frac[k][s] = v
        for name, by_k in cut_metrics(b.is_pos, b.n_pos, ks).items():
            for k, v in by_k.items():
                at_k[name][k][s] = v
        if progress:
            progress(b.b1 - b.b0)
    return DirectionResult(direction, queries, best_rank, out["r_prec"], out["map_r"], out["dcg"], out["ndcg"],
                           pos.counts.copy(), graded_out, frac, top=top, ndcg_clipped=out["ndcg_clipped"], at_k=at_k)


# ---------------------------------------------------------------------------------------------
# public API

@dataclass(frozen=True)
class Evaluation:
    """Per-query values of both directions; records and columns are derived from the metric registry.

    ``official``: {(direction, metric, k): value} of the official ECCV / CxC protocol (an input of the
    scoring, read by the registered ``eccv_*`` / ``cxc_recall`` metrics).
    """

    i2t: DirectionResult
    t2i: DirectionResult
    k: tuple = DEFAULT_K
    p: int = DEFAULT_P
    official: dict = field(default_factory=dict)
    #: the metrics after the built-in retrieval ones, per direction: the plug-ins, then (a gallery condition)
    #: the false rate; each reads its per-query values from ``DirectionResult.plugins`` (specs.from_stored)
    extra: tuple = ()

    def direction(self, d: str) -> DirectionResult:
        return self.i2t if d == "i2t" else self.t2i

    def records(self) -> list[dict]:
        """Structured metric records {direction, metric, k, value}: per direction the built-in retrieval
        metrics (registry order) and the plug-ins; then the "both" totals; then the official metrics."""
        out = []
        for d in DIRECTIONS:
            out.extend(self._records(d, builtins("retrieval")))
            out.extend(self._records(d, self.extra))
        for m in builtins("retrieval"):
            if m.total:
                total = sum(rec["value"] for rec in out if rec["metric"] == m.name)
                out.append(dict(direction="both", metric=m.name, k=None, value=total))
        for d in DIRECTIONS:
            out.extend(self._records(d, builtins("official")))
        return out

    def _records(self, d: str, metrics) -> list[dict]:
        r = self.direction(d)
        return [dict(direction=d, metric=i.name, k=k, value=v)
                for m in metrics for i in m.members(r) for k, v in i.values(r, self)]

    def as_dict(self) -> dict:
        return flat_keys(self.records())

    def per_query(self, d: str) -> dict[str, np.ndarray]:
        """Per-query columns: query, best rank, positives, then every metric's column (registry order)."""
        r = self.direction(d)
        cols = {"query": r.query_ids, "best_rank": r.best_rank, "n_positives": r.n_positives}
        for m in builtins():
            for i in m.members(r):
                cols.update(i.columns(r, self))
        for m in self.extra:
            cols.update(m.columns(r, self))
        return cols


def with_plugins(ev: Evaluation) -> Evaluation:
    """``ev`` with the plug-in metrics' per-query values (computed once, when the evaluation is made)."""
    plugins = plugin_metrics()
    if not plugins:
        return ev
    i2t, t2i = (dataclasses.replace(ev.direction(d), plugins=plugin_columns(ev.direction(d), ev, plugins))
                for d in DIRECTIONS)
    return dataclasses.replace(ev, i2t=i2t, t2i=t2i, extra=ev.extra + tuple(from_stored(m, e.name) for e, m in plugins))


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
             progress: Callable[[int], None] | None = None, graded: dict | None = None,
             i2t_recall: str = "hit", official: dict | None = None, score_block=None, group=None) -> Evaluation:
    """Metrics of both directions from a similarity source, or a plain (n_images, n_captions) array.

    relevance: the DCG_CM relevance of non-positives (default: the similarity itself); a source
        whose ``directions`` attribute excludes a direction is used only for the others.
    graded: {name: relevance source} of graded labels (vlbench.metrics.graded: ROUGE-L, MiniLM);
        each adds a per-query nDCG with gains 2^rel - 1 as the registered metric ``ndcg_<name>`` (t2i).
    i2t_recall: "hit" (the hit rate) or "fraction" (positives in the top k / min(R, k), from the same ranking).
    official: the official ECCV / CxC ground truth and COCO ids (vlbench.metrics.official.official_values),
        scored on the same similarities as metrics ``eccv_*`` / ``cxc_recall``.
    score_block: ``"ROWSxCOLS"`` (or a :class:`ScoreBlock`): never more than that many similarities at a time,
        the gallery scored in column shards whose results combine exactly (metrics/sharded.py); the same
        numbers as without it. group: under torchrun, a ``sharded.TorchGroup``: each rank scores its slice of
        the gallery (every rank calls evaluate with the same arguments and gets the same Evaluation).
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

    if i2t_recall not in I2T_RECALLS:
        raise ValueError(f"i2t_recall must be 'hit' or 'fraction', got {i2t_recall!r}")
    if score_block is not None:
        score_block = parse_score_block(score_block)
    kw = dict(ks=k, p=p, block_bytes=block_bytes, progress=progress, graded=graded,
              score_block=score_block, group=group)
    i2t = _direction(source, "i2t", query_images, i2t_pos, relevance=rel_for("i2t"),
                     fraction=k if i2t_recall == "fraction" else (), **kw)
    t2i = _direction(source, "t2i", np.arange(source.n_captions), t2i_pos, relevance=rel_for("t2i"), **kw)
    values = {} if official is None else official_values(official, similarity_matrix(source), k)
    return with_plugins(Evaluation(i2t, t2i, k, p, values))


def similarity_matrix(source: SimilaritySource) -> np.ndarray:
    """The whole (images x captions) matrix as the run scores it (duplicate vectors share their scores); the
    official ECCV / CxC protocol and ``vlbench rescore`` read this one matrix."""
    return source.rows("i2t", np.arange(source.n_images))


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
