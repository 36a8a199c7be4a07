"""The gallery-distractor condition of a run (``--distractors``, docs/distractors.md).

The condition ``distractors:<label>`` (kind ``gallery``) asks the clean queries again against a larger
gallery: t2i caption queries rank the real images plus the injected images, i2t image queries rank the real
captions plus the injected captions. Injected candidates are never queries and never positives. They are
appended after the real candidates, so under the run's tie rule (score desc, then candidate index asc) a
real candidate wins an exact tie with an injected one.

Per direction the condition reports every usual metric (changes against clean with the paired bootstrap,
like any condition: the queries are the clean ones) and ``false_rate``: the percent of queries whose best
injected candidate scores strictly above every positive. With the tie rule above this is exactly "the best
positive's rank grew": rank_with - rank_without = the number of injected candidates strictly above the best
positive, so a query is false when its rank with distractors exceeds its clean rank.

The injected items go through the normal encoding session (content keys, the embedding cache), so the clean
embeddings of an earlier run are reused and only the distractors are encoded.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..conditions import RunCondition
from ..datasets.distractors import check_source, load_distractors, parse_spec
from ..datasets.folds import fold_captions
from ..encoding.session import EncodingSession
from ..metrics import compute
from ..metrics.scan.maxsim import MaxSimSource, TokenVectors
from ..metrics.specs import DIRECTIONS, builtin, from_stored
from . import timing
from .relevance import truncate

PREFIX = "distractors:"
FALSE_RATE = "false_rate"
#: the registered false_rate metric, reading the per-query values this module puts beside the evaluation's
_FALSE_RATE_METRIC = from_stored(builtin(FALSE_RATE))
TIES = "injected candidates come after the real ones: an exact tie goes to the real candidate"


def preflight_problems(cfg) -> list:
    """(item, what is wrong, fix) of every ``--distractors`` source that is missing or empty (nothing is read
    in full); the preflight lists them with the run's other problems."""
    if not getattr(cfg, "distractors", None):
        return []
    out = []
    for kind, value in parse_spec(cfg.distractors):
        problem = check_source(kind, value, cfg.data_dir)
        if problem:
            out.append((f"--distractors {kind}:{value}", *problem))
    return out


def plan_distractors(cfg, ds) -> list[RunCondition]:
    """The gallery condition of ``--distractors`` (none without it); its name carries the content hash."""
    if not getattr(cfg, "distractors", None):
        return []
    d = load_distractors(cfg.distractors, cfg.data_dir)
    name = PREFIX + d.label
    meta = {"perturbation": name, "kind": "gallery", "distractors": d.describe(),
            "applied_to": "t2i: injected images join the gallery; i2t: injected captions join the candidate "
                          "captions; the queries are the clean ones", "ties": TIES,
            "false_rate": "percent of queries whose best injected candidate outranks every positive"}
    return [RunCondition(name, meta, kind="gallery", gallery=d)]


@dataclass(frozen=True)
class Injected:
    """One gallery condition's injected candidates as encoded (None: the set has none of that modality)."""

    images: np.ndarray | None
    captions: np.ndarray | None
    relevance: tuple | None = None  # (images, captions) of the fixed relevance model, when the run has one


def _stack(vecs: dict, n: int) -> np.ndarray | None:
    return np.stack([vecs[i] for i in range(n)]) if n else None


def _encode(session, cfg, d, progress: bool) -> tuple:
    """The injected images and captions through ``session``, timed in the run's encoding stages (their model
    load, decoding and forward passes, and counted there) like the gallery's own."""
    m = cfg.model_opts
    img = timing.encoding("image_decode_preprocess", session.stats, lambda: _stack(session.images(
        list(d.images), batch_size=m.batch_size, num_workers=m.num_workers, progress=progress),
        len(d.images))) if d.images else None
    texts = truncate(cfg, list(d.captions))
    txt = timing.encoding("text_preprocess", session.stats, lambda: _stack(session.texts(
        texts, batch_size=m.text_batch_size or max(m.batch_size, 256), progress=progress),
        len(texts))) if texts else None
    return img, txt


def encode_distractors(session, cfg, plan, stats=None) -> dict:
    """Condition name -> :class:`Injected`: the injected images and captions through the run's encoding
    session (and, with a fixed relevance model, through that model too)."""
    out = {}
    for c in plan.conditions:
        if c.kind != "gallery":
            continue
        img, txt = _encode(session, cfg, c.gallery, progress=not cfg.quiet)
        rel = None
        if cfg.relevance not in (None, "self"):
            rs = EncodingSession.open(cfg.relevance, cache_dir=cfg.cache_dir, no_cache=cfg.no_cache,
                                      restart=cfg.restart, device=cfg.device, precision=cfg.precision,
                                      trust_remote_code=cfg.trust_remote_code, stats=stats, threads=cfg.threads)
            rel = _encode(rs, cfg, c.gallery, progress=not cfg.quiet)
        out[c.name] = Injected(img, txt, rel)
    return out


class _WiderGallery:
    """A graded-relevance source over a gallery with ``extra`` injected images (gain 0 for them)."""

    def __init__(self, src, extra: int):
        self.src, self.extra = src, extra
        self.directions = getattr(src, "directions", DIRECTIONS)

    def rows(self, direction, queries):
        r = np.asarray(self.src.rows(direction, queries))
        return np.pad(r, ((0, 0), (0, self.extra))) if direction == "t2i" else r


def _pad_extra(extra, n_images: int, n_captions: int):
    """Extended positives (full-list form) with empty rows for appended images / captions."""
    if not extra:
        return extra
    out = dict(extra)
    for key, n in (("i2t", n_images), ("t2i", n_captions)):
        if n and out.get(key) is not None and not isinstance(out[key], dict):
            out[key] = list(out[key]) + [[] for _ in range(n)]
    return out


def _drop_last_query(r: compute.DirectionResult) -> compute.DirectionResult:
    """The direction result without its last query (the placeholder image of the i2t pass)."""
    cut = {f.name: getattr(r, f.name)[:-1] for f in dataclasses.fields(r) if isinstance(getattr(r, f.name), np.ndarray)}
    cut.update({name: {k: v[:-1] for k, v in getattr(r, name).items()} for name in ("graded", "fraction_recall",
                                                                                    "plugins")})
    return dataclasses.replace(r, **cut)


def _parts(ds, img, txt, relevance, graded):
    """Per fold (one without folds): image and clean caption embeddings, caption_to_image, extended positives,
    graded sources and relevance embeddings, as pipeline/scoring.py's evaluate_folds cuts them."""
    if ds.folds is None:
        yield img, txt, ds.caption_to_image, ds.extra_positives, graded[0], relevance
        return
    for fold, g in zip(ds.folds, graded):
        caps = fold_captions(ds.caption_to_image, fold)
        rel = None if relevance is None else (relevance[0][fold], relevance[1][caps])
        yield img[fold], txt[caps], ds.subset(fold).caption_to_image, None, g, rel


def _source(img, txt, device):
    if isinstance(img, TokenVectors):  # a multi-vector model: MaxSim of the token vectors (on the CPU)
        return MaxSimSource(img, txt)
    return compute.EmbeddingSource(img, txt, device=device)


def _rows(a, b):
    """``a``'s items then ``b``'s: embedding rows, or a multi-vector model's token vectors."""
    if isinstance(a, TokenVectors):
        return TokenVectors(np.vstack([a.flat, b.flat]), np.concatenate([a.offsets, b.offsets[1:] + a.offsets[-1]]))
    return np.vstack([a, b])


def _fold_eval(part, inj: Injected, clean: compute.Evaluation, kw: dict, device) -> compute.Evaluation:
    img, txt, c2i, extra, graded, rel = part
    inj_rel: tuple = inj.relevance or ()  # read only when the run has a relevance model (rel), as inj then has
    t2i, i2t = clean.t2i, clean.i2t
    if inj.images is not None:  # t2i: the injected images after the real gallery; they have no captions
        n = len(inj.images)
        r = None if rel is None else _source(np.vstack([rel[0], inj_rel[0]]), rel[1], device)
        ev = compute.evaluate(_source(_rows(img, inj.images), txt, device), c2i,
                              extra_positives=_pad_extra(extra, n, 0), relevance=r,
                              graded={k: _WiderGallery(s, n) for k, s in (graded or {}).items()}, **kw)
        t2i = ev.t2i
    if inj.captions is not None:  # i2t: the injected captions after the real ones, tied to a placeholder image
        # the placeholder image: the first injected caption's vector (or token vectors), never a query that counts
        n = len(inj.captions)
        hold = inj.captions[:1] if isinstance(inj.captions, TokenVectors) else inj.captions[:1].astype(img.dtype)
        c2i_b = np.concatenate([np.asarray(c2i, dtype=np.int64), np.full(n, len(img), dtype=np.int64)])
        r = None if rel is None else _source(np.vstack([rel[0], inj_rel[1][:1]]),
                                             np.vstack([rel[1], inj_rel[1]]), device)
        ev = compute.evaluate(_source(_rows(img, hold), _rows(txt, inj.captions), device), c2i_b,
                              extra_positives=_pad_extra(extra, 1, n), relevance=r, **kw)
        i2t = _drop_last_query(ev.i2t)
    out = {}
    for d, res in (("i2t", i2t), ("t2i", t2i)):
        base = clean.direction(d)
        if not np.array_equal(res.query_ids, base.query_ids):
            raise RuntimeError(f"distractors: the {d} queries differ from the clean ones")  # a bug, not a user error
        false = np.where(res.best_rank > base.best_rank, 100.0, 0.0)
        out[d] = dataclasses.replace(res, plugins={**res.plugins, FALSE_RATE: false})
    return compute.Evaluation(out["i2t"], out["t2i"], clean.k, clean.p, {}, extra=clean.extra + (_FALSE_RATE_METRIC,))


def score_distractors(kw: dict, plan, enc, clean: list, device: str | None = None) -> dict:
    """Condition name -> one Evaluation per fold of every gallery condition; ``kw``: compute.evaluate's
    options as the run scores (pipeline.scoring.scoring_kwargs); ``clean``: the clean condition's evaluations
    (the same queries; their ranks give the false rate)."""
    conds = [c for c in getattr(plan, "conditions", ()) if c.kind == "gallery"]  # a scoring-only plan has none
    if not conds:
        return {}
    ds, n = plan.ds, plan.ds.n_captions
    # device: where the run computes its similarities (pipeline.scoring.similarity_device), passed in
    rel = None if enc.relevance is None else (enc.relevance[0], enc.relevance[1][:n])
    out = {}
    for c in conds:
        inj = enc.distractors[c.name]
        parts = _parts(ds, enc.img_emb, enc.txt_emb[:n], rel, plan.graded)
        out[c.name] = [_fold_eval(part, inj, ev, kw, device) for part, ev in zip(parts, clean)]
    return out

