"""The metric registry: built-ins and plug-ins listed and computed through the same path."""

from __future__ import annotations

import importlib.metadata as md
import json
import subprocess
import sys

import numpy as np
import pytest

from vlbench import registry
from vlbench.metrics import compute as M
from vlbench.metrics.specs import Metric, describe, register_builtins

from support.data import ROOT

# 2 images x 4 captions; caption j belongs to image c2i[j]. Worked by hand:
# t2i best ranks: caption0 col [.9,.3] -> image0 rank 1; caption1 [.2,.7] -> image0 rank 2;
# caption2 [.8,.6] -> image1 rank 2; caption3 [.1,.5] -> image1 rank 1.  MRR t2i = (1+.5+.5+1)/4 = .75
# i2t: image0 row [.9,.2,.8,.1], positives {0,1}: best is caption0 rank 1 -> 1
#      image1 row [.3,.7,.6,.5], positives {2,3}: caption2 (.6) rank 2 -> .5.  MRR i2t = .75
S = np.array([[.9, .2, .8, .1], [.3, .7, .6, .5]], dtype=np.float32)
C2I = [0, 0, 1, 1]


@pytest.fixture
def fresh_metrics(monkeypatch):
    """A metrics registry that discovers the monkeypatched entry points (built-ins included)."""
    reg = registry.Registry("metrics")
    register_builtins(reg)
    monkeypatch.setattr(registry, "metrics", reg)
    return reg


def _entry_points(mapping):
    class EP:
        def __init__(self, name, value):
            self.name, self.value, self.dist = name, value, None

    def fake(group=None):
        return [EP(n, v) for n, v in mapping.items()] if group == "vlbench.metrics" else []
    return fake


#: a plug-in that is not the built-in mrr@k (the name is free: built-ins win clashes): the rank is not cut at k
MRR = Metric("inv-rank", "ratio", "(0, 1]", True, "mean reciprocal rank, uncut",
             per_query=lambda r, ev: 1.0 / r.best_rank)


def test_builtins_declare_metadata():
    rows = {r["name"]: r for r in describe()}
    assert {"recall", "rsum", "medr", "meanr", "r_precision", "map_at_r", "dcg_cm", "ndcg_cm"} <= set(rows)
    assert rows["recall"]["unit"] == "%" and rows["recall"]["range"] == "[0, 100]"
    assert rows["medr"]["better"] == "lower" and rows["recall"]["better"] == "higher"
    assert "ideal DCG <= 0" in rows["ndcg_cm"]["range"]


def test_monkeypatched_plugin_is_listed_and_computed(fresh_metrics, monkeypatch):
    monkeypatch.setitem(sys.modules, "fake_metric_mod", type(sys)("fake_metric_mod"))
    sys.modules["fake_metric_mod"].MRR = MRR
    monkeypatch.setattr(md, "entry_points", _entry_points({"inv-rank": "fake_metric_mod:MRR",
                                                           "broken": "no_such_module_xyz:M"}))
    assert [r["name"] for r in describe() if r["source"] != "builtin"] == ["broken", "inv-rank"]
    with pytest.warns(UserWarning, match="'broken'.*skipped"):
        ev = M.evaluate(M.ArraySource(S), C2I)
        recs = {(r["direction"], r["metric"]): r["value"] for r in ev.records()}
    assert recs[("t2i", "inv-rank")] == pytest.approx(0.75) and recs[("i2t", "inv-rank")] == pytest.approx(0.75)
    np.testing.assert_allclose(ev.per_query("t2i")["inv-rank"], [1, .5, .5, 1])
    used = registry.plugin_versions()
    assert "metrics/inv-rank" in used and "metrics/broken" not in used  # broken: never computed, not "in use"


@pytest.mark.slow  # pip-installs the plug-in package, runs a subprocess
def test_plugin_package_metric_installed_for_real(plugin_env, tmp_path, manifest):
    ls = subprocess.run([sys.executable, "-m", "vlbench", "ls", "metrics"], capture_output=True, text=True,
                        env=plugin_env, cwd=tmp_path, timeout=120)
    assert ls.returncode == 0, ls.stderr
    assert "reciprocal-rank" in ls.stdout and "vlbench-counting-plugin 0.3.0" in ls.stdout
    out = tmp_path / "run"
    run = subprocess.run([sys.executable, "-m", "vlbench", "run", "--model", "counting:dim=16", "--dataset",
                          f"custom:{manifest}", "--out", str(out), "--quiet", "--num-workers", "0"],
                         capture_output=True, text=True, env=plugin_env, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    text = (out / "results.json").read_text()
    assert "reciprocal-rank" in text
    res = json.loads(text)
    assert res["environment"]["plugins"]["metrics/reciprocal-rank"] == "vlbench-counting-plugin 0.3.0"


def test_extending_doc_metric_example_is_the_tested_plugin():
    """docs/extending.md's metric example is the file the plug-in package ships (and the tests run)."""
    root = ROOT
    example = (root / "docs/examples/metric_plugin.py").read_text()
    assert example == (root / "tests/plugin_pkg/vlbench_counting_plugin/metrics.py").read_text()
    doc = (root / "docs/extending.md").read_text()
    blocks = [b.split("```", 1)[0] for b in doc.split("```python\n")[1:]]
    assert example in blocks  # shown verbatim (the page shows four example files)
    ns: dict = {}
    exec(compile(example, "metric_plugin.py", "exec"), ns)  # runs: builds the Metric
    ev = M.evaluate(M.ArraySource(S), C2I)
    np.testing.assert_allclose(ns["RECIPROCAL_RANK"].per_query(ev.t2i, ev), [1, .5, .5, 1])


def test_environment_plugins_lists_only_the_plugins_used(monkeypatch):
    """results.json environment.plugins: only plug-ins a run selected or computed, not every installed one."""
    from vlbench.util import env as _env

    monkeypatch.setitem(sys.modules, "fake_used_mod", type(sys)("fake_used_mod"))
    sys.modules["fake_used_mod"].U = sys.modules["fake_used_mod"].I = object()
    models = registry.Registry("models")
    models._plugins_loaded = True
    for n in ("used-model", "idle-model"):
        models._entries[n] = registry.Entry(n, f"fake_used_mod:{n[0].upper()}", "", f"plugin:{n}-dist 1.0")
    metrics = registry.Registry("metrics")
    metrics._plugins_loaded = True
    metrics._entries["idle-metric"] = registry.Entry("idle-metric", MRR, "", "plugin:idle-metric-dist 2.0")
    empty = {k: registry.Registry(k) for k in ("datasets", "perturbations")}
    for reg in empty.values():
        reg._plugins_loaded = True
    monkeypatch.setattr(registry, "models", models)
    monkeypatch.setattr(registry, "metrics", metrics)
    monkeypatch.setattr(registry, "datasets", empty["datasets"])
    monkeypatch.setattr(registry, "perturbations", empty["perturbations"])
    assert _env.library_versions()["plugins"] == {}  # installed, none used
    models.get("used-model")
    assert _env.library_versions()["plugins"] == {"models/used-model": "used-model-dist 1.0"}


# 3 images x 3 captions, caption j belongs to image j. Worked by hand:
# t2i: caption0 column [.9,.1,.2] -> image0 rank 1; caption1 [.1,.9,.2] -> rank 1; caption2 [.8,.7,.3] -> rank 3
# i2t: every image's own caption scores highest in its row -> ranks 1, 1, 1
S3 = np.array([[.9, .1, .8], [.1, .9, .7], [.2, .2, .3]], dtype=np.float32)
#: reciprocal rank cut at k (param "k"), reported as the MEDIAN, in percent:
#: t2i k=1 [1, 1, 0] -> median 1 -> 100.0 (the mean would be 66.67); k=5 [1, 1, 1/3] -> 100.0 (mean 77.78)
RR_AT = Metric("rr-at", "%", "[0, 100]", True, "reciprocal rank, 0 beyond k", param="k", aggregate="median",
               percent=True, per_query=lambda r, ev, k: np.where(r.best_rank <= k, 1.0 / r.best_rank, 0.0))
#: an aggregate of its own: the worst best-positive rank (t2i 3, i2t 1)
WORST = Metric("worst-rank", "rank", "[1, n]", False, "worst best-positive rank", per_query=lambda r, ev: r.best_rank,
               aggregate=lambda r, ev, x: float(r.best_rank.max()))


def test_plugin_param_and_aggregate_are_honoured_as_for_a_builtin(monkeypatch):
    """A plug-in's param, aggregate and percent take the built-ins' path (they were ignored: one
    mean record with k=None)."""
    for name, m in (("rr-at", RR_AT), ("worst-rank", WORST)):
        monkeypatch.setitem(registry.metrics._entries, name, registry.Entry(name, m, "", "plugin:test"))
    ev = M.evaluate(M.ArraySource(S3), [0, 1, 2], k=(1, 5))
    recs = [(r["direction"], r["metric"], r["k"], r["value"]) for r in ev.records()]
    mine = [x for x in recs if x[1] in ("rr-at", "worst-rank")]
    assert mine == [("i2t", "rr-at", 1, 100.0), ("i2t", "rr-at", 5, 100.0), ("i2t", "worst-rank", None, 1.0),
                    ("t2i", "rr-at", 1, 100.0), ("t2i", "rr-at", 5, 100.0), ("t2i", "worst-rank", None, 3.0)]
    # after each direction's built-in retrieval records, before the next direction's
    names = [x[1] for x in recs if x[0] == "i2t"]
    assert names.index("rr-at") > names.index("ndcg_cm")
    cols = ev.per_query("t2i")
    np.testing.assert_allclose(cols["rr-at@1"], [100, 100, 0])
    np.testing.assert_allclose(cols["rr-at@5"], [100, 100, 100 / 3])
    np.testing.assert_array_equal(cols["worst-rank"], [1, 1, 3])
    assert list(cols)[-3:] == ["rr-at@1", "rr-at@5", "worst-rank"]  # after the built-in columns
