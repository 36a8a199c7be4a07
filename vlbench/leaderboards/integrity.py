"""What a leaderboard checks in a results file beyond its schema: every value lies in its metric's
declared range, and the stored changes (``deltas``) equal the values they are the difference of.

The results hash (``results_hash``, checked by :meth:`vlbench.results.RunRecord.from_json`) catches an edit
that leaves the hash as it was; these checks catch what a hash cannot: a file edited and re-hashed, or a value
no metric can take (R@1 of -5 or 1e300). A file that fails is refused (skipped by name, with the reason), never
shown as measured. Ranges come from the metric registry (``vlbench.metrics.specs``, ``Metric.value_range``);
the few ranges written as formulas there are computed here from the run itself:

* ``rsum``: [0, 100 x the number of Recall@k values it sums] (``both``: over the two directions);
* ``medr``, ``meanr``: at least 1 (the best rank of a query);
* ``dcg_cm``: [-H_p, H_p], H_p = sum over i <= p of 1 / log2(i + 1);
* ``ndcg_cm`` and metrics without a declared numeric range (plug-ins): any finite number.
"""

from __future__ import annotations

import math
import re
from typing import TypeGuard

from ..metrics.specs import builtins
from ..results import DIRECTIONS, MetricValue, RunRecord, UnreadableResults

_RANGE = re.compile(r"^\[(-?\d+(?:\.\d+)?), (-?\d+(?:\.\d+)?)\]$")
INF = math.inf


def _declared() -> dict[str, tuple[float, float]]:
    """{metric name: (low, high)} of the registered metrics whose declared range is two numbers."""

    out = {}
    for m in builtins():
        for i in m.instances or (m,):
            hit = _RANGE.match(i.value_range.strip())
            if hit:
                out[i.name] = (float(hit.group(1)), float(hit.group(2)))
    return out


def _h(p) -> float:
    if not isinstance(p, int) or p < 1 or p > 10**6:
        return INF
    return sum(1.0 / math.log2(i + 1) for i in range(1, p + 1))


def _recall_counts(rec: RunRecord) -> dict[tuple, int]:
    """{(condition, direction): number of Recall@k values} (what an RSUM of that direction sums)."""
    out: dict[tuple, int] = {}
    for x in rec.values:
        if x.key.metric == "recall":
            out[(x.condition, x.key.direction)] = out.get((x.condition, x.key.direction), 0) + 1
    return out


def bounds(rec: RunRecord, v: MetricValue, declared: dict | None = None,
           recalls: dict | None = None) -> tuple[float, float]:
    """The range value ``v`` of the run ``rec`` must lie in."""
    m, d = v.key.metric, v.key.direction
    if m == "rsum":
        dirs = DIRECTIONS if d == "both" else (d,)
        recalls = _recall_counts(rec) if recalls is None else recalls
        n = sum(recalls.get((v.condition, x), 0) for x in dirs)
        return 0.0, 100.0 * (n or 3 * len(dirs))
    if m in ("medr", "meanr"):
        return 1.0, INF
    if m == "dcg_cm":
        h = _h(v.key.k)
        return -h, h
    declared = _declared() if declared is None else declared
    if m in declared:
        return declared[m]
    if m.startswith("ndcg_") and m != "ndcg_cm":  # graded nDCG of any label set
        return 0.0, 1.0
    return -INF, INF


def _finite(x) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _name(v) -> str:
    return f"{v.key.direction} {v.key.metric}" + ("" if v.key.k is None else f"@{v.key.k}") + \
        f" of condition {v.condition!r}"


def _fmt(x: float) -> str:
    return "inf" if x == INF else "-inf" if x == -INF else f"{x:g}"


def check_record(rec: RunRecord, path: str) -> None:
    """Raise UnreadableResults naming the first value outside its range, non-finite number, or stored change
    that does not equal its values' difference."""
    declared, recalls = _declared(), _recall_counts(rec)
    why = "the file was edited or is corrupt; re-run it or leave it out"
    for v in rec.values:
        if v.value is None:
            continue
        if not _finite(v.value):
            raise UnreadableResults(path, f"{_name(v)} is {v.value!r}, not a finite number ({why})")
        lo, hi = bounds(rec, v, declared, recalls)
        slack = 1e-9 * max(1.0, abs(v.value))
        if not lo - slack <= v.value <= hi + slack:
            raise UnreadableResults(path, f"{_name(v)} is {v.value:g}, outside the range of {v.key.metric}, "
                                          f"[{_fmt(lo)}, {_fmt(hi)}] ({why})")
    for dl in rec.deltas:
        for part in ("abs", "rel"):
            x = getattr(dl, part)
            if x is not None and not _finite(x):
                raise UnreadableResults(path, f"the stored change ({part}) of {_name(dl)} is {x!r} ({why})")
        val, clean = rec.value(dl.condition, *dl.key), rec.value("clean", *dl.key)
        if dl.abs is not None and _finite(val) and _finite(clean) and \
                abs(dl.abs - (val - clean)) > 1e-6 * max(1.0, abs(val), abs(clean)):
            raise UnreadableResults(path, f"the stored change of {_name(dl)} is {dl.abs:g} but its values differ "
                                          f"by {val - clean:g} ({why})")
    for iv in rec.intervals:
        nums = {n: iv.get(n) for n in ("delta", "ci_low", "ci_high") if iv.get(n) is not None}
        if not all(_finite(x) for x in nums.values()) or nums.get("ci_low", -INF) > nums.get("ci_high", INF):
            raise UnreadableResults(path, f"the bootstrap interval of condition {iv.condition!r} "
                                          f"({iv.get('direction')} {iv.get('metric')}) is malformed: {nums} ({why})")


def check_run(run) -> None:
    """:func:`check_record` of a loaded Run; a run whose file carries no ``results_hash`` (written by hand or
    by a tool other than vlbench) is flagged 'unverified: no results_hash' in every table."""
    check_record(run.record, run.path)
    if "results_hash" not in run.record.other:
        run.integrity.append("unverified: no results_hash")
