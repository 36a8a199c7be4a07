"""Official ECCV Caption and CxC metrics, from a similarity matrix and the COCO ids of its rows and columns.

ECCV Caption (Chun et al. 2022, the ``eccv_caption`` package): only the annotated queries are scored
(1,332 caption queries, 1,261 image queries of the COCO 5k test split), each against its ECCV positives, with
the package's metric definitions:

- mAP@R = (1/R) * sum over r = 1..R of precision@r * rel(r), R = the query's number of positives;
- R-Precision = positives among the top R / R;
- R@1 = 1 if the top candidate is a positive.

``queries="all"`` is the variant that scores every query of the matrix, each against its original
positives united with its ECCV positives where it has any (what vlbench's plain ``--extra-positives eccv``
does). CxC as the package defines it: Recall@K (hit rate) over the queries of its ground truth files
(image-caption pairs of CxC's SITS rated >= 3, as shipped: 24,972 caption and 5,000 image queries);
``positives="union"`` unites each query's CxC positives with its original ones.

The ground truths come from ``vlbench.datasets.eccv.load_gts``: COCO image ids to caption ids and back.
Two caption ids among ECCV's i2t positives are not in the 25,000 test captions; as in the package they count
in R and can never be retrieved. The top lists come from the shared tie-broken ranking step
(``ranking._sorted_topk``: score descending, ties to the lower candidate index).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import DataError, VlbenchError
from ..results import DIRECTIONS
from .ranking import _sorted_topk

BLOCK_ROWS = 1024


def _merge(a: dict[int, list[int]], b: dict[int, list[int]], keys) -> dict[int, list[int]]:
    return {k: list(dict.fromkeys(list(a.get(k, [])) + list(b.get(k, [])))) for k in keys}


def _rank_rows(sim: np.ndarray, row_ids: Sequence[int], col_ids: Sequence[int], queries: dict, top: int):
    """query id -> candidate ids of its row, best first (top ``top`` only)."""
    index = {int(q): i for i, q in enumerate(row_ids)}
    missing = [q for q in queries if q not in index]
    if missing:
        raise DataError(f"{len(missing)} query id(s) of the ground truth are not in the matrix, e.g. {missing[0]}",
                        "pass the similarity matrix of the full COCO 5k test split with its COCO ids")
    cols = np.asarray(col_ids)
    qs = list(queries)
    out: dict = {}
    for b0 in range(0, len(qs), BLOCK_ROWS):
        part = qs[b0:b0 + BLOCK_ROWS]
        block = np.asarray(sim[[index[q] for q in part]])
        if block.dtype not in (np.float32, np.float64):
            block = block.astype(np.float64)
        top_ix, _ = _sorted_topk(np.ascontiguousarray(block), top)
        out.update((q, [int(c) for c in cols[ix]]) for q, ix in zip(part, top_ix))
    return out


def _query_scores(ranked: list[int], positives: set[int]) -> tuple[float, float, float]:
    """(mAP@R, R-Precision, R@1) of one query."""
    r = len(positives)
    rel = np.array([c in positives for c in ranked[:r]], dtype=np.float64)
    precision_at = np.cumsum(rel) / np.arange(1, r + 1)
    return float(np.sum(precision_at * rel) / r), float(rel.sum() / r), float(ranked[0] in positives)


def _direction_metrics(sim, row_ids, col_ids, gts: dict[int, list[int]]) -> dict[str, float]:
    gts = {q: v for q, v in gts.items() if v}
    top = max(len(set(v)) for v in gts.values())
    ranked = _rank_rows(sim, row_ids, col_ids, gts, top)
    scores = np.array([_query_scores(ranked[q], set(v)) for q, v in gts.items()])
    means = scores.mean(axis=0)
    return {"map_at_r": float(means[0]), "rprecision": float(means[1]), "r1": float(means[2]),
            "n_queries": len(gts)}


def _check(sim, image_ids, caption_ids):
    sim = np.asarray(sim)
    if sim.shape != (len(image_ids), len(caption_ids)):
        raise VlbenchError(f"similarity shape {sim.shape} does not match {len(image_ids)} images x "
                           f"{len(caption_ids)} captions", "pass an (images x captions) matrix and both id lists")
    return sim


def eccv_metrics(sim, image_ids: Sequence[int], caption_ids: Sequence[int], eccv: dict, *,
                 queries: str = "annotated", original: dict | None = None) -> dict[str, dict[str, float]]:
    """ECCV Caption mAP@R, R-Precision and R@1 (fractions) for i2t and t2i.

    ``sim`` is (images x captions); ``image_ids`` / ``caption_ids`` the COCO ids of its rows / columns;
    ``eccv`` (and ``original``) from ``vlbench.datasets.eccv.load_gts``. ``queries="all"`` needs ``original``.
    """
    sim = _check(sim, image_ids, caption_ids)
    if queries == "annotated":
        i2t, t2i = eccv["i2t"], eccv["t2i"]
    elif queries == "all":
        if original is None:
            raise VlbenchError("eccv_metrics(queries='all') needs the original ground truth",
                               "pass original=load_gts(folder, 'original')")
        i2t = _merge(original["i2t"], eccv["i2t"], [int(i) for i in image_ids])
        t2i = _merge(original["t2i"], eccv["t2i"], [int(c) for c in caption_ids])
    else:
        raise VlbenchError(f"unknown ECCV query set {queries!r}", "use 'annotated' (official) or 'all'")
    return {"i2t": _direction_metrics(sim, image_ids, caption_ids, i2t),
            "t2i": _direction_metrics(sim.T, caption_ids, image_ids, t2i)}


def cxc_recalls(sim, image_ids: Sequence[int], caption_ids: Sequence[int], cxc: dict, ks=(1, 5, 10), *,
                positives: str = "cxc", original: dict | None = None) -> dict[str, dict[int, float]]:
    """CxC Recall@K (hit rate, fraction) for i2t and t2i over the queries of the CxC ground truth."""
    sim = _check(sim, image_ids, caption_ids)
    i2t, t2i = cxc["i2t"], cxc["t2i"]
    if positives == "union":
        if original is None:
            raise VlbenchError("cxc_recalls(positives='union') needs the original ground truth",
                               "pass original=load_gts(folder, 'original')")
        i2t, t2i = _merge(i2t, original["i2t"], i2t), _merge(t2i, original["t2i"], t2i)
    elif positives != "cxc":
        raise VlbenchError(f"unknown CxC positives {positives!r}", "use 'cxc' (official) or 'union'")
    out = {}
    for name, m, rows, cols, gts in (("i2t", sim, image_ids, caption_ids, i2t),
                                     ("t2i", sim.T, caption_ids, image_ids, t2i)):
        ranked = _rank_rows(m, rows, cols, gts, max(ks))
        out[name] = {k: float(np.mean([bool(set(ranked[q][:k]) & set(v)) for q, v in gts.items()])) for k in ks}
    return out


ECCV_NAMES = {"map_at_r": "eccv_map_at_r", "rprecision": "eccv_r_precision", "r1": "eccv_r1"}


def official_values(official: dict, sim: np.ndarray, ks=(1, 5, 10)) -> dict:
    """{(direction, metric, k): percent} of the official protocol on one (images x captions) similarity matrix;
    ``official``: {"kind": "eccv" | "cxc", "image_ids", "caption_ids", "gt"} (vlbench.datasets.official)."""
    kind, img_ids, cap_ids, gt = official["kind"], official["image_ids"], official["caption_ids"], official["gt"]
    if kind == "eccv":
        m = eccv_metrics(sim, img_ids, cap_ids, gt)
        return {(d, name, None): 100.0 * m[d][key] for d in DIRECTIONS for key, name in ECCV_NAMES.items()}
    r = cxc_recalls(sim, img_ids, cap_ids, gt, ks=tuple(ks))
    return {(d, "cxc_recall", int(k)): 100.0 * r[d][k] for d in DIRECTIONS for k in ks}
