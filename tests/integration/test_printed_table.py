"""The table a run prints: on a random-weight CLIP run with caption perturbations and image
corruptions, every printed value lies in its metric's declared range (the default nDCG is clipped at 0, so it is in
[0, 1]); the chapter's DCG_CM columns are in table.md only, labelled; the printout ends with a per-family summary
whose numbers follow from the record, and one definition line per printed metric."""

from __future__ import annotations

import re

import pytest

import vlbench
from vlbench.metrics.specs import builtin
from vlbench.pipeline.report import _table_columns

pytestmark = pytest.mark.slow  # a whole run with four conditions


def _range(name: str, direction: str, rec) -> tuple[float, float]:
    """The declared range of ``name`` (metric registry), its formulas computed for this run."""
    n_img, n_cap = rec.dataset.fields["n_images"], rec.dataset.fields["n_captions"]
    if name == "rsum":
        return 0.0, (600.0 if direction == "both" else 300.0)
    if name in ("medr", "meanr"):
        return 1.0, float(n_cap if direction == "i2t" else n_img)
    lo, hi = re.fullmatch(r"\[(\S+), (\S+)\]", builtin(name).value_range).groups()
    return float(lo), float(hi)


def _table_rows(text: str) -> tuple[list[str], list[list[str]]]:
    lines = [ln for ln in text.splitlines()]
    first = [ln for ln in lines[:lines.index("") if "" in lines else len(lines)] if ln.startswith("|")]
    cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in first]
    return cells[0], cells[2:]


def test_printed_values_in_declared_ranges(tiny_models, tiny_manifest, tmp_path):
    res = vlbench.run(model=f"clip:{tiny_models('clip')}", dataset=f"custom:{tiny_manifest}",
                      perturb=["char-swap"], perturb_images="jpeg_compression:3,gaussian_noise:1",
                      out=str(tmp_path / "run"), quiet=True, num_workers=0, n_boot=50)
    rec = res.record
    printed = res.printed()
    head, rows = _table_rows(printed)
    cols = {h: name for h, name, *_ in _table_columns(rec, printed=True)}
    assert "nDCG@10" in head and not any("DCG_CM" in h for h in head)
    assert {r[0] for r in rows} == set(rec.conditions)  # four conditions: every row printed
    checked = 0
    for row in rows:
        direction = row[1]
        for h, cell in zip(head[2:], row[2:]):
            if cell:
                lo, hi = _range(cols[h], direction, rec)
                assert lo - 1e-9 <= float(cell) <= hi + 1e-9, (row[0], direction, h, cell)
                checked += 1
    assert checked == 4 * (2 * (len(head) - 2) + 1)  # i2t and t2i: every column; both: RSUM
    assert all(0.0 <= v.value <= 1.0 for v in rec.values if v.key.metric == "ndcg")
    table_md = (tmp_path / "run" / "table.md").read_text()
    assert "DCG_CM@10 (signed)" in table_md and "nDCG_CM@10 (signed)" in table_md
    # the per-family summary: one row per family, the mean change of total RSUM against clean
    clean = rec.value("clean", "both", "rsum")
    line = next(ln for ln in printed.splitlines() if ln.strip("| ").startswith("typos"))
    assert f"{rec.value('char-swap', 'both', 'rsum') - clean:+.2f}" in line
    img = next(ln for ln in printed.splitlines() if ln.strip("| ").startswith("image-digital"))
    assert f"{rec.value('img:jpeg_compression:3', 'both', 'rsum') - clean:+.2f}" in img
    defs = printed.split("metrics:\n")[1].split("\n\n")[0].splitlines()
    assert len(defs) == len(set(cols.values())) and any(d.split()[0] == "nDCG@10:" for d in defs)
