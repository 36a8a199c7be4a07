"""The text of a published-numbers check (``vlbench check RUN`` and the lines ``vlbench run`` prints after its
table): per row, measured vs published per metric, the verdict, and when off the protocol facts known to move
such numbers, each marked as one this run differs in, matches, or cannot tell. A task run's entries write their
own lines (``TaskRowCheck.lines`` in task_scores.py)."""

from __future__ import annotations

from ..util.markdown import md_table
from .table import FACT_LABELS

_MARK = {"differs": "DIFFERS", "same": "same", "unknown": "cannot tell"}


def _number(x) -> str:
    return "" if x is None else f"{x:.2f}"


def _row_text(rc, tolerance: float) -> list[str]:
    row = rc.row
    out = [f"published: {row.model} on {row.dataset} ({row.source['kind']}): {row.citation()}"]
    if getattr(row, "rerank", None):  # a two-stage row: matched to runs of the same pair scorer and K only
        out.append(f"stages: first stage {row.rerank.get('first_stage', row.specs[0] if row.specs else '?')}, "
                   f"reranked by {row.rerank['model']} over the top {row.rerank['k']}"
                   + (f"; score: {row.rerank['score']}" if row.rerank.get("score") else ""))
    cells = []
    for m in rc.metrics:
        verdict = "not in this run" if m.within is None else "ok" if m.within else "OFF"
        cells.append([m.direction, f"R@{m.k}", _number(m.measured), _number(m.published),
                      "" if m.diff is None else f"{m.diff:+.2f}", verdict])
    out.append(md_table(["dir", "metric", "measured", "published", "difference", f"within {tolerance:g}"], cells,
                        pad=True))
    if rc.passed:
        out.append(f"check: pass (every published number within {tolerance:g} percentage points)")
        return out
    other = getattr(rc, "other_weights", None)
    if other is not None and getattr(rc, "numbers_within", False):
        out.append(f"check: NOT THE PUBLISHED WEIGHTS: every number is within {tolerance:g} percentage points, but "
                   f"this run's weights are {other.run}; the published row is of {other.published}, so the run does "
                   "not reproduce it")
        return out
    out.append(f"check: OFF (tolerance {tolerance:g} percentage points). Protocol facts known to move such numbers:")
    for f in sorted(rc.facts, key=lambda f: ("differs", "unknown", "same").index(f.status)):
        out.append(f"  [{_MARK[f.status]:11}] {FACT_LABELS[f.fact]}")
        out.append(f"                published: {f.published}; this run: {f.run}")
    if row.note:
        out.append(f"  note: {row.note}")
    return out


def format_report(report) -> str:
    """The check as text (a ``CheckReport``)."""
    head = f"published numbers check: {report.model} on {report.dataset}"
    if not report.rows:
        return f"{head}\n  no published row applies: {report.reason}"
    if report.unverified:
        return f"{head}\n  verdict: unverified: {report.unverified}\n  fix: re-run it with 'vlbench run', then check " \
               "that run"
    lines = [head] + [f"  note: {n}" for n in report.notes]
    for rc in report.rows:
        lines.append("")
        lines.extend(rc.lines(report.tolerance) if hasattr(rc, "lines") else _row_text(rc, report.tolerance))
    lines.append("")
    lines.append(f"verdict: {report.status}" + (" (at least one published row matches)" if report.passed else ""))
    return "\n".join(lines)
