"""Flip analysis: which queries a condition turns from hit to miss (and back), how far the first positive
moves, and how much of the top-10 list survives (rank stability). docs/flips.md explains every column.

Everything here is read from the scoring pass's per-query values (``DirectionResult.best_rank``: the 1-based
rank of the first positive under the tie rule "score desc, then candidate index asc"; ``DirectionResult.top``:
the best-ranked candidates in that order): nothing is ranked or scored a second time.

A condition is compared with clean on the same queries: per direction, the same folds with the same query
indices (caption perturbations: the same caption index; image corruptions and shortcut probes: the same image /
caption index). A condition whose queries differ is not compared (:func:`aligned` says why).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .compute import TOP_KEEP
from .ranking import DIRECTIONS

TOP = TOP_KEEP  # the length of the compared top lists and of retrieved.npz rows: what the ranking pass keeps
COLUMNS = ("condition", "direction", "k", "n_queries", "hit_to_miss", "miss_to_hit", "rank_change_median",
           "rank_change_p90", "top10_overlap")


@dataclass(frozen=True)
class FlipRow:
    """One row of flips.csv: a condition and direction against clean at one k."""

    condition: str
    direction: str
    k: int
    n_queries: int
    hit_to_miss: int
    miss_to_hit: int
    rank_change_median: float  # NaN without queries
    rank_change_p90: float
    top10_overlap: float | None  # t2i only (None for i2t and where no top lists were kept)

    def cells(self) -> list[str]:
        def num(x):
            return "" if x is None or x != x else f"{x:.6g}"

        return [self.condition, self.direction, str(self.k), str(self.n_queries), str(self.hit_to_miss),
                str(self.miss_to_hit), num(self.rank_change_median), num(self.rank_change_p90),
                num(self.top10_overlap)]


def aligned(clean: list, cond: list, direction: str) -> str | None:
    """None when the condition's evaluations (one per fold) ask the same queries as clean's in
    ``direction``; otherwise why not."""
    if len(clean) != len(cond):
        return f"{len(cond)} fold(s) against clean's {len(clean)}"
    for f, (a, b) in enumerate(zip(clean, cond)):
        qa, qb = a.direction(direction).query_ids, b.direction(direction).query_ids
        if len(qa) != len(qb) or not np.array_equal(qa, qb):
            return f"{direction} queries differ from clean's (fold {f}: {len(qb)} against {len(qa)})"
    return None


def top_overlap(a: np.ndarray, b: np.ndarray, width: int = TOP, chunk: int = 65536) -> np.ndarray:
    """Per row, |a_row ∩ b_row| / width: rows are distinct candidate ids (a row of -1 padding counts nothing)."""
    out = np.zeros(len(a), dtype=np.float64)
    for s in range(0, len(a), chunk):
        x, y = a[s:s + chunk, :, None], b[s:s + chunk, None, :]
        out[s:s + chunk] = ((x == y) & (x >= 0)).sum(axis=(1, 2)) / width
    return out


def _stack(evals: list, direction: str, what: str) -> np.ndarray | None:
    parts = [getattr(e.direction(direction), what) for e in evals]
    if any(p is None for p in parts):
        return None
    if what == "top":
        parts = [pad_top(p) for p in parts]
    return np.concatenate(parts) if parts else np.zeros(0)


def pad_top(top: np.ndarray, width: int = TOP) -> np.ndarray:
    """``top`` (rows, <= width) as int32 (rows, width), short rows (a gallery under ``width``) padded with -1."""
    out = np.full((len(top), width), -1, dtype=np.int32)
    out[:, :top.shape[1]] = top[:, :width]
    return out


def _best_ranks(evals: list, direction: str) -> np.ndarray:
    ranks = _stack(evals, direction, "best_rank")
    assert ranks is not None  # every evaluation keeps its best ranks (only ``top`` is optional)
    return ranks


def direction_rows(name: str, direction: str, clean: list, cond: list, ks) -> list[FlipRow]:
    """The flips.csv rows of one condition and direction (its evaluations already aligned with clean's)."""
    r0 = _best_ranks(clean, direction).astype(np.int64)
    r1 = _best_ranks(cond, direction).astype(np.int64)
    change = r1 - r0
    med = float(np.median(change)) if len(change) else float("nan")
    p90 = float(np.percentile(change, 90)) if len(change) else float("nan")
    overlap = None
    if direction == "t2i":
        t0, t1 = _stack(clean, direction, "top"), _stack(cond, direction, "top")
        if t0 is not None and t1 is not None:
            width = max(1, min(TOP, max(int((t0 >= 0).sum(axis=1).max(initial=0)),
                                        int((t1 >= 0).sum(axis=1).max(initial=0)))))
            overlap = float(top_overlap(t0, t1, width).mean()) if len(t0) else float("nan")
    rows = []
    for k in ks:
        h0, h1 = r0 <= k, r1 <= k
        rows.append(FlipRow(name, direction, int(k), len(r0), int(np.count_nonzero(h0 & ~h1)),
                            int(np.count_nonzero(~h0 & h1)), med, p90, overlap))
    return rows


def flip_rows(evals: dict, ks=None) -> tuple[list[FlipRow], dict]:
    """(rows, skipped): flips.csv rows of every condition but clean, per direction and k (the run's k:
    ``ks`` or the evaluations' own), and {(condition, direction): why it was not compared}."""
    clean = evals["clean"]
    ks = tuple(sorted({int(k) for k in (ks or clean[0].k)}))
    rows, skipped = [], {}
    for name, cond in evals.items():
        if name == "clean":
            continue
        for d in DIRECTIONS:
            why = aligned(clean, cond, d)
            if why:
                skipped[(name, d)] = why
                continue
            rows += direction_rows(name, d, clean, cond, ks)
    return rows, skipped


def retrieved_arrays(evals: dict, to_global=None) -> dict[str, np.ndarray]:
    """The retrieved.npz arrays: per condition and direction ``"{condition}|{direction}"`` (n_queries, 10) int32
    top candidates, best first (-1 pads a gallery under 10), and ``"...|rank"`` (n_queries,) int32 first-positive
    ranks; rows in per_query.csv.gz order (fold by fold). ``to_global(fold, direction, ids)``: candidate ids of a
    fold as dataset indices (None: no folds, ids are dataset indices already)."""
    out = {}
    for name, evs in evals.items():
        for d in DIRECTIONS:
            tops: list[np.ndarray] = []
            complete = True  # every fold kept its top candidates
            for f, e in enumerate(evs):
                t = e.direction(d).top
                if t is None:
                    complete = False
                    break
                t = pad_top(t)
                if to_global is not None:
                    t = np.where(t >= 0, to_global(f, d, np.maximum(t, 0)), -1).astype(np.int32)
                tops.append(t)
            if complete:
                out[f"{name}|{d}"] = np.concatenate(tops) if tops else np.zeros((0, TOP), dtype=np.int32)
            out[f"{name}|{d}|rank"] = _best_ranks(evs, d).astype(np.int32)
    return out
