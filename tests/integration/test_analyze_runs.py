"""`vlbench analyze` on real finished runs: a tiny-model run with caption perturbations gives
its joined per-query table, bins, regression and plot; the same model on the same images with finer captions
gives the paired per-image difference, checked against a recomputation from the two runs' per-query files."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from vlbench import cli
from vlbench.pipeline.runner import run

from support.data import write_manifest, write_rows


def _run(manifest, out, perturb="typos"):
    return run(model="counting:dim=16", dataset=f"custom:{manifest}", out=str(out), perturb=perturb, quiet=True,
               num_workers=0, n_boot=20, no_cache=True).out_dir


@pytest.mark.slow
def test_analyze_a_run_and_a_fine_grained_pair(counting_plugin, language, tmp_path, capsys):
    coarse = write_manifest(tmp_path / "data", 12)
    rows = [json.loads(line) for line in coarse.read_text().splitlines()]
    # the same images, each caption extended by a detail: a stand-in for a fine-grained version
    fine = write_rows(tmp_path / "data" / "fine.jsonl",
                      [{"image": r["image"], "captions": [c.rstrip(" .") + " under a bright blue summer sky ."
                                                          for c in r["captions"]]} for r in rows])
    run_a, run_b = _run(coarse, tmp_path / "a"), _run(fine, tmp_path / "b")
    out = tmp_path / "analysis"
    assert cli.main(["analyze", str(run_a), str(run_b), "--out", str(out), "--n-boot", "100"]) == 0
    printed = capsys.readouterr().out
    for name in ("analysis_queries.csv.gz", "analysis_bins.csv", "analysis_bins.md", "analysis_bins.tex",
                 "analysis_regression.csv", "analysis_regression.tex", "analysis_paired.csv", "analysis_paired.md"):
        assert (out / name).is_file(), name
        assert f"wrote {out / name}" in printed
    assert len(list(out.glob("analysis_bins--*.png"))) == 2  # one plot per run and direction

    joined = pd.read_csv(out / "analysis_queries.csv.gz")
    # 4 typo perturbations x 60 t2i queries per run, each joined to its own caption's features
    assert len(joined) == 2 * 4 * 60 and set(joined["family"]) == {"typos"}
    per_query = pd.read_csv(run_a / "per_query.csv.gz")
    clean = per_query[(per_query["condition"] == "clean") & (per_query["direction"] == "t2i")].set_index("query_id")
    swap = per_query[(per_query["condition"] == "char-swap") & (per_query["direction"] == "t2i")].set_index("query_id")
    mine = joined[(joined["condition"] == "char-swap") & (joined["dataset"] == joined["dataset"].iat[0])]
    mine = mine.set_index("query_id")
    np.testing.assert_allclose(mine["rsum_change"], (swap["rsum"] - clean["rsum"]).reindex(mine.index))
    assert mine["text"].iat[0] == rows[0]["captions"][0]
    assert (mine["words_per_caption"] > 0).all() and mine["image"].nunique() == 12

    reg = pd.read_csv(out / "analysis_regression.csv")
    assert set(reg["condition"]) >= {"char-swap", "family:typos"} and (reg["n_images"] == 12).all()

    paired = pd.read_csv(out / "analysis_paired.csv")
    assert len(paired) == 4 and (paired["n_images"] == 12).all()
    row = paired[paired["condition"] == "char-swap"].iloc[0]
    assert row["finer"] != row["coarser"]
    # recomputed from the two runs' own per-query files: per image mean change, finer minus coarser
    def per_image(folder):
        pq = pd.read_csv(folder / "per_query.csv.gz")
        t = pq[pq["direction"] == "t2i"]
        c, s = (t[t["condition"] == k].set_index("query_id")["rsum"] for k in ("clean", "char-swap"))
        change = (s - c).rename("change").reset_index()
        change["image"] = change["query_id"].str.rsplit("#", n=1).str[0]
        return change.groupby("image")["change"].mean()
    expected = (per_image(run_b) - per_image(run_a)).mean()
    assert row["difference"] == pytest.approx(expected)
    assert "under a bright blue summer sky" not in rows[0]["captions"][0]
    # the leaderboard's section: the regression rows of the runs it uses
    board = tmp_path / "board"
    assert cli.main(["leaderboard", "build", str(run_a), str(run_b), "--out", str(board), "--no-plots",
                     "--analysis", str(out)]) == 0
    section = pd.read_csv(board / "caption_brittleness.csv")
    assert set(section["condition"]) == {"typos"} and set(section["dataset"]) == set(joined["dataset"])
    assert "Which captions make a model brittle" in (board / "leaderboard.md").read_text()
