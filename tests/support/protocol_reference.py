"""Reference implementations of the chapter authors' protocol pieces (``hendriksen2024``), row by row.

Test-only code (moved out of vlbench/metrics/protocols.py): the package computes the fraction
recall in its one scoring pass (vlbench.metrics.compute, ``i2t_recall="fraction"``) and DCG_CM with a fixed
relevance model there too; these plain loops are the independent statement of what the authors' code does
(github.com/mariyahendriksen/model-robustness-for-itr), checked by tests/oracle/test_protocol_reference_loops.py:

- i2t Recall@k is the *fraction* of the image's relevant captions found in the top k,
  ``hits / min(n_relevant, k)`` (their ``recall_at_k``), not the hit rate (1 if any is found).
- DCG@p takes gain 1 for a true positive and otherwise a relevance score from a FIXED relevance model; it is
  not normalized.
- captions are cut at 330 characters before encoding.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Sequence

import numpy as np

from vlbench.errors import VlbenchError

MAX_CHARS = 330


def _ranked(scores: np.ndarray) -> np.ndarray:
    """Candidate indices by descending score; ties broken by candidate index (stable sort)."""
    return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")


def recall_fraction(ranking: Sequence[int], relevant: Iterable[int], k: int) -> float:
    """The authors' recall: relevant items in the top ``k`` divided by ``min(len(relevant), k)``."""
    rel = set(relevant)
    if not rel or k < 1:
        raise VlbenchError(f"recall_fraction: needs k >= 1 and at least one relevant item (k={k}, "
                           f"relevant={sorted(rel)})", "pass the query's positives and a positive cut-off")
    hits = sum(1 for c in list(ranking)[:k] if c in rel)
    return hits / min(len(rel), k)


def recall_hit(ranking: Sequence[int], relevant: Iterable[int], k: int) -> float:
    """Standard recall (hit rate): 1.0 if any relevant item is in the top ``k``."""
    rel = set(relevant)
    return float(any(c in rel for c in list(ranking)[:k]))


def i2t_recall(sim: np.ndarray, positives: Sequence[Iterable[int]], k: int, *,
               variant: str = "fraction") -> float:
    """Mean i2t Recall@k in percent over image queries (rows of ``sim`` = images, columns = captions).

    ``variant="fraction"`` is the authors' form, ``"hit"`` the standard hit rate.
    """
    sim = np.asarray(sim)
    if sim.ndim != 2 or sim.shape[0] != len(positives):
        raise VlbenchError(f"i2t_recall: similarity shape {sim.shape} does not match {len(positives)} queries",
                           "pass an (images x captions) matrix and one positive set per image")
    fn = {"fraction": recall_fraction, "hit": recall_hit}.get(variant)
    if fn is None:
        raise VlbenchError(f"i2t_recall: unknown variant {variant!r}", "use 'fraction' or 'hit'")
    return 100.0 * float(np.mean([fn(_ranked(row), pos, k) for row, pos in zip(sim, positives)]))


def dcg(gains: Sequence[float]) -> float:
    """Unnormalized DCG: sum of gain_r / log2(r + 1) over ranks r = 1, 2, ... (not rounded)."""
    return float(sum(g / math.log2(r + 1) for r, g in enumerate(gains, start=1)))


def dcg_gains(ranking: Sequence[int], positives: Iterable[int], relevance_row: Sequence[float], p: int) -> list:
    """Gains of the top ``p``: 1 for a positive, else the relevance model's score for that candidate."""
    pos = set(positives)
    return [1.0 if c in pos else float(relevance_row[c]) for c in list(ranking)[:p]]


def dcg_at_p(sim: np.ndarray, positives: Sequence[Iterable[int]], relevance: np.ndarray | Callable,
             p: int = 10) -> np.ndarray:
    """Per-query unnormalized DCG@p with gains from a fixed relevance model.

    ``sim`` ranks the candidates (queries x candidates, from the evaluated model). ``relevance`` is a
    (queries x candidates) matrix from the FIXED relevance model, or a callable ``relevance(q)`` giving
    row q; it is the same for every evaluated model.
    """
    sim = np.asarray(sim)
    if sim.ndim != 2 or sim.shape[0] != len(positives):
        raise VlbenchError(f"dcg_at_p: similarity shape {sim.shape} does not match {len(positives)} queries",
                           "pass a (queries x candidates) matrix and one positive set per query")
    get_row = relevance if callable(relevance) else (lambda q: np.asarray(relevance)[q])
    out = np.empty(sim.shape[0])
    for q, (row, pos) in enumerate(zip(sim, positives)):
        rel_row = np.asarray(get_row(q))
        if rel_row.shape != (sim.shape[1],):
            raise VlbenchError(f"dcg_at_p: relevance row {q} has shape {rel_row.shape}, expected "
                               f"({sim.shape[1]},)", "score every candidate with the relevance model")
        out[q] = dcg(dcg_gains(_ranked(row), pos, rel_row, p))
    return out


def truncate_chars(texts: Sequence[str], max_chars: int = MAX_CHARS) -> list[str]:
    """Captions cut to their first ``max_chars`` characters, as the authors do before encoding."""
    return [t[:max_chars] for t in texts]
