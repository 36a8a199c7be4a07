"""``check_metric``: a :class:`~vlbench.Metric` record against the ranking step it reads (vlbench/metrics/specs.py).

The metric is computed on hand-made similarity matrices (6 images with 2 captions each) through the one shared
ranking step (``metrics.compute.evaluate``): a perfect ranking (every positive first), a worst one (every
positive last) and a middle one (a decoy above the positives), each with DCG cut-off p = 1 and p = 3 and
cut-offs k = (1, 3). Graded labels (``ndcg_<labels>``) are given as 1 for the caption's own image.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from ..metrics.compute import evaluate
from ..metrics.ranking import ArraySource
from ..metrics.specs import AGGREGATES, DIRECTIONS, Metric
from ..registry import metrics as METRICS
from ..registry import valid_name
from .common import Checker, Report, short

N_IMAGES, PER_IMAGE, K, PS = 6, 2, (1, 3), (1, 3)
KINDS = ("retrieval", "official", "task", "gallery")
_RANGE = re.compile(r"^\s*([\[(])\s*([^,\])]+?)\s*,\s*([^\])]+?)\s*([\])])")


def _evaluations() -> dict:
    """{ranking name: [evaluation with p, ...]} over one gallery; similarities without ties."""
    c2i = np.repeat(np.arange(N_IMAGES), PER_IMAGE)
    pos = (np.arange(N_IMAGES)[:, None] == c2i[None, :]).astype(np.float64)
    decoy = (((np.arange(N_IMAGES)[:, None] + 1) % N_IMAGES) == c2i[None, :]).astype(np.float64)
    base = np.random.default_rng(0).permutation(pos.size).reshape(pos.shape) / (10.0 * pos.size)  # [0, 0.1)
    sims = {"perfect": base + 0.9 * pos, "worst": base - 0.9 * pos, "middle": base + 0.5 * pos + 0.8 * decoy}
    labels = ArraySource(pos)
    graded = {"minilm": labels, "rouge_l": labels}
    # evaluate() also computes the installed metric plug-ins and marks them as used by this process (recorded
    # in a later run's results): a check is not a use, so the marks are put back
    marks = {e.name: e.meta.get("computed") for e in METRICS.entries()}
    try:
        return {name: [evaluate(sim, c2i, k=K, p=p, graded=graded) for p in PS] for name, sim in sims.items()}
    finally:
        for e in METRICS.entries():
            if marks.get(e.name) is None:
                e.meta.pop("computed", None)


def _bound(text: str, n_candidates: int) -> float | None:
    text = text.strip()
    if text == "number of candidates":
        return float(n_candidates)
    try:
        return float(text)
    except ValueError:
        return None  # a symbolic bound (H_p, 100 x number of k): not checked


def _in_range(metric: Metric, value: float, n_candidates: int) -> bool:
    m = _RANGE.match(metric.value_range)
    if not m:
        return True
    lo, hi = _bound(m.group(2), n_candidates), _bound(m.group(3), n_candidates)
    ok_lo = lo is None or (value >= lo - 1e-9 if m.group(1) == "[" else value > lo)
    ok_hi = hi is None or (value <= hi + 1e-9 if m.group(4) == "]" else value < hi)
    return ok_lo and ok_hi


def _check_record(c: Checker, m: Metric) -> None:
    with c.check("record"):
        c.expect(isinstance(m, Metric), "a vlbench Metric", type(m).__name__)
        c.expect(valid_name(m.name), "a lowercase slug name", short(m.name))
        for field in ("unit", "value_range", "description"):
            c.expect(isinstance(getattr(m, field), str) and bool(getattr(m, field)), f"{field}: a non-empty str",
                     short(getattr(m, field)))
        c.expect(isinstance(m.higher_is_better, bool), "higher_is_better: a bool", short(m.higher_is_better))
        c.expect(bool(m.directions) and set(m.directions) <= set(DIRECTIONS), f"directions among {DIRECTIONS}",
                 short(m.directions))
        c.expect(m.param in (None, "k", "p"), "param None, 'k' or 'p'", short(m.param))
        c.expect(callable(m.aggregate) or m.aggregate in AGGREGATES,
                 f"aggregate {' or '.join(map(repr, AGGREGATES))} or a function", short(m.aggregate))
        c.expect(m.kind in KINDS, f"kind among {KINDS}", short(m.kind))
        c.expect(not m.percent or m.unit == "%", "unit '%' for a percent metric", short(m.unit))
        c.expect(m.kind != "retrieval" or m.per_query is not None or callable(m.aggregate),
                 "a per_query function (a retrieval metric is computed from the ranking)", "per_query=None")


def _check_direction(c: Checker, m: Metric, r, ev, n_cand: int) -> dict:
    """Per-query values, columns and aggregates of one direction result; returns {param: value}."""
    n_q = len(r.query_ids)
    for x in m.params(ev):
        q = m.raw(r, ev, x)
        if q is None:
            continue
        arr = np.asarray(q, dtype=np.float64)
        c.expect(arr.shape == (n_q,), f"{n_q} per-query values ({r.direction}, {m.param}={x})", f"shape {arr.shape}")
        c.expect(bool(np.isfinite(arr).all()), "finite per-query values", short(arr.tolist()))
        scaled = 100.0 * arr if m.percent else arr
        bad = [v for v in scaled if not _in_range(m, float(v), n_cand)]
        c.expect(not bad, f"per-query values in the declared range {m.value_range}", short(bad))
        if not callable(m.aggregate):
            by_param = dict(m.values(r, ev))
            want = float(AGGREGATES[m.aggregate](arr)) * (100.0 if m.percent else 1.0)
            c.expect(bool(np.isclose(by_param.get(x, np.nan), want)),
                     f"the {m.aggregate} of the per-query values, {want}", by_param.get(x))
    values = m.values(r, ev)
    c.expect(values == m.values(r, ev), "the same values on a second call", "different values")
    c.expect({x for x, _ in values} <= set(m.params(ev)), f"one value per {m.param or 'direction'}", short(values))
    for _x, v in values:
        c.expect(isinstance(v, float) and np.isfinite(v), "a finite float value", short(v))
        c.expect(_in_range(m, v, n_cand), f"a value in the declared range {m.value_range}", v)
    for col, vals in m.columns(r, ev).items():
        c.expect(len(vals) == n_q, f"column {col} with {n_q} values", len(vals))
    return dict(values)


def _results(c: Checker, m: Metric, evs: dict) -> dict:
    """{(ranking, p, direction, param): value} of every evaluation."""
    out = {}
    for ranking, per_p in evs.items():
        for p, ev in zip(PS, per_p):
            for d in m.directions:
                n_cand = N_IMAGES * PER_IMAGE if d == "i2t" else N_IMAGES
                for x, v in _check_direction(c, m, ev.direction(d), ev, n_cand).items():
                    out[(ranking, p, d, x)] = v
    return out


def _better(m: Metric, a: float, b: float) -> bool:
    return a > b if m.higher_is_better else a < b


def _check_values(c: Checker, m: Metric, evs: dict) -> None:
    with c.check("per-query values and aggregate"):
        res = _results(c, m, evs)
        c.expect(bool(res), "values on the hand-made rankings", "None everywhere (per_query gave no values)")
    with c.check("perfect beats worst"):
        for (ranking, p, d, x), v in res.items():
            if ranking == "perfect" and (w := res.get(("worst", p, d, x))) is not None:
                c.expect(_better(m, v, w), f"{d} {m.param or ''}{'=' + str(x) if x else ''}: the perfect ranking "
                         f"{'above' if m.higher_is_better else 'below'} the worst one", f"perfect {v}, worst {w}")
    if m.param is None:
        c.skip("param honoured", "the metric has no param")
        return
    with c.check("param honoured"):
        if m.param == "k":
            c.expect({x for (_, _, _, x) in res} <= set(K), f"values at k in {K} only", sorted({k[3] for k in res}))
            varies = any(res.get(("middle", p, d, K[0])) != res.get(("middle", p, d, K[1]))
                         for p in PS for d in m.directions)
        else:
            c.expect(all(p == x for (_, p, _, x) in res), "values at the evaluation's p", short(sorted(res)))
            varies = any(res.get(("middle", PS[0], d, PS[0])) != res.get(("middle", PS[1], d, PS[1]))
                         for d in m.directions)
        c.expect(varies, f"a value that changes with {m.param} (a decoy ranks first, positives below it)",
                 "the same value for every " + m.param)


def _check_official(c: Checker, m: Metric, ev) -> None:
    with c.check("official values"):
        official = {(d, m.name, x): 42.0 for d in m.directions for x in m.params(ev)}
        got = replace(ev, official=official)
        for d in m.directions:
            c.expect(m.values(got.direction(d), got) == [(x, 42.0) for x in m.params(ev)],
                     "the official protocol's values as given", short(m.values(got.direction(d), got)))


def check_metric(metric) -> Report:
    """Check a metric: a :class:`~vlbench.Metric` or a registered name. Returns the :class:`Report` of the checks
    passed; raises :class:`ConformanceError` at the first failure."""
    c = Checker("metric", metric if isinstance(metric, str) else getattr(metric, "name", type(metric).__name__))
    with c.check("load"):
        m = METRICS.get(metric) if isinstance(metric, str) else metric
    if getattr(m, "expand", None) is not None:  # a family (ndcg_<labels>): its registered members are metrics
        for member in m.instances:
            c.report.passed += [f"{member.name}: {name}" for name in check_metric(member).passed]
        return c.report
    _check_record(c, m)
    evs = _evaluations()
    if m.kind == "official":
        _check_official(c, m, evs["perfect"][0])
    elif m.per_query is None and not callable(m.aggregate):
        c.skip("values", f"a {m.kind} metric's values come from its own step, not from the ranking")
    else:
        _check_values(c, m, evs)
    return c.report
