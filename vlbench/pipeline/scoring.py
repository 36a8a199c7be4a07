"""The score step of a run: metrics per condition and fold from the encode step's embeddings, fold means
by metric key, and the typed metric values.

Every metric comes out of ONE scoring pass per condition and fold (``metrics.compute.evaluate``): the
protocol's i2t recall (``--i2t-recall fraction``) and the official ECCV / CxC ground truth
(``--extra-positives eccv`` / ``cxc``) are inputs of that pass, not edits of its results. The only
step after it is the ``--perturb-side t2i`` rule (:func:`adjust_evaluations`), which builds new
evaluations with the clean i2t side.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..datasets.folds import fold_captions
from ..metrics import compute
from ..metrics.scan.maxsim import MaxSimSource, TokenVectors
from ..results import MetricKey, MetricValue
from .distractors import score_distractors

#: the block every rank scores at a time under torchrun when the run gives no --score-block: the one-piece pass's
#: 32 MiB, as query tiles of 512 x 16,384 candidates (tiles in flight when the scorer streams; metrics/streaming)
RANKS_BLOCK = "512x16384"


def scoring_kwargs(scoring, group=None) -> dict:
    """compute.evaluate's options from the run's scoring options; under torchrun (``group``: the ranks, a
    metrics.sharded.TorchGroup) the gallery is scored in blocks across the ranks (--score-block, or
    RANKS_BLOCK): the same numbers as one process, bit for bit (metrics/tiles.py)."""
    kw = dict(k=scoring.k, p=scoring.p, i2t_recall=scoring.i2t_recall or "hit",
              score_block=getattr(scoring, "score_block", None))  # an options object without it: one piece
    if group is not None and group.world > 1:
        kw.update(score_block=kw["score_block"] or RANKS_BLOCK, group=group)
    return kw


def similarity_source(img_emb, txt_emb, device=None):
    """The similarities of one condition: dot products of vectors, or MaxSim of a multi-vector model's token
    vectors (metrics/scan/maxsim.py; on the CPU)."""
    if isinstance(img_emb, TokenVectors):
        return MaxSimSource(img_emb, txt_emb)
    return compute.EmbeddingSource(img_emb, txt_emb, device=device)


def evaluate_folds(ds, img_emb, txt_emb, scoring, graded: list | tuple, device=None, relevance=None,
                   group=None) -> list:
    """One Evaluation per fold (one without folds) of one condition's embeddings; ``scoring``: the run's
    scoring options (run_config.ScoringOptions: k, p, i2t_recall)."""
    kw = scoring_kwargs(scoring, group)
    if ds.folds is None:
        rel = None if relevance is None else compute.EmbeddingSource(relevance[0], relevance[1], device=device)
        return [compute.evaluate(similarity_source(img_emb, txt_emb, device), ds.caption_to_image,
                                 extra_positives=ds.extra_positives, graded=graded[0], relevance=rel,
                                 official=getattr(ds, "official_positives", None), **kw)]
    out = []
    for fold, g in zip(ds.folds, graded):
        sub = ds.subset(fold)
        caps = fold_captions(ds.caption_to_image, fold)
        rel = None if relevance is None else compute.EmbeddingSource(relevance[0][fold], relevance[1][caps],
                                                                     device=device)
        out.append(compute.evaluate(similarity_source(img_emb[fold], txt_emb[caps], device),
                                    sub.caption_to_image, graded=g, relevance=rel, **kw))
    return out


def condition_relevance(relevance, off: int, n: int):
    """The fixed relevance model's (image, caption) embeddings of the condition whose captions start at
    ``off`` of Plan.texts(): the captions as evaluated (the relevance of the candidate to the query is
    that of the query as evaluated), so a perturbed t2i query's gains come from the perturbed caption and an i2t
    query's from
    the perturbed gallery captions it ranks. Images: the clean gallery (the relevance model does not
    encode image corruptions). None: relevance = the evaluated similarity."""
    if relevance is None:
        return None
    img, txt = relevance
    if len(txt) < off + n:
        raise ValueError(f"the relevance model has {len(txt)} caption embeddings; the condition at offset {off} "
                         f"needs {off + n} (encode every input of Plan.texts() with it)")
    return img, txt[off:off + n]


def score(scoring, plan, enc, group=None) -> dict:
    """Metrics per condition (condition -> one Evaluation per fold); ``scoring``: the run's scoring options
    (run_config.ScoringOptions), checked by validate(); ``group``: torchrun's ranks, every one of which calls
    this with the same arguments (each scores its slice of every gallery; all get the same evaluations)."""
    ds, n = plan.ds, plan.ds.n_captions
    device = similarity_device(enc.adapter)
    evals = {cond: evaluate_folds(ds, enc.variant_img.get(cond, enc.img_emb), enc.txt_emb[off:off + n], scoring,
                                  plan.graded, device=device, relevance=condition_relevance(enc.relevance, off, n),
                                  group=group)
             for cond, off in enc.offsets.items() if cond not in getattr(enc, "distractors", {})}

    evals.update(score_distractors(scoring_kwargs(scoring, group), plan, enc, evals["clean"], device=device))
    return adjust_evaluations(scoring, plan, enc, evals)


def adjust_evaluations(cfg, plan, enc, evals: dict) -> dict:
    """The i2t side under ``--perturb-side t2i``: perturbed conditions get new evaluations with the clean i2t
    side (perturbed captions are t2i queries only). The fraction recall (``--i2t-recall fraction``) is an
    input of the scoring pass itself (metrics.compute.evaluate(i2t_recall=...)); nothing is edited in place."""
    if cfg.perturb_side != "t2i":
        return evals
    return {cond: [dataclasses.replace(ev, i2t=clean.i2t) for ev, clean in zip(evs, evals["clean"])]
            if cond in plan.perturbed else evs for cond, evs in evals.items()}


def mean_records(evals: list) -> list[dict]:
    """Metric records; with folds, the mean over the folds that report each metric key (direction, metric,
    k), in the order the keys first appear (as papers report COCO 1k)."""
    by_key: dict[MetricKey, list[dict]] = {}
    for e in evals:
        for r in e.records():
            by_key.setdefault(MetricKey(r["direction"], r["metric"], r["k"]), []).append(r)
    if len(evals) == 1:
        return [rs[0] for rs in by_key.values()]
    return [dict(rs[0], value=float(np.mean([r["value"] for r in rs]))) for rs in by_key.values()]


def metric_values(evals: dict) -> list[MetricValue]:
    """The typed values of every condition (fold means)."""
    return [MetricValue(cond, MetricKey(r["direction"], r["metric"], r["k"]), r["value"],
                        {n: x for n, x in r.items() if n not in ("direction", "metric", "k", "value")})
            for cond, ev in evals.items() for r in mean_records(ev)]


def similarity_device(adapter) -> str | None:
    """"cuda[:N]" when the model runs (or, in a warm run that never loads it, would run) on a GPU, else None
    (NumPy). Resolved the same way whether or not the model was loaded: a GPU block product rounds differently
    from NumPy's, so a warm run must score where the cold run scored to give the same numbers."""
    resolve = getattr(adapter, "scoring_device", None)
    dev = str(resolve() if callable(resolve) else adapter.device)
    return dev if dev.startswith("cuda") else None
