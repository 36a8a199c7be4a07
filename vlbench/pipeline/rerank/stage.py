"""The rerank stage of a run (``--rerank PAIR_SCORER --rerank-k K``), after the first stage's scoring.

Per condition (clean, every caption perturbation, every image corruption, shortcut probes and caption budgets;
not the ``distractors:`` galleries) and per fold: the first stage's exact ranking gives each query's top K
(:func:`~.source.stage_one_heads`, the same similarity bits and tie rule as its metrics); the pair model scores
those pairs (:class:`~.pairs.PairWork`: each image encoded once per condition, each distinct pair once, cached);
:func:`vlbench.models.pairs.rerank` makes the final ranking (the K in descending pair score, equal scores in
first-stage order, then every other candidate in first-stage order); the suite's metric code scores it
(:class:`~.source.RerankedSource`). K per direction is min(K, the direction's candidates).

What the record gets (:class:`Outcome`): the final ranking's evaluations (per-query rows under the condition
``rerank:<condition>``) and results.json ``rerank``: the pair model, K, the rule, the final metrics, the first
stage's ceiling (its Recall@K: the best the rerank can reach) and the gain (final minus first stage) with a
paired bootstrap interval drawn as the run's own intervals are.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ...datasets.folds import fold_captions
from ...errors import OptionError
from ...metrics import compute
from ...metrics.ranking import build_positives
from ...metrics.stats import paired_bootstrap
from ...models.pairs import load_pair_scorer, rerank
from ...models.pairs.protocol import REQUIRED
from .. import relevance as relevance_texts
from ..scoring import adjust_evaluations, condition_relevance, metric_values, scoring_kwargs, similarity_device
from .checks import check_k, rerank_k
from .pairs import PairWork, image_loader
from .source import RerankedSource, stage_one_heads

#: the per-query file's condition name of a condition's final (reranked) ranking
PREFIX = "rerank:"
RULE = ("first stage: the run's exact ranking of the whole gallery (score desc, then candidate index asc); the pair "
        "model re-scores each query's top K (K per direction: min(K, its candidates)); final ranking: those K in "
        "descending pair score, equal pair scores in first-stage order, then every candidate below K in "
        "first-stage order")


@dataclass
class Outcome:
    evals: dict  # condition -> [Evaluation per fold] of the final ranking
    section: dict  # results.json "rerank"
    counts: dict = field(default_factory=dict)  # pairs scored / cached, images encoded, seconds


def _parts(ds) -> list:
    """(gallery image ids, caption ids, caption -> image within the part, extra positives) per fold."""
    if ds.folds is None:
        return [(np.arange(len(ds.gallery_images)), np.arange(ds.n_captions), np.asarray(ds.caption_to_image),
                 ds.extra_positives)]
    out = []
    for fold in ds.folds:
        out.append((np.asarray(fold, dtype=np.int64), fold_captions(ds.caption_to_image, fold),
                    np.asarray(ds.subset(fold).caption_to_image), None))
    return out


def plan_line(cfg, plan, scorer_name: str) -> str:
    """The cost, said before the work: K x queries pair forwards per condition (at most: cached and repeated
    pairs are not scored again)."""
    k = rerank_k(cfg)
    conds = [c for c in plan.conditions if c.kind != "gallery"]
    per = 0
    for img, cap, c2i, _ in _parts(plan.ds):
        per += len(np.unique(c2i)) * min(k, len(cap)) + len(cap) * min(k, len(img))
    return (f"rerank: {scorer_name} re-scores each query's top {k} in {len(conds)} condition(s): at most "
            f"{per * len(conds):,} pair forwards (K x queries: {per:,} per condition; pairs in the pair-score cache "
            "or repeated are not scored again)")


def announce(cfg, plan, log) -> None:
    """Before any encoding: K against the gallery (refused in the plan), and the cost."""
    if cfg.rerank is None:
        return
    check_k(cfg, plan.ds)
    log(plan_line(cfg, plan, cfg.rerank))


def in_memory(scorer):
    """A pair scorer held in memory (vlbench.training.Evaluator(rerank=...)): checked for the protocol's methods."""
    missing = [m for m in REQUIRED if not callable(getattr(scorer, m, None))]
    if missing:
        raise OptionError("rerank", f"{{opt}} got a {type(scorer).__name__} without {', '.join(missing)}",
                          "give a pair scorer spec (e.g. 'blip-itm') or a vlbench.models.pairs.PairScorer")
    return scorer


def run_stage(cfg, plan, enc, evals: dict, scorer=None) -> Outcome | None:
    """The final rankings and their record; None without ``--rerank``. ``scorer``: a PairScorer in memory
    (vlbench.training) instead of loading ``cfg.rerank``."""
    if scorer is None and cfg.rerank is None:
        return None
    cached = scorer is None and not cfg.no_cache  # a scorer in memory may be training: its scores are never cached
    if scorer is None:
        scorer = load_pair_scorer(cfg.rerank, device=cfg.device, precision=cfg.precision,
                                  trust_remote_code=cfg.trust_remote_code)
    spec = cfg.rerank or getattr(scorer, "spec", None) or getattr(scorer, "name", "pair-scorer")
    work = PairWork(scorer, cache_dir=cfg.cache_dir, read=cached and not cfg.restart, write=cached,
                    batch_size=cfg.batch_size, progress=not cfg.quiet, label=spec)
    ds, n = plan.ds, plan.ds.n_captions
    texts_all = relevance_texts.truncate(cfg, plan.texts()[0])
    paths = [ds.image_path(i) for i in range(len(ds.gallery_images))]
    by_name = {c.name: c for c in plan.conditions}
    device = similarity_device(enc.adapter)
    k = rerank_k(cfg)
    t0 = time.perf_counter()
    final, ks = {}, {}
    for cond, off in enc.offsets.items():
        if cond in getattr(enc, "distractors", {}):
            continue
        load, image_keys = image_loader(paths, by_name.get(cond))
        final[cond], ks = _condition(cfg, plan, enc, cond, off, texts_all[off:off + n], load, image_keys, work,
                                     device, k)
    final = adjust_evaluations(cfg.scoring_opts, plan, enc, final)
    counts = dict(work.counts, seconds=round(time.perf_counter() - t0, 6))
    counts = {n_: round(v, 6) if isinstance(v, float) else v for n_, v in counts.items()}
    return Outcome(final, _section(cfg, spec, scorer, work.hash, k, ks, evals, final, counts), counts)


def _condition(cfg, plan, enc, cond, off, texts, load, image_keys, work, device, k):
    """One condition's final evaluations (one per fold), and K per direction."""
    ds, n = plan.ds, plan.ds.n_captions
    img_emb, txt_emb = enc.variant_img.get(cond, enc.img_emb), enc.txt_emb[off:off + n]
    rel = condition_relevance(enc.relevance, off, n)
    heads, ks = [], {}
    for img, cap, c2i, extra in _parts(ds):
        base = compute.EmbeddingSource(img_emb[img], txt_emb[cap], device=device)
        i2t_pos, t2i_pos, qimg = build_positives(c2i, len(img), extra)
        ks = {"i2t": min(k, len(cap)), "t2i": min(k, len(img))}
        h_i2t = stage_one_heads(base, "i2t", qimg, i2t_pos, ks["i2t"])
        h_t2i = stage_one_heads(base, "t2i", np.arange(len(cap)), t2i_pos, ks["t2i"])
        heads.append((img, cap, base, qimg, h_i2t, h_t2i))
    pair_img, pair_txt = [], []  # every pair of the condition, both directions and every fold: one scoring call
    for img, cap, _, qimg, (i2t_ids, _), (t2i_ids, _) in heads:
        pair_img += [np.repeat(img[qimg], i2t_ids.shape[1]), img[t2i_ids].ravel()]
        pair_txt += [cap[i2t_ids].ravel(), np.repeat(cap, t2i_ids.shape[1])]
    scores = work.score(np.concatenate(pair_img), np.concatenate(pair_txt), texts, image_keys, load)
    out, at = [], 0
    kw = scoring_kwargs(cfg.scoring_opts)
    kw.pop("score_block", None)
    for fold, (img, cap, base, qimg, (i2t_ids, i2t_top), (t2i_ids, t2i_top)) in enumerate(heads):
        parts = {}
        for d, ids, top1, queries in (("i2t", i2t_ids, i2t_top, qimg), ("t2i", t2i_ids, t2i_top, np.arange(len(cap)))):
            s = scores[at:at + ids.size].reshape(ids.shape)
            at += ids.size
            parts[d] = (queries, rerank(ids, s), top1)
        source = RerankedSource(base, parts)
        if rel is None:
            relevance = base
        elif ds.folds is None:
            relevance = compute.EmbeddingSource(rel[0], rel[1], device=device)
        else:
            relevance = compute.EmbeddingSource(rel[0][img], rel[1][cap], device=device)
        c2i = np.asarray(ds.caption_to_image) if ds.folds is None else ds.subset(ds.folds[fold]).caption_to_image
        out.append(compute.evaluate(source, c2i, extra_positives=ds.extra_positives if ds.folds is None else None,
                                    graded=plan.graded[fold], relevance=relevance, **kw))
    return out, ks


def summary(outcome: Outcome | None) -> list[str]:
    """The printed lines of a two-stage run: per condition the RSUM of both stages, the gain with its interval and
    the first stage's ceiling."""
    if outcome is None:
        return []
    sec = outcome.section
    out = [f"rerank {sec['pair_scorer']['name']}@{sec['k']}: {sec['pairs']['scored']:,} pair forwards, "
           f"{sec['pairs']['cached']:,} pairs from the cache, {sec['pairs']['seconds']:.1f} s"]
    for g in sec["gain"]:
        if g["direction"] != "both":
            continue
        c = g["condition"]
        final = next(r["value"] for r in sec["results"] if r["condition"] == c and r["metric"] == "rsum"
                     and r["direction"] == "both")
        ceil = {x["direction"]: x["value"] for x in sec["ceiling"] if x["condition"] == c}
        out.append(f"  {c}: RSUM {final - g['delta']:.2f} -> {final:.2f} ({g['delta']:+.2f} "
                   f"[{g['ci_low']:+.2f}, {g['ci_high']:+.2f}]); ceiling R@K i2t {ceil['i2t']:.2f}, "
                   f"t2i {ceil['t2i']:.2f}")
    return out


def ceiling(evals: list, direction: str, k: int) -> float:
    """The first stage's Recall@K (hit rate, %, mean over folds): the share of queries with a positive in the top K
    the pair model sees, the most the final ranking's Recall@1..K can reach."""
    return float(np.mean([np.mean(ev.direction(direction).best_rank <= k) * 100 for ev in evals]))


def _section(cfg, spec, scorer, pair_hash, k, ks, evals, final, counts) -> dict:
    values = [v.to_json() for v in metric_values(final)]
    ceilings = [{"condition": c, "direction": d, "k": ks[d], "value": ceiling(evals[c], d, ks[d])}
                for c in final for d in compute.DIRECTIONS]
    gains = [{"condition": c, **b} for c in final
             for b in paired_bootstrap(evals[c], final[c], cfg.n_boot, cfg.seed)]
    # the final ranking's change under each condition against its own clean, drawn as the run's own "bootstrap"
    boots = [{"condition": c, **b} for c in final if c != "clean" and "clean" in final
             for b in paired_bootstrap(final["clean"], final[c], cfg.n_boot, cfg.seed)]
    return {"pair_scorer": {"spec": spec, "name": str(spec).partition("?")[0].partition(":")[0], "hash": pair_hash,
                            "identity": scorer.identity()},
            "k": k, "k_by_direction": ks, "rule": RULE, "per_query_condition": PREFIX + "<condition>",
            "results": values, "ceiling": ceilings, "gain": gains, "bootstrap": boots, "pairs": counts}
