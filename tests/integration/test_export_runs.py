"""``vlbench export`` of a real finished run (the tiny counting run): mteb's own loader reads the MTEB files, every
condition and direction, and the values it reads equal results.json (the model-index: tests/unit/export)."""

from __future__ import annotations

import json

from support.tools import needs_package

from vlbench.cli import main

needs_mteb = needs_package("mteb", "reads the export back with mteb's own loader")


def _records(run) -> dict:
    doc = json.loads((run / "results.json").read_text())
    return {(r["condition"], r["direction"], r["metric"], r["k"]): r["value"] for r in doc["results"]}


@needs_mteb
def test_mteb_loader_reads_the_exported_tiny_run_and_its_values_equal_results_json(tiny_run, tmp_path):
    import mteb

    out = tmp_path / "mteb"
    assert main(["export", str(tiny_run), "--format", "mteb", "--out", str(out), "--model-name", "org/tiny"]) == 0
    want = _records(tiny_run)
    loaded = mteb.ResultCache(out).load_results(include_remote=False, load_experiments="match_name")
    seen = set()
    for model in loaded.model_results:
        assert model.model_name == "org/tiny"
        cond = "clean" if model.experiment_name is None else model.experiment_name.removeprefix("vlbench_condition_")
        for task in model.task_results:
            d = "i2t" if task.task_name.endswith("I2TRetrieval") else "t2i"
            [scores] = task.scores["test"]
            assert task.dataset_revision == json.loads((tiny_run / "results.json").read_text())["dataset"]["hash"]
            for k in (1, 5, 10):
                assert scores[f"hit_rate_at_{k}"] == want[(cond, d, "recall", k)] / 100.0
                # t2i: one positive image per caption (the run's per-query counts say so), so MTEB's recall is the
                # hit rate; i2t: five captions per image, so MTEB's recall is not written
                assert scores.get(f"recall_at_{k}") == (want[(cond, d, "recall", k)] / 100.0 if d == "t2i" else None)
            seen.add((cond, d))
    assert seen == {(c, d) for c in ("clean", "char-swap") for d in ("i2t", "t2i")}
