"""`vlbench analyze` on small real runs: the tables name each model as its run does (--model-name), an unknown
--conditions name is refused naming it and the run's conditions, and a run too small for any regression (one
image) says so instead of failing."""

from __future__ import annotations

import pandas as pd
import pytest
from support.data import write_manifest

from vlbench import cli
from vlbench.pipeline.runner import run


def _run(manifest, out, **kw):
    return run(model="counting:dim=16", dataset=f"custom:{manifest}", out=str(out), perturb="char-swap", quiet=True,
               num_workers=0, n_boot=20, no_cache=True, validity="off", **kw).out_dir


@pytest.mark.slow
def test_analyze_tables_name_each_model_by_its_model_name(counting_plugin, language, tmp_path):
    manifest = write_manifest(tmp_path / "data", 6)
    run_a = _run(manifest, tmp_path / "a", model_name="Model A")
    run_b = _run(manifest, tmp_path / "b", model_name="Model B")
    out = tmp_path / "analysis"
    assert cli.main(["analyze", str(run_a), str(run_b), "--out", str(out), "--n-boot", "10", "--no-plots"]) == 0
    bins = pd.read_csv(out / "analysis_bins.csv")
    assert set(bins["model"]) == {"Model A", "Model B"}
    for name in ("analysis_bins.md", "analysis_bins.tex", "analysis_regression.md", "analysis_regression.tex"):
        text = (out / name).read_text()
        assert "Model A" in text and "Model B" in text, name


@pytest.mark.slow
def test_analyze_unknown_condition_is_named_with_the_runs_conditions(counting_plugin, language, tmp_path, capsys):
    manifest = write_manifest(tmp_path / "data", 4)
    folder = _run(manifest, tmp_path / "a")
    assert cli.main(["analyze", str(folder), "--out", str(tmp_path / "x"), "--conditions", "nope"]) == 2
    err = capsys.readouterr().err
    assert "'nope'" in err and "char-swap" in err


@pytest.mark.slow
def test_analyze_without_a_fittable_regression_reports_why(counting_plugin, language, tmp_path, capsys):
    manifest = write_manifest(tmp_path / "data", 1)  # one image: its queries are one cluster, no interval to fit
    folder = _run(manifest, tmp_path / "a")
    out = tmp_path / "analysis"
    assert cli.main(["analyze", str(folder), "--out", str(out), "--outcome", "flip@1", "--direction", "both",
                     "--n-boot", "10", "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert "no regression could be fitted (" in printed and "1 image(s): the intervals cluster by image" in printed
    reg = pd.read_csv(out / "analysis_regression.csv")
    assert (reg["term"] == "(not fitted)").all() and reg["coef"].isna().all()
    assert "the regression cannot be fitted" in (out / "analysis_regression.md").read_text()
