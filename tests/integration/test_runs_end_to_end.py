"""End-to-end runs: tiny models of all five families, the CLI, results.json contents."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from support.data import ROOT, read_counts

FAMILIES = ["clip", "align", "altclip", "groupvit", "openclip", "metaclip2", "chinese-clip", "blip"]
METRICS = {("recall", 1), ("recall", 5), ("recall", 10), ("rsum", None), ("medr", None), ("meanr", None),
           ("r_precision", None), ("map_at_r", None), ("ndcg", 10), ("dcg_cm", 10), ("ndcg_cm", 10)} | \
    {(m, k) for m in ("mrr", "precision", "map", "ndcg_binary") for k in (1, 5, 10)}


def _check_results(res: dict, n_images: int, n_captions: int):
    assert res["schema_version"] == 1
    assert res["dataset"]["n_images"] == n_images and res["dataset"]["n_captions"] == n_captions
    assert len(res["dataset"]["hash"]) == 64 and len(res["model"]["hash"]) == 64
    for d in ("i2t", "t2i"):
        got = {(r["metric"], r["k"]) for r in res["results"] if r["direction"] == d and r["condition"] == "clean"}
        assert got == METRICS, (d, METRICS ^ got)
    vals = {(r["direction"], r["metric"], r["k"]): r["value"] for r in res["results"]}
    for d, n_cand in (("i2t", n_captions), ("t2i", n_images)):
        for k in (1, 5, 10):
            assert 0 <= vals[(d, "recall", k)] <= 100
        assert vals[(d, "recall", 1)] <= vals[(d, "recall", 5)] <= vals[(d, "recall", 10)]
        assert 1 <= vals[(d, "medr", None)] <= n_cand
        assert vals[(d, "rsum", None)] == pytest.approx(sum(vals[(d, "recall", k)] for k in (1, 5, 10)))
        assert -1 <= vals[(d, "ndcg_cm", 10)] <= 1 + 1e-9  # cosine relevances may be negative (not clipped)
        assert 0 <= vals[(d, "ndcg", 10)] <= 1 + 1e-9  # the default nDCG: gains clipped at 0
        for k in (1, 5, 10):  # the cut-off metrics: MRR@1 = Precision@1 = hit rate@1 only with one positive
            assert 0 <= vals[(d, "map", k)] <= vals[(d, "mrr", k)] <= vals[(d, "recall", k)] <= 100
            assert 0 <= vals[(d, "precision", k)] <= 100 and 0 <= vals[(d, "ndcg_binary", k)] <= 1 + 1e-9
        assert vals[(d, "mrr", 1)] == pytest.approx(vals[(d, "recall", 1)])
    assert vals[("both", "rsum", None)] == pytest.approx(vals[("i2t", "rsum", None)] + vals[("t2i", "rsum", None)])
    for r in res["results"]:
        assert math.isfinite(r["value"])


@pytest.mark.parametrize("family", FAMILIES)
def test_family_end_to_end(family, tiny_models, manifest, tmp_path):
    from vlbench.pipeline.runner import run

    folder = tiny_models(family)
    res = run(model=f"{family}:{folder}", dataset=f"custom:{manifest}", out=str(tmp_path / "run"), quiet=True,
              num_workers=0, n_boot=50)
    _check_results(res.results, 12, 60)
    assert res.results["encoding"]["images_encoded"] == 12
    ident = res.results["model"]["identity"]
    assert ident["precision"] == "fp32"
    assert ident["local"]["content_sha256"]  # local checkpoints are hashed by content
    assert (res.out_dir / "per_query.csv.gz").is_file()


def test_cli_run_writes_results(tiny_models, manifest, tmp_path):
    folder = tiny_models("clip")
    out = tmp_path / "cli-run"
    proc = subprocess.run([sys.executable, "-m", "vlbench", "run", "--model", f"clip:{folder}",
                           "--dataset", f"custom:{manifest}", "--out", str(out), "--num-workers", "0"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    res = json.loads((out / "results.json").read_text())
    _check_results(res, 12, 60)
    assert "R@1" in proc.stdout and "t2i" in proc.stdout
    # strict JSON: no NaN/Infinity tokens
    json.loads((out / "results.json").read_text(), parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))
    # a second run into the same folder is refused: runs are never overwritten
    proc2 = subprocess.run([sys.executable, "-m", "vlbench", "run", "--model", f"clip:{folder}",
                            "--dataset", f"custom:{manifest}", "--out", str(out), "--num-workers", "0"],
                           capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc2.returncode == 2 and "already holds a finished run" in proc2.stderr


def test_per_query_values_reproduce_aggregates(counting_plugin, manifest, tmp_path):
    import pandas as pd

    from vlbench.pipeline.runner import run

    res = run(model="counting", dataset=f"custom:{manifest}", out=str(tmp_path / "r"), quiet=True, num_workers=0)
    pq = pd.read_csv(res.out_dir / "per_query.csv.gz")
    vals = {(r["direction"], r["metric"], r["k"]): r["value"] for r in res.results["results"]}
    for d in ("i2t", "t2i"):
        sub = pq[(pq.direction == d) & (pq.condition == "clean")]
        assert len(sub) == (12 if d == "i2t" else 60)
        assert sub["recall@5"].mean() == pytest.approx(vals[(d, "recall", 5)])
        assert sub["best_rank"].median() == pytest.approx(vals[(d, "medr", None)])
        assert sub["map_at_r"].mean() == pytest.approx(vals[(d, "map_at_r", None)], abs=1e-4)


def test_per_query_file_leaves_a_column_empty_where_a_condition_lacks_it(tmp_path):
    """Conditions with different per-query columns share one header; a missing cell is empty, and the file
    reads back with pandas as the same table (bools as True/False, numbers as numbers)."""
    import types

    import numpy as np
    import pandas as pd

    from vlbench.pipeline.report import write_per_query

    class Ev:
        def __init__(self, extra):
            self.extra = extra

        def per_query(self, d):
            n = 2 if d == "i2t" else 3
            cols = {"query": np.arange(n), "best_rank": np.arange(1, n + 1), "recall@1": np.arange(n) == 0}
            if self.extra:
                cols["mrr"] = 1.0 / np.arange(1, n + 1)
            return cols

    ds = types.SimpleNamespace(folds=None, images=["im0", "im1"], caption_ids=["c0", "c1", "c2"])
    write_per_query(tmp_path, ds, {"clean": [Ev(False)], "typo": [Ev(True)]})
    pq = pd.read_csv(tmp_path / "per_query.csv.gz")
    assert list(pq.columns) == ["condition", "fold", "direction", "query_index", "query_id", "best_rank",
                                "recall@1", "mrr"]
    assert len(pq) == 10 and pq[pq.condition == "clean"]["mrr"].isna().all()
    typo = pq[(pq.condition == "typo") & (pq.direction == "t2i")]
    assert typo["mrr"].tolist() == pytest.approx([1, 0.5, 1 / 3])
    assert typo["query_id"].tolist() == ["c0", "c1", "c2"]
    assert pq[pq.direction == "i2t"]["query_id"].tolist() == ["im0", "im1"] * 2
    assert pq["recall@1"].tolist() == [True, False, True, False, False] * 2  # i2t then t2i, per condition


def test_images_and_texts_encoded_once_and_cached(counting_plugin, manifest, tmp_path, monkeypatch):
    from vlbench.pipeline.runner import run

    count = tmp_path / "counts.jsonl"
    monkeypatch.setenv("VLBENCH_COUNT_FILE", str(count))
    run(model="counting", dataset=f"custom:{manifest}", out=str(tmp_path / "a"), quiet=True, num_workers=0)
    first = read_counts(count)
    assert first["images"] == 12
    assert first["texts"] == 60  # 60 distinct captions in the excerpt
    run(model="counting", dataset=f"custom:{manifest}", out=str(tmp_path / "b"), quiet=True, num_workers=0)
    assert read_counts(count) == first  # the second identical run encodes nothing
    run(model="counting", dataset=f"custom:{manifest}", out=str(tmp_path / "c"), quiet=True, num_workers=0,
        restart=True)
    assert read_counts(count)["images"] == 24  # --restart re-encodes


def test_duplicate_captions_encoded_once(counting_plugin, tmp_path, monkeypatch):
    from support.data import write_images
    from vlbench.pipeline.runner import run

    names = write_images(tmp_path / "d", 3)
    man = tmp_path / "d" / "m.jsonl"
    man.write_text("\n".join(json.dumps({"image": n, "captions": ["a dog", "a dog", f"photo {i}"]})
                             for i, n in enumerate(names)))
    count = tmp_path / "counts.jsonl"
    monkeypatch.setenv("VLBENCH_COUNT_FILE", str(count))
    res = run(model="counting", dataset=f"custom:{man}", out=str(tmp_path / "o"), quiet=True, num_workers=0)
    assert read_counts(count)["texts"] == 4  # "a dog" once + 3 distinct
    assert res.results["encoding"]["texts_distinct"] == 4


def test_results_are_deterministic(counting_plugin, manifest, tmp_path):
    from vlbench.pipeline.runner import run

    a = run(model="counting", dataset=f"custom:{manifest}", out=str(tmp_path / "a"), quiet=True, num_workers=0)
    b = run(model="counting", dataset=f"custom:{manifest}", out=str(tmp_path / "b"), quiet=True, num_workers=0,
            no_cache=True)
    assert a.results["results"] == b.results["results"]
    assert a.results["results_hash"] == b.results["results_hash"]


def test_perturb_all_runs_14_conditions_and_encodes_each_image_once(counting_plugin, manifest, tmp_path,
                                                                      monkeypatch):
    from vlbench.pipeline.runner import run

    count = tmp_path / "counts.jsonl"
    monkeypatch.setenv("VLBENCH_COUNT_FILE", str(count))
    res = run(model="counting", dataset=f"custom:{manifest}", perturb="all", out=str(tmp_path / "p"), quiet=True,
              num_workers=0, n_boot=100)
    r = res.results
    conds = {rec["condition"] for rec in r["results"]}
    assert len(conds) == 14 and "clean" in conds and "shuffle-trigrams" in conds
    for c in conds:
        for d in ("i2t", "t2i"):
            assert {(x["metric"], x["k"]) for x in r["results"] if x["condition"] == c and x["direction"] == d} \
                == METRICS
    counts = read_counts(count)
    assert counts["images"] == 12  # images encoded exactly once for all 14 conditions
    # a caption a perturbation left unchanged is not encoded again: texts encoded == distinct texts
    assert counts["texts"] == r["encoding"]["texts_distinct"] < 14 * 60
    # provenance of every perturbation
    for c, meta in r["conditions"].items():
        if c == "clean":
            continue
        assert meta["version"] and "params" in meta and meta["seed"] == 0 and len(meta["captions_hash"]) == 64
        assert 0 <= meta["not_applicable_rate"] <= 1
    # deltas and paired bootstrap CIs of the RSUM change, both directions and total
    b = [x for x in r["bootstrap"] if x["condition"] == "shuffle-all-words"]
    assert {x["direction"] for x in b} == {"i2t", "t2i", "both"}
    for x in b:
        assert x["ci_low"] <= x["delta"] <= x["ci_high"]
    d = {(x["direction"], x["metric"], x["k"]): x for x in r["deltas"] if x["condition"] == "distraction-true"}
    vals = {(x["condition"], x["direction"], x["metric"], x["k"]): x["value"] for x in r["results"]}
    assert d[("t2i", "recall", 1)]["abs"] == pytest.approx(vals[("distraction-true", "t2i", "recall", 1)] -
                                                         vals[("clean", "t2i", "recall", 1)])
    mia = r["model_input_analysis"]
    assert set(mia["jaccard"]) == {"decreased", "increased", "unchanged"} and mia["pairs"] == 13 * 12 // 2
    # a warm rerun reuses perturbations and embeddings: nothing encoded
    res2 = run(model="counting", dataset=f"custom:{manifest}", perturb="all", out=str(tmp_path / "p2"), quiet=True,
               num_workers=0, n_boot=100)
    assert read_counts(count) == counts
    assert res2.results["results"] == r["results"]


def test_model_input_analysis_by_hand():
    from vlbench.pipeline.runner import model_input_analysis

    clean = np.array([100., 200., 300., 0.])
    out = model_input_analysis(clean, {"a": np.array([0., 200., 300., 100.]),   # dec {0}, inc {3}, same {1,2}
                                       "b": np.array([0., 100., 300., 0.]),     # dec {0,1}, inc {}, same {2,3}
                                       "c": np.array([100., 300., 300., 0.])})  # dec {}, inc {1}, same {0,2,3}
    # decreased: a-b 1/2, a-c skip? no: |{0} u {}| = 1 -> 0/1 = 0, b-c: 0/2 = 0 -> mean(0.5, 0, 0)
    assert out["jaccard"]["decreased"] == pytest.approx((0.5 + 0 + 0) / 3)
    # increased: a-b {3} vs {} -> 0, a-c {3} vs {1} -> 0, b-c {} vs {1} -> 0
    assert out["jaccard"]["increased"] == 0
    # unchanged: a-b {1,2} {2,3} -> 1/3; a-c {1,2} {0,2,3} -> 1/4; b-c {2,3} {0,2,3} -> 2/3
    assert out["jaccard"]["unchanged"] == pytest.approx((1 / 3 + 1 / 4 + 2 / 3) / 3)
    assert out["groups"]["a"] == {"decreased": 1, "increased": 1, "unchanged": 2}


def test_graded_relevance_in_a_run(counting_plugin, manifest, tmp_path):
    from vlbench.pipeline.runner import run

    res = run(model="counting", dataset=f"custom:{manifest}", out=str(tmp_path / "g"), quiet=True, num_workers=0,
              graded=("rouge-l",))
    vals = {(r["direction"], r["metric"], r["k"]): r["value"] for r in res.results["results"]}
    assert 0 < vals[("t2i", "ndcg_rouge_l", 10)] <= 1
    assert ("i2t", "ndcg_rouge_l", 10) not in vals
    assert res.results["settings"]["graded_relevance"]["rouge_l"]
