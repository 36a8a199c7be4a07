"""The MTEB export's mapping: which vlbench records become which MTEB scores, the task names, the condition
folders, the files mteb's own loader reads (on synthetic records; a real run: tests/integration/test_export_runs.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.export_records import record as _record

from vlbench.export import mteb as M


def test_recall_at_k_is_exported_as_mteb_hit_rate_not_as_mteb_recall():
    # vlbench's Recall@k is the hit rate; MTEB's recall_at_k is the share of positives found (<= 0.2 at k=1 with
    # five captions per image), so it is written only where each query has exactly one positive
    rec = _record({("clean", "i2t", "recall", 1): 40.0, ("clean", "t2i", "recall", 1): 30.0})
    i2t = M.scores(rec, "clean", "i2t", one_positive=False)
    assert i2t == {"hit_rate_at_1": 0.4}
    t2i = M.scores(rec, "clean", "t2i", one_positive=True)
    assert t2i == {"accuracy": 0.3, "hit_rate_at_1": 0.3, "recall_at_1": 0.3}


def test_i2t_fraction_recall_is_not_exported_as_a_hit_rate():
    rec = _record({("clean", "i2t", "recall", 1): 40.0, ("clean", "t2i", "recall", 1): 30.0},
                  settings={"protocol": {"i2t_recall": "fraction"}})
    assert M.scores(rec, "clean", "i2t", one_positive=False) == {}
    assert M.scores(rec, "clean", "t2i", one_positive=False) == {"hit_rate_at_1": 0.3}


def test_metrics_without_an_mteb_definition_are_left_out():
    rec = _record({("clean", "i2t", "rsum", None): 200.0, ("clean", "i2t", "medr", None): 2.0,
                   ("clean", "i2t", "map_at_r", None): 20.0, ("clean", "i2t", "ndcg", 10): 0.5,
                   ("clean", "i2t", "r_precision", None): 30.0})
    assert M.scores(rec, "clean", "i2t", one_positive=False) == {}


def test_a_choice_task_run_is_refused_by_name(tmp_path):
    rec = _record({("clean", "i2t", "accuracy", None): 50.0})
    rec.other["task"] = {"name": "order"}
    with pytest.raises(M.VlbenchError, match="choice-task"):
        M.task_files(str(tmp_path), rec, "org/model")


def test_task_file_records_revision_time_and_vlbench_version(tmp_path):
    rec = _record({("clean", "t2i", "recall", 1): 30.0})
    rec.other["timings"] = {"wall_seconds": 12.5, "stages": {}}
    (tmp_path / "run").mkdir()
    written = M.write(str(tmp_path / "run"), rec, str(tmp_path / "out"), "org/model")
    [path] = [p for p in written if not p.endswith(("model_meta.json", "run_settings.jsonl"))]
    assert {p.rsplit("/", 1)[1] for p in written} >= {"model_meta.json", "run_settings.jsonl"}  # every file it wrote
    doc = json.loads(open(path).read())
    assert (doc["dataset_revision"], doc["evaluation_time"], doc["vlbench"]["version"]) == ("d" * 64, 12.5, "0.1.0")
    settings = json.loads((tmp_path / "out" / "results" / "org__model" / ("a" * 64) / "run_settings.jsonl")
                          .read_text().splitlines()[0])
    assert settings["version"]["vlbench"] == "0.1.0"


def test_main_score_is_binary_ndcg_at_10_and_its_absence_is_noted(monkeypatch):
    without = _record({("clean", "t2i", "recall", 1): 30.0})
    assert M.notes(without) and M.task_files("unused", without, "org/model")[0].doc["scores"]["test"][0][
        "main_score"] is None
    monkeypatch.setattr(M, "_unit_scale", lambda name: 1.0)  # the ranking metrics, as fractions
    with_ndcg = _record({("clean", "t2i", "recall", 1): 30.0, ("clean", "t2i", "ndcg_binary", 10): 0.625})
    [entry] = M.task_files("unused", with_ndcg, "org/model")[0].doc["scores"]["test"]
    assert (entry["main_score"], entry["ndcg_at_10"], M.notes(with_ndcg)) == (0.625, 0.625, [])


@pytest.mark.parametrize("name", ["..", "../../elsewhere", "org/model", "a b:c"])
def test_model_names_never_write_outside_the_output_folder(tmp_path, name):
    rec = _record({("clean", "t2i", "recall", 1): 30.0})
    rec.model.fields["identity"] = {"revision": "../.."}
    (tmp_path / "run").mkdir()
    out = tmp_path / "out"
    for path in M.write(str(tmp_path / "run"), rec, str(out), name):
        assert (out / "results").resolve() in Path(path).resolve().parents
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "run"]
