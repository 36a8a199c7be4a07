"""The multilingual table: Recall@1 per language and the mean over the run's languages, per direction and
condition, from a multilingual set's results.json ``languages`` section (vlbench/datasets/langsets). Pure Python
on Runs, like tables.py."""

from __future__ import annotations

from ..table_types import Column, Table
from ..tables import _Ctx

METRIC, K = "recall", 1
DIRECTIONS = ("i2t", "t2i")


def _languages(run) -> tuple[list[str], dict]:
    """(the run's selected languages, {(condition, language, direction): R@1}) of its ``languages`` section."""
    sec = run.record.other.get("languages")
    if not isinstance(sec, dict) or not isinstance(sec.get("values"), list):
        return [], {}
    vals = {(r.get("condition"), r.get("language"), r.get("direction")): r.get("value")
            for r in sec["values"] if isinstance(r, dict) and r.get("metric") == METRIC and r.get("k") == K}
    return [str(x) for x in sec.get("selected") or []], vals


def multilingual_table(ctx: _Ctx) -> Table:
    """One row per (dataset, model, condition, direction) of a multilingual run: R@1 in every language (a column
    each, the union over the table's runs in first-seen order; blank where a run did not select the language)
    and the mean over the run's own languages, which is the run's R@1."""
    langs: list[str] = []
    found = []
    for key in ctx.keys():
        mh, dn, dh = key
        for cond, run in ctx.pairs[key].items():
            selected, vals = _languages(run)
            if not selected:
                continue
            langs += [x for x in selected if x not in langs]
            found.append((ctx.dataset(dn, dh), ctx.model(mh), cond, run, selected, vals))
    cols = [Column("dataset"), Column("model"), Column("condition"), Column("direction"),
            *(Column(x, "num", 2, x) for x in langs), Column("mean", "num", 2, "mean R@1"),
            Column("languages", "int"), Column("run_id"), Column("flags")]
    rows, runs = [], set()
    for dataset, model, cond, run, selected, vals in found:
        for d in DIRECTIONS:
            cells = [vals.get((cond, x, d)) if x in selected else None for x in langs]
            mean = run.values(cond).get((d, METRIC, K))
            rows.append([dataset, model, cond, d, *cells, mean, len(selected), run.ref, ctx.lab.run_flags(run)])
            runs.add(run.ref)
    rows.sort(key=lambda r: (r[0], r[1], r[2] != "clean", r[2], r[3]))
    return Table("multilingual", "Multilingual retrieval: Recall@1 per language",
                 "vlbench run --dataset xm3600|xtd10[?languages=...]: R@1 (percent) of each selected language's "
                 "retrieval problem (the test images against that language's captions, both directions), and the "
                 "mean over the run's languages (the run's own R@1). A blank: the run did not select the language. "
                 "Runs that selected different languages have different means; compare them per language.",
                 cols, rows, sorted(runs))
