"""A choice task scored by a pair scorer: ``vlbench run --task winoground --model blip-itm[:CHECKPOINT]``.

A choice set needs one score per (image, candidate) pair, so a pair scorer (vlbench.models.pairs: BLIP's or
BLIP-2's ITM head, a plug-in) can be a task's model as a dual encoder is. The pairs each item needs (its images
x its candidates, over every set and caption condition of the run) are scored here, then each set's own
``evaluate`` reads them in place of cosine similarities (a :class:`~vlbench.tasks.choice.PairScores`), so its
scores, its tie rule (a tie is a miss) and its intervals come from the same code as a dual encoder's.

Cost: each distinct image is read and encoded once (``encode_images``: BLIP's vision tower), and each distinct
(image content, text key) pair is scored once (``score_pairs``), in batches of ``--batch-size``; the scores are
cached by (pair model hash, image content, text key) (vlbench.models.pairs.cache_tasks), so a second run, or a
caption condition that changes some candidates, scores only the pairs it has not seen.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .. import registry, stores
from ..encoding.images import file_key, load_image
from ..errors import VlbenchError
from ..models.pairs import PairScorer, load_pair_scorer
from ..models.pairs.cache_tasks import PairScoreCache
from ..models.pairs.protocol import parse_spec
from .choice import PairScores, item_images
from .registry import get_task

#: results.json ``task.rule`` of a set scored by a pair scorer, after the set's own rule
PAIR_RULE = ("scored by a pair scorer: the score of (image, caption) is the pair model's own (an ITM head's "
             "p(match)) in place of the cosine similarity, compared by the same rule; a tie (equal float32 scores, "
             "e.g. probabilities that saturate at 1.0) is a miss")


def is_pair_scorer(spec: str) -> bool:
    """Whether ``spec`` (``NAME[:CHECKPOINT]``) names a registered pair scorer (``vlbench ls pair-scorers``)."""
    return parse_spec(spec)[0] in registry.pair_scorers


def check_pair_task(task: str, plan) -> None:
    """Refuse, before anything is read or loaded, what a pair scorer cannot do on ``task``."""
    why = get_task(task).pair_refused
    if why:
        raise VlbenchError(f"--task {task} cannot be scored by a pair scorer: {why}",
                           "run this task with a dual encoder (--model clip...), or pick another task")
    if plan.images:
        raise VlbenchError("--perturb-images with a pair scorer on a choice task is not supported yet (only "
                           "caption conditions, --perturb, are)",
                           "drop --perturb-images, or run the image conditions with a dual encoder")


@dataclass
class PairStats:
    """What a pair-scored task run computed (results.json ``encoding``)."""

    pairs_needed: int = 0  # distinct (image key, text) pairs the items ask for
    distinct_pairs: int = 0  # distinct (image content, text key) pairs among them
    pairs_scored: int = 0  # pair forwards run (the rest came from the cache)
    pairs_from_cache: int = 0
    images_encoded: int = 0  # images read and encoded (each once)
    seconds: dict = field(default_factory=lambda: {"encode_images": 0.0, "score_pairs": 0.0})

    def as_dict(self) -> dict:
        return {"kind": "pair", "pairs_needed": self.pairs_needed, "distinct_pairs": self.distinct_pairs,
                "pairs_scored": self.pairs_scored, "pairs_from_cache": self.pairs_from_cache,
                "images_encoded": self.images_encoded,
                "seconds": {k: round(v, 3) for k, v in self.seconds.items()}}


@dataclass
class PairSession:
    """The run's pair scorer, its hash and cache, and the counts: what run_task reads of an encoding session."""

    model: PairScorer
    model_hash: str
    cache: PairScoreCache | None
    stats: PairStats

    @classmethod
    def open(cls, cfg) -> PairSession:
        scorer = load_pair_scorer(cfg.model, device=cfg.device, precision=cfg.precision, revision=cfg.revision,
                                  trust_remote_code=cfg.trust_remote_code)
        model_hash = scorer.model_hash()
        cache = None if cfg.no_cache else PairScoreCache(stores.root(cfg.cache_dir), model_hash,
                                                         read=not cfg.restart)
        return cls(scorer, model_hash, cache, PairStats())

    @property
    def loaded(self) -> bool:
        """Whether the scorer's weights were loaded (a fully cached run loads none)."""
        return getattr(self.model, "_model", True) is not None

    def identity(self) -> dict:
        return self.model.identity()

    @property
    def device(self) -> str:
        return str(getattr(self.model, "device", "cpu"))


def needed_pairs(sets: dict) -> dict[str, list[str]]:
    """image key -> its distinct candidate texts, over every item of every set (first-seen order): an item's
    images x its candidates (a 2x2 item: both images with both captions)."""
    need: dict[str, dict[str, None]] = {}
    for items in sets.values():
        for it in items:
            for img in item_images(it):
                need.setdefault(img, {}).update(dict.fromkeys(it.candidates))
    return {img: list(texts) for img, texts in need.items()}


def score_sets(session: PairSession, sets: dict, image_path: dict, *, batch_size: int,
               log=lambda m: None) -> PairScores:
    """Every pair the items of ``sets`` need, scored once (cached), as a PairScores over image keys and texts."""
    scorer, stats = session.model, session.stats
    spec = getattr(scorer, "spec", scorer.name)  # load_pair_scorer sets it
    need = needed_pairs(sets)
    texts = list(dict.fromkeys(t for ts in need.values() for t in ts))
    tkey = dict(zip(texts, scorer.text_keys(texts)))
    ikey = {img: file_key(image_path[img]) for img in need}
    want: dict[str, dict[str, str]] = {}  # image content -> text key -> a text with that key
    path_of: dict[str, str] = {}
    for img, ts in need.items():
        path_of.setdefault(ikey[img], image_path[img])
        for t in ts:
            want.setdefault(ikey[img], {}).setdefault(tkey[t], t)
    stats.pairs_needed = sum(len(ts) for ts in need.values())
    stats.distinct_pairs = sum(len(ks) for ks in want.values())
    got: dict[str, dict] = {}
    for content, keys in want.items():
        got[content] = session.cache.get(content, keys) if session.cache else {}
    stats.pairs_from_cache = sum(len(v) for v in got.values())
    todo = [c for c in want if len(got[c]) < len(want[c])]
    log(f"scoring {stats.distinct_pairs - stats.pairs_from_cache} pairs of {len(todo)} images with {spec} "
        f"({stats.pairs_from_cache} from the cache)")
    for a in range(0, len(todo), batch_size):
        _score_batch(session, todo[a:a + batch_size], path_of, want, got, batch_size)
    table = {(img, t): float(got[ikey[img]][tkey[t]]) for img, ts in need.items() for t in ts}
    return PairScores(table, source=f"pair scorer {spec!r}")


def _score_batch(session: PairSession, contents: list[str], path_of: dict, want: dict, got: dict,
                 batch_size: int) -> None:
    """Encode one batch of images once and score every missing pair of theirs (in batches), into ``got`` and the
    cache."""
    scorer, stats = session.model, session.stats
    t0 = time.perf_counter()
    state = scorer.encode_images(scorer.collate([scorer.preprocess(load_image(path_of[c])) for c in contents]))
    stats.images_encoded += len(contents)
    t1 = time.perf_counter()
    pairs = [(row, key, text) for row, c in enumerate(contents) for key, text in want[c].items()
             if key not in got[c]]
    new: dict[str, dict] = {c: {} for c in contents}
    for a in range(0, len(pairs), batch_size):
        part = pairs[a:a + batch_size]
        rows = np.array([p[0] for p in part], dtype=np.int64)
        out = np.asarray(scorer.score_pairs(state[rows], [p[2] for p in part]))
        if out.shape != (len(part),):
            raise VlbenchError(f"the pair scorer returned shape {out.shape} for {len(part)} pairs",
                               "score_pairs must return one score per pair (vlbench.testing.check_pair_scorer)")
        bad = np.flatnonzero(~np.isfinite(out.astype(np.float64)))
        if bad.size:
            row, _, text = part[int(bad[0])]
            raise VlbenchError(f"the pair scorer gave {out[bad[0]]} for the image {path_of[contents[row]]} with "
                               f"the text {text!r}", "a pair scorer must return finite scores; check its precision")
        for (row, key, _), v in zip(part, out):
            new[contents[row]][key] = np.float32(v)
    stats.pairs_scored += len(pairs)
    for c, scores in new.items():
        got[c].update(scores)
        if session.cache is not None:
            session.cache.put(c, scores)
    stats.seconds["encode_images"] += t1 - t0
    stats.seconds["score_pairs"] += time.perf_counter() - t1

