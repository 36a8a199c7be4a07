"""Which queries the failure browser shows: a fixed-seed sample of the queries that flip at k=1.

A query flips *hit -> miss* when the first positive is ranked 1 on the clean data and below 1 under the
condition, *miss -> hit* the other way round (ranks: retrieved.npz, the run's tie rule). Per condition the
browser takes up to N hit -> miss queries at random (seeded by the seed and the condition's name, so adding
a condition never changes another's sample) and fills what is left of N with miss -> hit queries; the sample is
shown in query order within each kind of flip. With folds (coco-1k) a query's ranks and lists are those of its
fold's gallery.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from .source import DIRECTION, RunSource, condition_kind

HIT_TO_MISS, MISS_TO_HIT = "hit->miss", "miss->hit"


@dataclass(frozen=True)
class Flip:
    """One sampled query of one condition."""

    query: int  # the dataset's caption index (t2i) or image index (i2t)
    kind: str  # HIT_TO_MISS or MISS_TO_HIT
    rank_clean: int
    rank_condition: int
    top_clean: tuple  # candidate indices, best first (top 5)
    top_condition: tuple
    #: a two-stage run (--rerank): (label, top 5) of the final rankings of clean and of the condition
    reranked: tuple = ()


@dataclass(frozen=True)
class Section:
    """What the page shows of one condition: its flips, or why it shows none."""

    condition: str
    kind: str  # caption, image, ...
    direction: str | None
    n_queries: int = 0
    n_hit_to_miss: int = 0
    n_miss_to_hit: int = 0
    flips: tuple = ()
    skipped: str | None = None  # why the condition is not browsed


def condition_rng(seed: int, condition: str) -> np.random.Generator:
    """The sample's generator: from the seed and the condition's name only."""
    digest = hashlib.sha256(f"{int(seed)}|{condition}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def flip_indices(rank_clean: np.ndarray, rank_condition: np.ndarray, k: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(hit -> miss, miss -> hit) query indices at k, ascending."""
    hit0, hit1 = rank_clean <= k, rank_condition <= k
    return np.flatnonzero(hit0 & ~hit1), np.flatnonzero(~hit0 & hit1)


def pick(hit_to_miss: np.ndarray, miss_to_hit: np.ndarray, n: int, rng: np.random.Generator) -> list:
    """Up to ``n`` (query, kind): hit -> miss first, miss -> hit filling the rest; each kind in query order."""
    first = np.sort(rng.permutation(hit_to_miss)[:n])
    second = np.sort(rng.permutation(miss_to_hit)[:max(0, n - len(first))])
    return [(int(q), HIT_TO_MISS) for q in first] + [(int(q), MISS_TO_HIT) for q in second]


def section(src: RunSource, condition: str, n: int, seed: int, shown: int = 5) -> Section:
    kind = condition_kind(src.conditions[condition])
    direction = DIRECTION.get(kind)
    if direction is None:
        return Section(condition, kind, None, skipped=f"a {kind} condition: the browser shows caption "
                                                      "perturbations and image corruptions")
    if not (src.has("clean", direction) and src.has(condition, direction)):
        return Section(condition, kind, direction, skipped=f"retrieved.npz has no {direction} lists for it")
    r0, r1 = src.ranks("clean", direction), src.ranks(condition, direction)
    if len(r0) != len(r1):
        return Section(condition, kind, direction, skipped=f"{len(r1)} queries, clean has {len(r0)}")
    hm, mh = flip_indices(r0, r1)
    t0, t1 = src.top("clean", direction), src.top(condition, direction)
    rows = src.query_index(direction)

    def best(top, q):  # -1 pads a gallery of fewer than 10 candidates
        return tuple(int(x) for x in top[q] if x >= 0)[:shown]

    final = [(f"{c}, reranked", src.top(f"rerank:{c}", direction)) for c in ("clean", condition)
             if src.has(f"rerank:{c}", direction)]  # a two-stage run: the final rankings too (same query rows)
    flips = tuple(Flip(int(rows[q]), what, int(r0[q]), int(r1[q]), best(t0, q), best(t1, q),
                       tuple((label, best(t, q)) for label, t in final))
                  for q, what in pick(hm, mh, n, condition_rng(seed, condition)))
    return Section(condition, kind, direction, len(r0), len(hm), len(mh), flips)


def sections(src: RunSource, n: int, seed: int) -> list[Section]:
    """One Section per condition but clean, in the run's order."""
    return [section(src, c, n, seed) for c in src.conditions if condition_kind(src.conditions[c]) != "clean"]
