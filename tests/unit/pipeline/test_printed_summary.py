"""What `vlbench run` prints, on synthetic records: many conditions print the clean rows, a
pointer to table.md and the per-family summary (numbers from the record); a protocol's printed_metrics adds its
columns; table.md keeps every row and the signed DCG_CM columns."""

from __future__ import annotations

import dataclasses

from support.synthetic_runs import synth_run

from vlbench.pipeline.report import family_summary, format_printed, format_table
from vlbench.results import RunRecord


def _rec(tmp_path, **kw) -> RunRecord:
    return RunRecord.load(synth_run(tmp_path / "run", perturb=("char-swap", "nearby-char", "shuffle-all-words"),
                                    corrupt=("gaussian_noise",), severities=(1, 3), **kw))


def test_many_conditions_print_clean_rows_and_the_family_summary(tmp_path):
    rec = _rec(tmp_path)
    printed, full = format_printed(rec), format_table(rec)
    assert "(5 more conditions: every row in table.md)" in printed
    assert "| char-swap |" not in printed.split("| family")[0] and "char-swap" in full
    clean = rec.value("clean", "both", "rsum")
    rows = {ln.split("|")[1].strip(): [c.strip() for c in ln.split("|")[1:-1]]
            for ln in family_summary(rec).splitlines()[2:]}
    assert set(rows) == {"typos", "word-order", "image-noise"}
    typos = [rec.value(c, "both", "rsum") - clean for c in ("char-swap", "nearby-char")]
    assert rows["typos"][1] == "2" and rows["typos"][2] == f"{sum(typos) / 2:+.2f}"
    worst = min(("char-swap", "nearby-char"), key=lambda c: rec.value(c, "both", "rsum"))
    assert rows["typos"][3].startswith(worst)  # the largest drop names its condition, with its interval
    assert rows["typos"][4] == "2 of 2"  # synthetic intervals are delta +- 1.5, all below 0
    assert "metrics:\n  R@k: " in printed


def test_a_run_without_drops_says_none(tmp_path):
    rec = RunRecord.load(synth_run(tmp_path / "up", perturb=("char-swap",)))
    # char-swap lifted above clean: its family's largest drop is "none", not a "drop" of +x
    up = [dataclasses.replace(v, value=v.value + 10.0) if v.condition == "char-swap" else v for v in rec.values]
    line = next(ln for ln in family_summary(dataclasses.replace(rec, values=up)).splitlines() if "typos" in ln)
    assert [c.strip() for c in line.split("|")[1:-1]][3] == "none"


def test_protocol_printed_metrics_add_the_signed_dcg(tmp_path):
    std = _rec(tmp_path, protocol="standard")
    assert "DCG_CM" not in format_printed(std).split("metrics:")[0]
    assert "DCG_CM@10 (signed)" in format_table(std) and "nDCG_CM@10 (signed)" in format_table(std)
    study = RunRecord.load(synth_run(tmp_path / "study", perturb=("char-swap",), protocol="hendriksen2024"))
    head = format_printed(study).splitlines()[0]
    assert "DCG_CM@10 (signed)" in head and "nDCG@10" in head
