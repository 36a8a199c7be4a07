"""Leaderboard rank groups on a constructed case with hand-worked values, and the flips /
distractors sections read from synthetic run files (formats of flips.csv and gallery conditions)."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path
from types import SimpleNamespace

import pytest

from vlbench.results import MetricKey


class FakeRun:
    def __init__(self, folder: Path, ref: str, meta=None, values=None, intervals=()):
        from vlbench.runfolder import FILES, file_manifest

        self.path, self.ref = str(folder / "results.json"), ref
        self._meta, self._values = meta or {}, values or {}
        self.record = SimpleNamespace(other={FILES: file_manifest(folder)}, intervals=list(intervals),
                                      value=lambda c, d, m, k=None: self._values.get(c, {}).get(MetricKey(d, m, k)))

    stage = ""  # a one-stage run (a two-stage run's final ranking is a Run with stage "final")

    def side_condition(self, c):
        return c

    def condition_meta(self, c):
        return self._meta.get(c, {})

    def values(self, c):
        return self._values.get(c, {})


class FakeCtx:
    def __init__(self, runs: dict):  # model -> {condition: run}
        self.pairs = {(m, "ds", "h"): by for m, by in runs.items()}
        self.sel = SimpleNamespace(values={(m, "ds", "h", c): r for m, by in runs.items() for c, r in by.items()})

    def model(self, m):
        return m

    def dataset(self, dn, dh):
        return dn

    def keys(self):
        return sorted(self.pairs)


def _per_query(folder: Path, i2t: list, t2i: list) -> None:
    folder.mkdir(parents=True)
    with gzip.open(folder / "per_query.csv.gz", "wt", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["condition", "fold", "direction", "query_index", "query_id", "rsum"])
        for d, vals in (("i2t", i2t), ("t2i", t2i)):
            for i, v in enumerate(vals):
                w.writerow(["clean", 0, d, i, f"{d}{i}", v])


def test_rank_groups_two_separable_two_not(tmp_path):
    """A = 300 everywhere (total 600); B = A but 200 on the last t2i query (575); C = D = 0.
    A-B: one nonzero difference -> exact p = 2/2 = 1. A-C, A-D, B-C, B-D: 8 nonzero differences, only the two
    all-equal sign patterns reach |T| -> exact p = 2/256. C-D: no difference -> p = 1.
    Holm over 6 pairs: the four p = 2/256 get max(6, 5, 4, 3) x 2/256 = 0.046875 < 0.05 (separable); the
    others 1. Letters: A, B share a; C, D share b. Adjacent pairs separable: B-C only (1 of 3)."""
    from vlbench.leaderboards.sections import rank_groups, with_groups
    from vlbench.leaderboards.table_types import Column, Table

    vals = {"A": ([300] * 4, [300] * 4), "B": ([300] * 4, [300, 300, 300, 200]), "C": ([0] * 4, [0] * 4),
            "D": ([0] * 4, [0] * 4)}
    runs = {}
    for m, (i2t, t2i) in vals.items():
        _per_query(tmp_path / m, i2t, t2i)
        runs[m] = {"clean": FakeRun(tmp_path / m, f"run-{m}")}
    groups, pairs = rank_groups(FakeCtx(runs))
    assert [r[:5] for r in groups.rows] == [[1, "A", 600.0, "a", 1], [2, "B", 575.0, "a", 1], [3, "C", 0.0, "b", 1],
                                            [4, "D", 0.0, "b", 1]]
    got = {(r[0], r[1]): r[2:] for r in pairs.rows}
    assert got[("A", "B")] == [25.0, 1.0, 1.0, False]
    for p in (("A", "C"), ("A", "D"), ("B", "C"), ("B", "D")):
        assert got[p][1] == pytest.approx(2 / 256) and got[p][2] == pytest.approx(6 * 2 / 256) and got[p][3] is True
    assert got[("C", "D")] == [0.0, 1.0, 1.0, False]
    assert "Holm-corrected over 6 pairs" in groups.description and "1 of 3 adjacent pairs are separable" in \
        groups.description and "randomization" in groups.description
    rank = Table("ranking", "Ranking", "Rank by RSUM.", [Column("rank", "int"), Column("model")],
                 [[1, "A"], [2, "B"], [3, "C"], [4, "D"]])
    shown = with_groups(rank, groups)
    assert [c.key for c in shown.columns] == ["rank", "model", "group"]
    assert [r[2] for r in shown.rows] == ["a", "a", "b", "b"] and "Holm" in shown.description


def test_letters_non_transitive():
    """A~B, B~C, A≠C (not separable chain): A 'a', B 'ab', C 'b'."""
    from vlbench.metrics.paired import letters

    assert letters(["A", "B", "C"], {frozenset("AC")}) == {"A": "a", "B": "ab", "C": "b"}
    assert letters(["A", "B", "C"], set()) == {"A": "a", "B": "a", "C": "a"}


def test_flips_and_distractor_sections(tmp_path):
    from vlbench.leaderboards.sections import distractor_table, flips_table

    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "flips.csv").write_text(
        "condition,direction,k,n_queries,hit_to_miss,miss_to_hit,rank_change_median,rank_change_p90,top10_overlap\n"
        "shuffle,i2t,1,12,3,1,0,2.5,\nshuffle,i2t,5,12,2,0,0,2.5,\n"
        "shuffle,t2i,1,60,9,4,1,6.1,0.72\nshuffle,t2i,5,60,5,2,1,6.1,0.72\n")
    gal = {"kind": "gallery"}
    vals = {"clean": {MetricKey("i2t", "rsum", None): 200.0, MetricKey("t2i", "rsum", None): 150.0},
            "distractors:x": {MetricKey("i2t", "rsum", None): 180.0, MetricKey("t2i", "rsum", None): 120.0,
                              MetricKey("i2t", "false_rate", None): 25.0, MetricKey("t2i", "false_rate", None): 10.0,
                              MetricKey("i2t", "recall", 1): 40.0}}
    iv = [SimpleNamespace(condition="distractors:x", fields={"delta": -20.0, "ci_low": -30.0, "ci_high": -5.0},
                          get=lambda k, d="i2t": {"direction": d, "metric": "rsum"}[k])]
    run = FakeRun(folder, "r1", {"distractors:x": gal}, vals, iv)
    ctx = FakeCtx({"M": {"clean": run, "shuffle": run, "distractors:x": run}})
    f = flips_table(ctx)
    assert f.rows == [["ds", "M", "shuffle", 1, 3.0, 1.0, 9.0, 4.0, 0.72, "r1"]]
    d = distractor_table(ctx)
    assert d.rows == [["ds", "M", "distractors:x", "i2t", 25.0, 40.0, 180.0, -20.0, -30.0, -5.0, "r1"],
                      ["ds", "M", "distractors:x", "t2i", 10.0, None, 120.0, -30.0, None, None, "r1"]]


def test_rank_groups_use_only_run_files_that_prove_themselves(tmp_path):
    """A per_query.csv.gz changed after the run (its sha256 no longer the one results.json lists), a
    results.json `per_query` path leading out of the run folder, a run without file hashes, and per-query values
    re-hashed but disagreeing with the recorded RSUM each leave that model without a group; the intact one keeps it."""
    from vlbench.leaderboards.sections import _clean_rsum
    from vlbench.runfolder import FILES, file_manifest

    def run(name, **values):
        _per_query(tmp_path / name, [300] * 4, [100] * 4)
        vals = {"clean": {MetricKey(d, "rsum", None): v for d, v in values.items()}}
        return FakeRun(tmp_path / name, name, values=vals)

    intact = run("intact", i2t=300.0, t2i=100.0)
    assert _clean_rsum(intact) is not None
    edited = run("edited")
    _per_query(tmp_path / "other", [0] * 4, [0] * 4)
    (tmp_path / "edited" / "per_query.csv.gz").write_bytes((tmp_path / "other" / "per_query.csv.gz").read_bytes())
    assert _clean_rsum(edited) is None
    elsewhere = run("elsewhere")
    elsewhere.record.other["per_query"] = str(tmp_path / "intact" / "per_query.csv.gz")
    assert _clean_rsum(elsewhere) is None
    elsewhere.record.other["per_query"] = "../intact/per_query.csv.gz"
    assert _clean_rsum(elsewhere) is None
    old = run("old")
    del old.record.other[FILES]
    assert _clean_rsum(old) is None
    disagreeing = run("disagreeing", i2t=300.0, t2i=90.0)  # the file's t2i mean is 100
    disagreeing.record.other[FILES] = file_manifest(tmp_path / "disagreeing")
    assert _clean_rsum(disagreeing) is None


@pytest.mark.parametrize("row,fields", [("r1,char-swap", 2), ("r1,char-swap,words,1,0,2,0.5,9", 8)])
def test_an_analysis_row_with_too_few_or_too_many_fields_is_named(tmp_path, row, fields):
    """A cut or edited analysis_regression.csv (a row shorter or longer than its header) is skipped with a warning
    naming the file and the row, not an AttributeError on the missing cells."""
    from vlbench.leaderboards.sections import read_analyses

    path = tmp_path / "an" / "analysis_regression.csv"
    path.parent.mkdir()
    path.write_text("run,condition,term,coef,ci_low,ci_high,per_sd\nr1,char-swap,words,1,0,2,0.5\n" + row + "\n")
    warnings: list[str] = []
    assert read_analyses([path], warnings.append) == []
    assert len(warnings) == 1 and str(path) in warnings[0]
    assert f"row 2 (line 3) has {fields} fields, its header 7" in warnings[0]
