"""The metric registry: every metric vlbench reports, built-in or plug-in, is a ``Metric`` here.

A metric is a small function over the outputs of the ONE shared ranking step
(``metrics._direction``: best-positive ranks, R-precision and mAP@R fractions, DCG_CM and nDCG_CM,
positive counts, all per query). It declares the directions it applies to, whether higher is
better, its unit and its range, which ``vlbench ls metrics`` and docs/metrics.md show.

Plug-ins: an entry point in the group ``vlbench.metrics`` whose target is a ``Metric``, e.g.
``[project.entry-points."vlbench.metrics"] hits-at-3 = "mypkg.metrics:HITS3"``. Its ``per_query``
gets ``(DirectionResult, Evaluation)`` and returns one value per query; the reported value is
their mean, written as records ``{direction, metric, k=None, value}`` after the built-ins and as a
per-query column. A plug-in that fails to load or to compute is skipped with a warning and is not
listed among the plug-ins used by a run. A plug-in whose import calls ``sys.exit`` stops the run
before any work (exit 2, naming it): ``check_plugins`` runs in the preflight. An entry point that does
not name a ``Metric`` is listed as broken by ``vlbench ls metrics``, with the reason.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import registry
from ..errors import VlbenchError

DIRECTIONS = ("i2t", "t2i")


@dataclass(frozen=True)
class Metric:
    """One metric. ``records(r, ev)`` gives ``[(k, value), ...]`` for one direction's result."""

    name: str
    unit: str  # "%", "rank", "gain"
    value_range: str  # human-readable, e.g. "[0, 100]"
    higher_is_better: bool
    description: str
    per_query: Callable | None = None  # (DirectionResult, Evaluation) -> (n_queries,) array
    records: Callable | None = None  # built-ins: exact aggregate rules (median, sums)
    directions: tuple = DIRECTIONS
    param: str | None = None  # "k" (one record per cutoff), "p" (the DCG cutoff) or None

    def values(self, r, ev) -> list[tuple]:
        if self.records is not None:
            return self.records(r, ev)
        return [(None, float(np.mean(np.asarray(self.per_query(r, ev), dtype=np.float64))))]


def _pct(x) -> float:
    return 100.0 * float(x.mean())


BUILTINS = (
    Metric("recall", "%", "[0, 100]", True, "Recall@k (hit rate): best positive ranked <= k",
           records=lambda r, ev: [(k, _pct(r.recall(k))) for k in ev.k], param="k"),
    Metric("rsum", "%", "[0, 100 x number of k] per direction; [0, 600] both with k=1,5,10", True,
           "sum of Recall@k over the k values",
           records=lambda r, ev: [(None, sum(_pct(r.recall(k)) for k in ev.k))]),
    Metric("medr", "rank", "[1, number of candidates]", False, "median rank of the best positive",
           records=lambda r, ev: [(None, float(np.median(r.best_rank)))]),
    Metric("meanr", "rank", "[1, number of candidates]", False, "mean rank of the best positive",
           records=lambda r, ev: [(None, float(r.best_rank.mean()))]),
    Metric("r_precision", "%", "[0, 100]", True, "positives in the top R / R (R = number of positives)",
           records=lambda r, ev: [(None, _pct(r.r_precision))]),
    Metric("map_at_r", "%", "[0, 100]", True, "mAP@R (ECCV Caption)",
           records=lambda r, ev: [(None, _pct(r.map_at_r))]),
    Metric("dcg_cm", "gain", "[-H_p, H_p] with cosine relevance, H_p = sum_{i<=p} 1/log2(i+1) (4.54 at p=10)",
           True, "DCG_CM@p: positives gain 1, others their relevance", param="p",
           records=lambda r, ev: [(ev.p, float(r.dcg.mean()))]),
    Metric("ndcg_cm", "ratio", "unbounded when relevances can be negative (1 = ideal order); "
           "0 by definition when the ideal DCG <= 0", True, "DCG_CM@p / ideal DCG_CM@p", param="p",
           records=lambda r, ev: [(ev.p, float(r.ndcg.mean()))]),
)

for _m in BUILTINS:
    registry.metrics.register(_m.name, _m, description=_m.description)


def _load(e) -> "Metric":
    """Load one plug-in entry as a Metric; SystemExit becomes a VlbenchError naming the plug-in."""
    try:
        m = e.load()
    except SystemExit as exc:
        raise VlbenchError(f"metric plug-in {e.name!r} ({e.source}) called sys.exit({exc.code!r}) while importing",
                           "uninstall or fix the package that provides it "
                           "(or set VLBENCH_DISABLE_PLUGIN_AUTOLOAD=1)") from None
    if not isinstance(m, Metric):
        raise TypeError(f"the entry point must name a vlbench Metric, got {type(m).__name__} "
                        f"({e.target if isinstance(e.target, str) else m!r})")
    if e.source != "builtin" and m.per_query is None:
        raise TypeError("the Metric has no per_query function")
    return m


def check_plugins() -> None:
    """Import every metric plug-in once (the preflight): a sys.exit while importing is an error."""
    for e in registry.metrics.entries():
        if e.source == "builtin":
            continue
        try:
            _load(e)
        except VlbenchError:
            raise
        except Exception:  # reported (and skipped) when the metrics are computed
            pass


def plugin_metrics() -> list:
    """(entry, Metric) of the loadable metric plug-ins; a broken one is skipped with a warning."""
    out = []
    for e in registry.metrics.entries():
        if e.source == "builtin":
            continue
        try:
            m = _load(e)
        except VlbenchError:
            raise
        except Exception as exc:  # a broken plug-in must not break the built-in numbers
            warnings.warn(f"metric plug-in {e.name!r} ({e.source}) skipped: {exc}", stacklevel=2)
            continue
        out.append((e, m))
    return out


def plugin_columns(r, ev) -> dict:
    """{name: per-query array} of the plug-in metrics that apply to r's direction; marks the
    entries that were computed (only those count as used plug-ins in results)."""
    cols = {}
    for e, m in plugin_metrics():
        if r.direction not in m.directions:
            continue
        try:
            vals = np.asarray(m.per_query(r, ev), dtype=np.float64)
            if vals.shape != r.best_rank.shape:
                raise ValueError(f"returned shape {vals.shape}, expected {r.best_rank.shape}")
        except Exception as exc:
            warnings.warn(f"metric plug-in {e.name!r} ({e.source}) failed: {exc}", stacklevel=2)
            continue
        e.meta["computed"] = True
        cols[e.name] = vals
    return cols


def describe() -> list[dict]:
    """Rows for ``vlbench ls metrics``: name, unit, range, better, directions, source, description."""
    rows = []
    for e in registry.metrics.entries():
        try:
            m = _load(e)
        except VlbenchError as exc:
            rows.append(dict(name=e.name, source=e.source, error=exc.message))
            continue
        except Exception as exc:  # not importable, or not a Metric: listed as broken, with the reason
            rows.append(dict(name=e.name, source=e.source, error=f"{type(exc).__name__}: {exc}"))
            continue
        rows.append(dict(name=e.name, unit=m.unit, range=m.value_range,
                         better="higher" if m.higher_is_better else "lower", directions=list(m.directions),
                         source=e.source, description=m.description, param=m.param))
    return rows
