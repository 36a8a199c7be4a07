"""The metric registry: every metric vlbench reports, built-in or plug-in, is one ``Metric`` here.

A metric is one record: a per-query function over the outputs of the ONE shared ranking step
(``compute._direction``: best-positive ranks, recall, R-precision and mAP@R fractions, DCG_CM and
nDCG_CM, graded nDCGs, positive counts, all per query), an aggregate over the queries (mean, median, or
an exact rule of its own), its parameter (one value per cut-off ``k``, the DCG cut-off ``p``, or none),
the directions it applies to, its unit, range and which way is better. Everything else is derived from
these records: results.json's records (built-ins in the order of ``BUILTINS``, then the plug-ins, then
the ``both`` totals, then the official ECCV / CxC records), the per_query.csv.gz columns, the paired
bootstrap (``bootstrap=True``), table.md (``table=``) and the leaderboard's metric order.
``vlbench ls metrics`` lists the registry.

Kinds: ``retrieval`` metrics are computed by ``compute.evaluate`` from the ranking; ``official`` ones
(``eccv_*``, ``cxc_recall``) read the official protocol's values that the scoring step passes into
``evaluate`` (``metrics/official.py``); ``task`` ones are the choice tasks' (``vlbench run --task``).

Plug-ins: an entry point in the group ``vlbench.metrics`` whose target is a ``Metric``, e.g.
``[project.entry-points."vlbench.metrics"] hits-at-3 = "mypkg.metrics:HITS3"``. Its ``per_query``
gets ``(DirectionResult, Evaluation)`` (and the k or p with a ``param``) and returns one value per query.
Its per-query values are computed once, when the evaluation is made (:func:`plugin_columns`); from then on
it takes the built-ins' path (:func:`from_stored`: ``Metric.values`` and ``Metric.columns``), so its
``param``, ``aggregate`` and ``percent`` mean what they mean for a built-in. Its records
``{direction, metric, k, value}`` (metric: the registered name) follow the built-in retrieval records of
each direction, and its columns the built-in columns. A plug-in that fails to load or to compute is
skipped with a warning and is not listed among the plug-ins used by a run. A plug-in whose import calls
``sys.exit`` stops the run before any work (exit 2, naming it): ``check_plugins`` runs in the preflight. An entry point
that does
not name a ``Metric`` is listed as broken by ``vlbench ls metrics``, with the reason.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import registry
from ..errors import VlbenchError
from ..results import DIRECTIONS

AGGREGATES: dict[str, Callable[..., Any]] = {"mean": np.mean, "median": np.median}


@dataclass(frozen=True)
class Metric:
    """One metric: per-query values and their aggregate, with what ``vlbench ls metrics`` shows.

    ``per_query(r, ev)`` (``per_query(r, ev, x)`` with a ``param``) gives one value per query of the
    direction result ``r``, or None where the metric does not apply (e.g. a graded nDCG without labels).
    ``percent``: per_query gives fractions; the column and the value are 100 x them. ``aggregate``:
    "mean", "median", or ``aggregate(r, ev, x) -> float | None``, an exact rule of its own (RSUM is the
    sum of the Recall@k means, the official metrics read the official protocol's values).
    """

    name: str
    unit: str  # "%", "rank", "gain", "ratio"
    value_range: str  # human-readable, e.g. "[0, 100]"
    higher_is_better: bool
    description: str
    per_query: Callable | None = None
    directions: tuple = DIRECTIONS
    param: str | None = None  # "k" (one value per cut-off), "p" (the DCG cut-off) or None
    aggregate: str | Callable = "mean"
    percent: bool = False
    column: bool = True  # a per_query.csv.gz column (when per_query gives values)
    total: bool = False  # also a "both" record: the sum of the two directions' values
    bootstrap: bool = False  # paired bootstrap CI of its change under each perturbation
    table: str | None = None  # table.md header ("{x}" is the k or p), None: not in table.md
    #: also in the table a run prints (False: table.md only, unless the run's protocol lists it in its
    #: ``printed_metrics``); every printed metric is bounded and has a one-line definition under the table
    printed: bool = True
    fmt: str = ".2f"  # table.md number format
    kind: str = "retrieval"  # "retrieval", "official" (ECCV / CxC records) or "task" (choice tasks)
    #: a family (graded nDCG: one metric per label set): ``expand(r)`` gives the members r reports, in order;
    #: ``instances`` are the members registered by name (the run's label kinds)
    expand: Callable | None = None
    instances: tuple = ()

    def members(self, r) -> tuple:
        return tuple(self.expand(r)) if self.expand else (self,)

    def params(self, ev) -> tuple:
        return tuple(ev.k) if self.param == "k" else (ev.p,) if self.param == "p" else (None,)

    def column_name(self, x=None, name: str | None = None) -> str:
        return (name or self.name) + ("" if x is None else f"@{x}")

    def raw(self, r, ev, x=None):
        """Per-query values as per_query gives them (fractions for ``percent`` metrics), or None."""
        if self.per_query is None or r.direction not in self.directions:
            return None
        return self.per_query(r, ev, x) if self.param else self.per_query(r, ev)

    def values(self, r, ev) -> list[tuple]:
        """``[(k, value), ...]`` of one direction's result (k = the param value, None without one)."""
        if r.direction not in self.directions:
            return []
        out = []
        for x in self.params(ev):
            if callable(self.aggregate):
                v = self.aggregate(r, ev, x)
            else:
                q = self.raw(r, ev, x)
                v = None if q is None else float(AGGREGATES[self.aggregate](q))
                if v is not None and self.percent:
                    v = 100.0 * v
            if v is not None:
                out.append((x, v))
        return out

    def columns(self, r, ev) -> dict:
        """``{column name: per-query values}`` of one direction (none for ``column=False``)."""
        if not self.column:
            return {}
        out = {}
        for x in self.params(ev):
            q = self.raw(r, ev, x)
            if q is not None:
                out[self.column_name(x)] = 100.0 * q if self.percent else q
        return out


def _rsum_values(r, ev) -> np.ndarray:
    return sum(100.0 * r.recall(k) for k in ev.k)


def _rsum(r, ev, x) -> float:
    """RSUM: the sum of the Recall@k means (exactly as papers add the table's columns)."""
    return sum(100.0 * float(r.recall(k).mean()) for k in ev.k)


def _graded(name: str) -> Metric:
    return Metric(f"ndcg_{name}", "ratio", "[0, 1]", True,
                  f"t2i nDCG@p with graded {name} caption-caption labels, gains 2^rel - 1 (Messina et al.; "
                  f"--graded-relevance {name.replace('_', '-')})",
                  per_query=lambda r, ev, p: r.graded.get(name), directions=("t2i",), param="p",
                  table=f"nDCG {name}@{{x}}", fmt=".3f")


def _official(name: str, description: str, param: str | None = None) -> Metric:
    return Metric(name, "%", "[0, 100]", True, description, param=param, column=False, kind="official",
                  aggregate=lambda r, ev, x: ev.official.get((r.direction, name, x)))


def _task(name: str, description: str) -> Metric:
    return Metric(name, "%", "[0, 100]", True, description, directions=("i2t",), column=False, kind="task")


def _cut(name: str) -> Callable:
    """per_query of a cut-off metric of the ranking pass (compute.cut_metrics): None where it was not computed."""
    return lambda r, ev, k: r.at_k.get(name, {}).get(k)


def _graded_metrics(r) -> list[Metric]:
    """The ndcg_<labels> metric of each kind of graded labels a result has."""
    return [graded_metric(n) for n in sorted(r.graded)]


BUILTINS = (
    Metric("recall", "%", "[0, 100]", True, "Recall@k (hit rate): best positive ranked <= k; with "
           "--i2t-recall fraction the i2t share of positives in the top k, / min(R, k)",
           per_query=lambda r, ev, k: r.recall(k), param="k", percent=True, table="R@{x}"),
    Metric("rsum", "%", "[0, 100 x number of k] per direction; [0, 600] both with k=1,5,10", True,
           "sum of Recall@k over the k values (both: over the two directions)", per_query=_rsum_values,
           aggregate=_rsum, total=True, bootstrap=True, table="RSUM"),
    Metric("medr", "rank", "[1, number of candidates]", False, "median rank of the best positive",
           per_query=lambda r, ev: r.best_rank, aggregate="median", column=False, table="MedR", fmt="g"),
    Metric("meanr", "rank", "[1, number of candidates]", False, "mean rank of the best positive",
           per_query=lambda r, ev: r.best_rank, column=False, table="MeanR"),
    Metric("r_precision", "%", "[0, 100]", True, "positives in the top R / R (R = number of positives)",
           per_query=lambda r, ev: r.r_precision, percent=True, table="R-P"),
    Metric("map_at_r", "%", "[0, 100]", True, "mAP@R (ECCV Caption)",
           per_query=lambda r, ev: r.map_at_r, percent=True, table="mAP@R"),
    # the cut-off metrics MTEB's retrieval evaluator reports (pytrec_eval's): results.json and per_query only
    Metric("mrr", "%", "[0, 100]", True, "MRR@k: 1 / rank of the first positive when it is ranked <= k, else 0",
           per_query=_cut("mrr"), param="k", percent=True),
    Metric("precision", "%", "[0, 100]", True, "Precision@k: positives in the top k / k (trec_eval P_k)",
           per_query=_cut("precision"), param="k", percent=True),
    Metric("map", "%", "[0, 100]", True, "mAP@k: sum over the positives ranked <= k of the precision at their "
           "rank, / R (the number of positives; trec_eval map_cut_k)", per_query=_cut("map"), param="k",
           percent=True),
    Metric("ndcg", "ratio", "[0, 1]", True, "nDCG@p: positives gain 1, other candidates their relevance "
           "(the model's cosine, or --relevance) clipped at 0, divided by the ideal order's DCG",
           per_query=lambda r, ev, p: r.ndcg_clipped, param="p", table="nDCG@{x}", fmt=".3f"),
    Metric("ndcg_binary", "ratio", "[0, 1]", True, "nDCG@k with binary gains: positives gain 1, every other "
           "candidate 0; ideal: min(R, k) positives first (trec_eval ndcg_cut_k)", per_query=_cut("ndcg_binary"),
           param="k", fmt=".3f"),
    Metric("dcg_cm", "gain", "[-H_p, H_p] with cosine relevance, H_p = sum_{i<=p} 1/log2(i+1) (4.54 at p=10)",
           True, "DCG_CM@p as originally published: positives gain 1, others their relevance (negative allowed)",
           per_query=lambda r, ev, p: r.dcg, param="p", table="DCG_CM@{x} (signed)", fmt=".3f", printed=False),
    Metric("ndcg_cm", "ratio", "unbounded when relevances can be negative (1 = ideal order); "
           "0 by definition when the ideal DCG <= 0", True,
           "nDCG_CM@p as originally published: DCG_CM@p / ideal DCG_CM@p (unbounded below)",
           per_query=lambda r, ev, p: r.ndcg, param="p", table="nDCG_CM@{x} (signed)", fmt=".3f",
           printed=False),
    Metric("ndcg_<labels>", "ratio", "[0, 1]", True, "t2i nDCG@p with graded caption-caption labels",
           param="p", expand=_graded_metrics,
           instances=(_graded("minilm"), _graded("rouge_l"))),
    _official("eccv_map_at_r", "ECCV Caption mAP@R over its annotated queries (--extra-positives eccv)"),
    _official("eccv_r_precision", "ECCV Caption R-Precision over its annotated queries (--extra-positives eccv)"),
    _official("eccv_r1", "ECCV Caption R@1 over its annotated queries (--extra-positives eccv)"),
    _official("cxc_recall", "CxC Recall@k (hit rate) over the CxC ground truth's queries (--extra-positives cxc)",
              param="k"),
    _task("accuracy", "choice tasks (--task): items whose right caption scores strictly above every other"),
    _task("chance", "choice tasks (--task): expected accuracy of a random pick"),
    _task("blind_accuracy", "choice tasks (--task): accuracy of the text-only (blind) baseline"),
    # a set's own metrics (SugarCrepe++'s TOT, ARO's micro accuracy, MMVP's patterns, ...) are declared in its
    # module (vlbench/tasks/sets/, ChoiceTask ``metrics``) and registered with the set
    # --distractors (pipeline/distractors.py puts its per-query values beside the evaluation's, docs/distractors.md)
    Metric("false_rate", "%", "[0, 100]", False, "--distractors: percent of queries whose best injected "
           "candidate outranks every positive (a gallery condition only)", kind="gallery"),
)



def register_builtins(reg) -> None:
    """Register the built-in metrics in ``reg`` by name (a family by its named instances)."""
    for m in BUILTINS:
        for i in m.instances or (m,):
            reg.register(i.name, i, description=i.description)


register_builtins(registry.metrics)


def builtins(kind: str | None = None) -> tuple:
    """The built-in metrics in record order (``BUILTINS``, read at call time), optionally of one kind."""
    return tuple(m for m in BUILTINS if kind is None or m.kind == kind)


@functools.cache
def graded_metric(name: str) -> Metric:
    """The metric of graded labels ``name`` (``ndcg_<name>``): the registered one for the run's label kinds
    (rouge_l, minilm), the same definition for labels passed to ``evaluate(graded=...)`` under another name."""
    for m in builtins():
        for i in m.instances:
            if i.name == f"ndcg_{name}":
                return i
    return _graded(name)


def metric_order() -> dict:
    """{metric name: position}: the registry's record order (the leaderboard sorts metrics by it)."""
    return {i.name: n for n, i in enumerate(i for m in builtins() for i in m.instances or (m,))}


def _load(e) -> Metric:
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


def from_stored(m: Metric, name: str | None = None) -> Metric:
    """``m`` (named ``name``) reading its per-query values from ``r.plugins``, where they were put once
    (:func:`plugin_columns` for a plug-in, the distractor scorer for ``false_rate``): its records and
    columns then come from ``Metric.values`` / ``Metric.columns``, the built-ins' path (param, aggregate,
    percent as declared)."""
    name = name or m.name

    def stored(r, ev, x=None):
        return r.plugins.get(m.column_name(x, name))

    return dataclasses.replace(m, name=name, per_query=stored)


def builtin(name: str) -> Metric:
    """The built-in metric ``name`` (a family's member by its own name)."""
    for m in builtins():
        for i in m.instances or (m,):
            if i.name == name:
                return i
    raise KeyError(name)


def _plugin_values(name: str, m: Metric, r, ev) -> dict:
    """{column name: per-query float64 array (as per_query gives them)} of one plug-in on one direction."""
    got = {}
    for x in m.params(ev):
        q = m.raw(r, ev, x)
        if q is None:  # does not apply (as for a built-in)
            continue
        vals = np.asarray(q, dtype=np.float64)
        if vals.shape != r.best_rank.shape:
            raise ValueError(f"returned shape {vals.shape}, expected {r.best_rank.shape}")
        got[m.column_name(x, name)] = vals
    if callable(m.aggregate):  # an aggregate of its own that fails is found here, not while writing records
        for x in m.params(ev):
            m.aggregate(r, ev, x)
    return got


def plugin_columns(r, ev, plugins: list) -> dict:
    """{column name: per-query array} of the plug-in metrics that apply to r's direction (one per k or p
    with a ``param``); marks the entries that were computed (only those count as used plug-ins in results)."""
    cols = {}
    for e, m in plugins:
        if r.direction not in m.directions:
            continue
        try:
            got = _plugin_values(e.name, m, r, ev)
        except Exception as exc:
            warnings.warn(f"metric plug-in {e.name!r} ({e.source}) failed: {exc}", stacklevel=2)
            continue
        e.meta["computed"] = True
        cols.update(got)
    return cols


def describe() -> list[dict]:
    """Rows for ``vlbench ls metrics``: name, unit, range, better, directions, source, description."""
    rows: list[dict] = []
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
                         better="higher" if m.higher_is_better else "lower",
                         directions=list(m.directions) + (["both"] if m.total else []),
                         source=e.source, description=m.description, param=m.param, kind=m.kind))
    return rows
