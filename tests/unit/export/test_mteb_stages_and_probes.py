"""``vlbench export --format mteb`` of a two-stage run (its final ranking, under a model name that says the stages)
and of a run with meaning-changing probes (left out, said in the export's log), on synthetic run files; a real tiny
two-stage run: tests/integration/test_rerank_runs.py."""

from __future__ import annotations

import json

from support.synthetic_runs import synth_run

from vlbench.cli import main


def _with_rerank(folder, gain: float = 6.0):
    """results.json ``rerank`` as vlbench run writes it: the final ranking's values = the first stage's + gain."""
    path = folder / "results.json"
    doc = json.loads(path.read_text())
    final = [dict(r, value=r["value"] + gain) for r in doc["results"] if r["metric"] == "recall"]
    doc["rerank"] = {"pair_scorer": {"spec": "blip-itm:/home/u/blip", "name": "blip-itm", "hash": "p" * 64}, "k": 16,
                     "results": final, "ceiling": [], "gain": []}
    path.write_text(json.dumps(doc))
    return {(r["condition"], r["direction"], r["k"]): r["value"] for r in final}


def _files(out):
    return {str(p.relative_to(out)): json.loads(p.read_text()) for p in sorted(out.rglob("*.json"))}


def test_a_two_stage_run_exports_its_final_ranking_under_a_name_that_says_the_stages(tmp_path, capsys):
    run = synth_run(tmp_path / "run", perturb=["char-swap"])
    final = _with_rerank(run)
    out = tmp_path / "mteb"
    assert main(["export", str(run), "--format", "mteb", "--out", str(out), "--model-name", "org/clip"]) == 0
    files = _files(out)
    folders = {f.split("/")[1] for f in files}
    assert folders == {"org__clip_+_blip-itm_K16"}  # MTEB's spelling of "org/clip + blip-itm@K16"
    task = {(f.split("/")[-1], "experiments" in f): doc for f, doc in files.items() if "Retrieval" in f}
    for (name, perturbed), doc in task.items():
        d = "t2i" if "T2I" in name else "i2t"
        cond = "char-swap" if perturbed else "clean"
        got = doc["scores"]["test"][0]
        for k in (1, 5, 10):
            assert got[f"hit_rate_at_{k}"] == final[(cond, d, k)] / 100  # the final ranking, not the first stage
        assert doc["vlbench"]["run_id"].endswith("+blip-itm@K16")
    meta = next(doc for f, doc in files.items() if f.endswith("model_meta.json") and "experiments" not in f)
    assert meta["name"] == "org/clip + blip-itm@K16" and meta["vlbench_stages"]["stages"] == "dual + blip-itm@K16"
    assert meta["vlbench_stages"]["first_stage_hash"] == "1" * 64 and meta["vlbench_model_hash"] != "1" * 64
    assert "two-stage run" in capsys.readouterr().out
    assert "/home/u" not in json.dumps(files)


def test_probe_conditions_are_left_out_of_mteb_files_with_a_note(tmp_path, capsys):
    run = synth_run(tmp_path / "run", perturb=["char-swap", "synonym-noun"])
    path = run / "results.json"
    doc = json.loads(path.read_text())
    doc["conditions"]["synonym-noun"] = dict(doc["conditions"]["synonym-noun"], kind="sensitivity")
    path.write_text(json.dumps(doc))
    out = tmp_path / "mteb"
    assert main(["export", str(run), "--format", "mteb", "--out", str(out)]) == 0
    experiments = {f.split("/")[4] for f in _files(out) if "/experiments/" in f}
    assert experiments == {"vlbench_condition_char-swap"}
    log = capsys.readouterr().out
    assert "1 meaning-changing probe condition(s) left out (synonym-noun)" in log


def test_a_two_stage_runs_model_card_holds_its_first_stage_and_says_so(tmp_path, capsys):
    run = synth_run(tmp_path / "run")
    _with_rerank(run)
    first = {(r["direction"], r["k"]): r["value"] for r in json.loads((run / "results.json").read_text())["results"]
             if r["condition"] == "clean" and r["metric"] == "recall"}
    out = tmp_path / "card"
    assert main(["export", str(run), "--format", "model-index", "--out", str(out), "--model-name", "org/clip"]) == 0
    assert "the model card holds its first stage's numbers" in capsys.readouterr().out
    card = (out / "README.md").read_text()
    assert f"value: {first[('t2i', 1)]}" in card and f"value: {first[('t2i', 1)] + 6.0}" not in card
