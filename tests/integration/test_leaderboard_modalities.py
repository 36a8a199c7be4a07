"""Leaderboard: the image-corruption table and RSUM-vs-severity plots, the choice-task table, the HTML page."""

from __future__ import annotations

import csv
import io
import json

import pytest

from vlbench.cli import main


@pytest.fixture(scope="module")
def runs(tiny_models, tmp_path_factory):
    import shutil

    from support.data import write_manifest

    root = tmp_path_factory.mktemp("lbmod")
    man = write_manifest(root / "data", 10, name="m.jsonl")
    spec = f"clip:{tiny_models('clip')}"
    common = ["--model", spec, "--dataset", f"custom:{man}", "--quiet", "--num-workers", "0"]
    assert main(["run"] + common + ["--perturb-images", "gaussian_noise:1-2,contrast:1", "--bootstrap", "100",
                                    "--out", str(root / "runs" / "img")]) == 0
    assert main(["run", "--task", "order"] + common + ["--out", str(root / "runs" / "order")]) == 0
    from vlbench.leaderboards import build_leaderboard

    build_leaderboard([root / "runs"], root / "lb")
    shutil.rmtree(root / "data" / "images")
    return root


def _csv(path):
    return list(csv.DictReader(io.StringIO(path.read_text())))


def test_corruption_table_equals_the_run_records(runs):
    doc = json.loads((runs / "runs" / "img" / "results.json").read_text())
    rows = _csv(runs / "lb" / "image_corruptions.csv")
    assert sorted((r["corruption"], r["severity"]) for r in rows) == [("contrast", "1"), ("gaussian_noise", "1"),
                                                                      ("gaussian_noise", "2")]
    val = {(r["condition"], r["direction"]): r["value"] for r in doc["results"] if r["metric"] == "rsum"}
    boots = {b["condition"]: b for b in doc["bootstrap"] if b["direction"] == "both"}
    for r in rows:
        cond = f"img:{r['corruption']}:{r['severity']}"
        assert float(r["rsum"]) == pytest.approx(val[(cond, "both")], abs=1e-6)
        assert float(r["rsum_t2i"]) == pytest.approx(val[(cond, "t2i")], abs=1e-6)
        assert float(r["delta"]) == pytest.approx(val[(cond, "both")] - val[("clean", "both")], abs=1e-6)
        assert float(r["ci_low"]) == pytest.approx(boots[cond]["ci_low"], abs=1e-6)
        assert float(r["mce_t2i"]) == pytest.approx(doc["image_corruptions"]["directions"]["t2i"]["mce"], abs=1e-6)


def test_choice_table_and_no_task_rows_in_retrieval_tables(runs):
    doc = json.loads((runs / "runs" / "order" / "results.json").read_text())
    acc = next(r for r in doc["results"] if r["metric"] == "accuracy")
    (row,) = _csv(runs / "lb" / "choice_tasks.csv")
    assert row["task"] == "order" and row["set"] == "order" and int(row["items"]) == acc["n"]
    assert float(row["accuracy"]) == pytest.approx(acc["value"], abs=1e-6)
    assert float(row["ci_low"]) == pytest.approx(acc["ci_low"], abs=1e-6)
    assert not any(r["condition"].startswith("task:") for r in _csv(runs / "lb" / "rsum_per_perturbation.csv"))


def test_page_shows_the_new_tables_and_severity_plots(runs):
    page = (runs / "lb" / "index.html").read_text()
    assert 'id="image_corruptions"' in page and 'id="choice_tasks"' in page
    plots = sorted(p.name for p in (runs / "lb" / "plots").iterdir())
    assert any(p.startswith("corruption_severity--noise--") for p in plots)
    assert any(p.startswith("corruption_severity--digital--") for p in plots)
    assert "RSUM against severity, noise corruptions" in page
    md = (runs / "lb" / "leaderboard.md").read_text()
    assert "Image corruptions: RSUM per corruption and severity" in md and "Compositional choice tasks" in md


def test_a_real_run_records_its_corruption_geometry(runs):
    """The geometry check of the leaderboard (labels.geometry_of) reads what a real run records:
    conditions[img:*]["corrupted_at"] is the model's input size under the default --corrupt-at input."""
    from vlbench.leaderboards.labels import geometry_of
    from vlbench.leaderboards.store import read_run

    run = read_run(runs / "runs" / "img" / "results.json")
    sizes = {run.condition_meta(c).get("corrupted_at") for c in run.conditions() if c != "clean"}
    assert len(sizes) == 1 and isinstance(sizes.pop(), int) and geometry_of(run) == "input"
    assert geometry_of(read_run(runs / "runs" / "order" / "results.json")) is None
