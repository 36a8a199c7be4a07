"""A two-stage run (``vlbench run --rerank``) on the leaderboard: its final ranking is an entry of its own
("<model> + blip-itm@K16"), never merged with nor deduplicated against the plain model's entry; its first stage
counts for the plain model only where no plain run has the condition; the kind / stages column names every entry's
kind (only on boards with another kind than dual encoders). The expected values are read from the results.json
files as written (results for the first stage, rerank.results for the final ranking), not through the builder."""

from __future__ import annotations

import csv
import io
import json

from support.synthetic_runs import synth_run

FINAL_GAIN = 7.5  # the fixture's final ranking: every first-stage value + this (so a stage mix-up cannot pass)


def _reranked(folder, *, model=0, k=16, name="blip-itm", created="2026-11-25T10:00:00", perturb=("char-swap",),
              **kw):
    """A synthetic run with results.json ``rerank`` as vlbench run writes it (pair scorer, K, final results)."""
    synth_run(folder, model=model, perturb=list(perturb), created=created, run_id=f"run-{folder.name}", **kw)
    path = folder / "results.json"
    doc = json.loads(path.read_text())
    final = [dict(r, value=min(r["value"] + FINAL_GAIN * (3 if r["metric"] == "rsum" else 1) *
                               (2 if r["direction"] == "both" else 1), 100.0 if r["metric"] == "recall" else 600.0))
             for r in doc["results"]]
    doc["rerank"] = {"pair_scorer": {"spec": f"{name}:/home/u/ckpt/{name}", "name": name, "hash": "p" * 64},
                     "k": k, "results": final, "ceiling": [], "gain": []}
    path.write_text(json.dumps(doc))
    return folder, {(r["condition"], r["direction"], r["metric"], r["k"]): r["value"] for r in final}


def _values(folder) -> dict:
    doc = json.loads((folder / "results.json").read_text())
    return {(r["condition"], r["direction"], r["metric"], r["k"]): r["value"] for r in doc["results"]}


def _rows(built, name):
    return list(csv.DictReader(io.StringIO(built.files[f"{name}.csv"].decode())))


def _f(x):
    return float(x) if x != "" else None


def test_a_reranked_run_is_an_entry_of_its_own_beside_the_plain_model(tmp_path):
    from vlbench.leaderboards.build import make

    plain = synth_run(tmp_path / "plain", model=0, perturb=["char-swap"], created="2026-11-20T10:00:00")
    reranked, final = _reranked(tmp_path / "reranked", created="2026-11-25T10:00:00")  # newer than the plain run
    other = synth_run(tmp_path / "other", model=1, perturb=["char-swap"])
    built = make([plain, reranked, other], plots=False, warn=lambda m: None)
    clean = {r["model"]: r for r in _rows(built, "clean_retrieval")}
    assert set(clean) == {"clip:model-0", "clip:model-0 + blip-itm@K16", "clip:model-1"}
    assert {m: r["stages"] for m, r in clean.items()} == {
        "clip:model-0": "dual", "clip:model-0 + blip-itm@K16": "dual + blip-itm@K16", "clip:model-1": "dual"}
    two = clean["clip:model-0 + blip-itm@K16"]
    for d in ("i2t", "t2i"):
        for k in (1, 5, 10):
            assert _f(two[f"{d}_recall@{k}"]) == final[("clean", d, "recall", k)]
            # the plain entry: the plain run's values (the newer two-stage run's first stage never replaces them)
            assert _f(clean["clip:model-0"][f"{d}_recall@{k}"]) == _values(plain)[("clean", d, "recall", k)]
        assert _f(two[f"{d}_rsum"]) == final[("clean", d, "rsum", None)]
    assert clean["clip:model-0"]["run_id"] == "run-plain"
    assert two["run_id"] == "run-reranked+blip-itm@K16"
    # the two-stage entry under a perturbation: its final values, its change against its own final clean
    changes = {(r["model"], r["direction"]): r for r in _rows(built, "rsum_changes") if r["condition"] == "char-swap"}
    got = changes[("clip:model-0 + blip-itm@K16", "both")]
    assert _f(got["rsum"]) == final[("char-swap", "both", "rsum", None)]
    want = final[("char-swap", "both", "rsum", None)] - final[("clean", "both", "rsum", None)]
    assert abs(_f(got["delta"]) - want) < 1e-9
    assert got["ci_low"] == "" and got["ci_high"] == ""  # a run without rerank.bootstrap: no interval made up
    # the manifest: each entry's stages; the plain model's values from the plain run; the pair scorer's local path
    # never shown
    runs = {r["run_id"]: r for r in built.manifest["runs"]}
    assert runs["run-reranked+blip-itm@K16"]["stages"] == "dual + blip-itm@K16"
    assert "run-reranked" not in runs  # its first stage lost every condition to the plain run
    assert "stages" not in runs["run-plain"]
    sup = {s["run_id"]: s for s in built.manifest["superseded"]}
    assert sup["run-reranked"]["fully"] and all(c["same_values"] for c in sup["run-reranked"]["conditions"])
    assert any(n.startswith("the first stage of two-stage run") and "by plain run(s)" in n
               for n in built.manifest["notes"])
    assert "/home/u" not in json.dumps(built.manifest) and b"/home/u" not in built.files["index.html"]
    # the page: the ranking and the clean table name the kind and stages
    page = built.files["index.html"].decode()
    assert "kind / stages" in page and "dual + blip-itm@K16" in page
    ranked = {r[1]: r[2] for r in built.tables["clean_retrieval"].rows}
    assert ranked["clip:model-0 + blip-itm@K16"] == "dual + blip-itm@K16"


def test_a_reranked_run_without_a_plain_run_gives_both_entries(tmp_path, capsys):
    from vlbench.cli import main

    reranked, final = _reranked(tmp_path / "reranked", k=4)
    first = _values(reranked)
    assert main(["leaderboard", "build", str(reranked), "--out", str(tmp_path / "lb"), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "[the first stage of dual + blip-itm@K4]" in out and "[dual + blip-itm@K4]" in out
    with open(tmp_path / "lb" / "clean_retrieval.csv", newline="") as fh:
        clean = {r["model"]: r for r in csv.DictReader(fh)}
    assert _f(clean["clip:model-0"]["t2i_recall@1"]) == first[("clean", "t2i", "recall", 1)]
    assert _f(clean["clip:model-0 + blip-itm@K4"]["t2i_recall@1"]) == final[("clean", "t2i", "recall", 1)]
    manifest = json.loads((tmp_path / "lb" / "build_manifest.json").read_text())
    entries = {r["run_id"]: r for r in manifest["runs"]}
    assert entries["run-reranked"]["first_stage_of"] == "dual + blip-itm@K4"
    assert "stages" not in entries["run-reranked"]  # a dual encoder's entry, as before kinds were named
    assert entries["run-reranked+blip-itm@K4"]["stages"] == "dual + blip-itm@K4"


def test_two_reranked_runs_of_one_model_with_another_k_are_two_entries(tmp_path):
    from vlbench.leaderboards.build import make

    a, _ = _reranked(tmp_path / "k4", k=4)
    b, _ = _reranked(tmp_path / "k16", k=16, created="2026-11-26T10:00:00")
    built = make([a, b], plots=False, warn=lambda m: None)
    models = sorted(r["model"] for r in _rows(built, "clean_retrieval"))
    assert models == ["clip:model-0", "clip:model-0 + blip-itm@K16", "clip:model-0 + blip-itm@K4"]


def test_a_board_of_dual_encoders_has_no_stages_column(tmp_path):
    from vlbench.leaderboards.build import make

    built = make([synth_run(tmp_path / "a", model=0), synth_run(tmp_path / "b", model=1)], plots=False,
                 warn=lambda m: None)
    assert "stages" not in built.files["clean_retrieval.csv"].decode().splitlines()[0].split(",")
    assert all("stages" not in r for r in built.manifest["runs"])


def test_model_kind_is_read_from_the_recorded_identity(tmp_path):
    from vlbench.leaderboards.build import make

    a = synth_run(tmp_path / "a", model=0)
    b = synth_run(tmp_path / "b", model=1, spec="colqwen2:tiny")
    c = synth_run(tmp_path / "c", model=2, spec="vlm2vec:tiny")
    for folder, adapter in ((b, "vlbench.multivector.colqwen2"), (c, "vlbench.mllm.vlm2vec")):
        doc = json.loads((folder / "results.json").read_text())
        doc["model"]["identity"] = {"adapter": adapter}
        (folder / "results.json").write_text(json.dumps(doc))
    built = make([a, b, c], plots=False, warn=lambda m: None)
    assert {r["model"]: r["stages"] for r in _rows(built, "clean_retrieval")} == {
        "clip:model-0": "dual", "colqwen2:tiny": "multi-vector", "vlm2vec:tiny": "MLLM embedder"}


def test_the_readback_prefix_is_the_one_the_run_writes():
    from vlbench.pipeline.rerank import readback, stage

    assert readback.PREFIX == stage.PREFIX


def test_the_published_provenance_names_the_stages_of_a_two_stage_entry(tmp_path):
    from vlbench.leaderboards.publish import publish_leaderboard

    reranked, _ = _reranked(tmp_path / "reranked", k=4)
    publish_leaderboard(tmp_path / "pub", paths=[reranked], plots=False, warn=lambda m: None)
    readme = (tmp_path / "pub" / "clean_retrieval" / "README.md").read_text()
    assert "run-reranked+blip-itm@K4 | clip:model-0 \\[dual + blip-itm@K4\\]" in readme


def test_a_two_stage_runs_final_ranking_is_no_second_model_for_the_stray_rule(tmp_path):
    from vlbench.leaderboards.build import make

    a = synth_run(tmp_path / "a", model=0)
    b = synth_run(tmp_path / "b", model=1)
    alone, _ = _reranked(tmp_path / "alone", model=2, dataset="custom:explore.jsonl", dataset_hash="e" * 64)
    built = make([a, b, alone], plots=False, warn=lambda m: None)
    left = {x["run_id"]: x["reason"] for x in built.manifest["left_out"]}
    assert set(left) == {"run-alone", "run-alone+blip-itm@K16"}  # one model on its dataset: stray, both stages
    assert all(r.startswith("stray") for r in left.values())
