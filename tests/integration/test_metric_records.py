"""One definition per metric: every metric a run reports is registered and listed by
``vlbench ls metrics``; a new built-in is one record that reaches results.json, per_query.csv.gz, the
bootstrap, table.md and the leaderboard; fold means match metrics by key, not by position."""

from __future__ import annotations

import csv
import gzip
import json
from types import SimpleNamespace

import numpy as np
import pytest

from vlbench import registry
from vlbench.cli import main
from vlbench.metrics import specs
from vlbench.metrics.compute import evaluate
from vlbench.metrics.graded import PrecomputedRelevance
from vlbench.pipeline.runner import run
from vlbench.pipeline.scoring import mean_records, score


def _listed(capsys) -> set[str]:
    """Metric names as `vlbench ls metrics` prints them (without the @k / @p of a parameter)."""
    assert main(["ls", "metrics"]) == 0
    lines = capsys.readouterr().out.split("metrics (name, unit, range, better, directions):")[1].splitlines()
    return {line.split()[0].split("@")[0] for line in lines if line.startswith("  ")}


def _official_records(kind: str) -> list[dict]:
    """The records of the score step with the official ECCV / CxC ground truth (the tiny fixture of
    tests/oracle/test_eccv_official_package.py's hand-worked case)."""
    sim = np.array([[0.1, 0.8, 0.5, 0.9], [0.9, 0.2, 0.3, 0.1]])
    official = {"kind": kind, "image_ids": [10, 20], "caption_ids": [0, 1, 2, 3],
                "gt": {"i2t": {10: [1, 2]}, "t2i": {0: [20], 3: [10, 20]}}}
    ds = SimpleNamespace(official_positives=official, n_captions=4, folds=None, extra_positives=None,
                         caption_to_image=np.array([0, 0, 1, 1]))
    enc = SimpleNamespace(offsets={"clean": 0}, variant_img={}, img_emb=np.eye(2), txt_emb=sim.T, relevance=None,
                          adapter=SimpleNamespace(device="cpu"))
    cfg = SimpleNamespace(k=(1, 5, 10), p=10, i2t_recall="hit", perturb_side="both")
    return score(cfg, SimpleNamespace(ds=ds, graded=({},), perturbed={}), enc)["clean"][0].records()


def test_every_reported_metric_is_listed(counting_plugin, manifest, tmp_path, capsys):
    kw = dict(model="counting", dataset=f"custom:{manifest}", quiet=True, num_workers=0, n_boot=20)
    results = [run(out=str(tmp_path / "graded"), graded=("rouge-l",), perturb="nearby-char", **kw).results,
               run(out=str(tmp_path / "fraction"), i2t_recall="fraction", perturb="nearby-char",
                   perturb_side="t2i", **kw).results]
    assert main(["run", "--task", "order", "--model", "counting", "--dataset", f"custom:{manifest}",
                 "--out", str(tmp_path / "task"), "--quiet", "--num-workers", "0"]) == 0
    results.append(json.loads((tmp_path / "task" / "results.json").read_text()))
    reported = {r["metric"] for res in results for r in res["results"]}
    reported |= {r["metric"] for kind in ("eccv", "cxc") for r in _official_records(kind)}
    assert {"ndcg_rouge_l", "accuracy", "eccv_map_at_r", "eccv_r_precision", "eccv_r1", "cxc_recall",
            "rsum"} <= reported
    listed = _listed(capsys)
    assert reported <= listed, sorted(reported - listed)
    assert reported <= set(registry.metrics.names())


NEW = specs.Metric("inv_rank", "ratio", "(0, 1]", True, "reciprocal rank of the best positive",
                   per_query=lambda r, ev: 1.0 / r.best_rank, bootstrap=True, table="InvR", fmt=".4f")


@pytest.fixture
def new_builtin(monkeypatch):
    """A built-in metric added as one record (BUILTINS and the registry it fills)."""
    reg = registry.Registry("metrics")
    monkeypatch.setattr(specs, "BUILTINS", specs.BUILTINS + (NEW,))
    specs.register_builtins(reg)
    monkeypatch.setattr(registry, "metrics", reg)
    return NEW


def test_a_new_builtin_is_one_record(new_builtin, counting_plugin, manifest, tmp_path, capsys):
    out = tmp_path / "run"
    res = run(model="counting", dataset=f"custom:{manifest}", out=str(out), quiet=True, num_workers=0,
              perturb="nearby-char", n_boot=50)
    doc = json.loads((out / "results.json").read_text())
    vals = {(r["condition"], r["direction"], r["metric"]): r["value"] for r in doc["results"]}
    with gzip.open(out / "per_query.csv.gz", "rt") as fh:
        rows = list(csv.DictReader(fh))
    for d in ("i2t", "t2i"):
        mine = [1.0 / float(r["best_rank"]) for r in rows if r["condition"] == "clean" and r["direction"] == d]
        assert vals[("clean", d, "inv_rank")] == pytest.approx(np.mean(mine))
        assert [float(r["inv_rank"]) for r in rows if r["condition"] == "clean" and r["direction"] == d] == \
            pytest.approx(mine, rel=1e-5)
    # records: after the built-ins it follows, before the "both" total
    names = [r["metric"] for r in doc["results"] if r["condition"] == "clean"]
    assert names.index("inv_rank") > names.index("ndcg_cm") and names[-1] == "rsum"
    boot = {(b["direction"], b["metric"]) for b in doc["bootstrap"]}
    assert {("i2t", "inv_rank"), ("t2i", "inv_rank"), ("both", "rsum")} <= boot
    assert ("both", "inv_rank") not in boot  # no total, so no "both" interval
    table = (out / "table.md").read_text()
    assert "InvR" in table.splitlines()[0] and f"{vals[('clean', 't2i', 'inv_rank')]:.4f}" in table
    assert "inv_rank" in _listed(capsys)
    assert main(["leaderboard", "build", str(out), "--out", str(tmp_path / "board"), "--no-plots"]) == 0
    board = [r for r in csv.DictReader(open(tmp_path / "board" / "values.csv")) if r["condition"] == "clean"]
    got = [(r["direction"], r["metric"]) for r in board]
    assert ("t2i", "inv_rank") in got
    assert got.index(("t2i", "inv_rank")) == got.index(("t2i", "ndcg_cm")) + 1  # the registry's order
    assert res.record is not None


def test_folds_are_averaged_by_metric_key():
    """Two folds reporting different metric sets (graded labels in one only): each key is the mean over the
    folds that report it; matching by position would mix ndcg_labels with the next metric."""
    rng = np.random.default_rng(0)
    c2i = np.repeat(np.arange(4), 2)
    sims = [rng.random((4, 8)), rng.random((4, 8))]
    labels = PrecomputedRelevance(rng.random((8, 4)))
    folds = [evaluate(sims[0], c2i, graded={"labels": labels}), evaluate(sims[1], c2i)]
    by_fold = [{(r["direction"], r["metric"], r["k"]): r["value"] for r in e.records()} for e in folds]
    assert set(by_fold[0]) - set(by_fold[1]) == {("t2i", "ndcg_labels", 10)}
    got = {(r["direction"], r["metric"], r["k"]): r["value"] for r in mean_records(folds)}
    assert set(got) == set(by_fold[0])
    for key, value in got.items():
        assert value == pytest.approx(np.mean([f[key] for f in by_fold if key in f])), key
    # either order of the folds gives the same means
    assert {(r["direction"], r["metric"], r["k"]): r["value"] for r in mean_records(folds[::-1])} == \
        pytest.approx(got)
