"""The multilingual leaderboard table from results.json ``languages`` sections: one column per language over the
table's runs, a blank where a run did not select the language, the run's own mean, and no table without such runs."""

from __future__ import annotations

import csv
import io
import json

from support.synthetic_runs import synth_run


def _with_languages(folder, per_lang: dict) -> None:
    """Add a multilingual set's ``languages`` section (R@1 per language and direction) to a synthetic run."""
    path = folder / "results.json"
    doc = json.loads(path.read_text())
    doc["languages"] = {"selected": list(per_lang), "mean": "the run's values are the mean over these languages",
                        "values": [{"condition": "clean", "language": lang, "direction": d, "metric": "recall",
                                    "k": 1, "value": v[d]} for lang, v in per_lang.items() for d in ("i2t", "t2i")]}
    path.write_text(json.dumps(doc))


def test_languages_are_columns_and_an_unselected_language_is_blank(tmp_path):
    from vlbench.leaderboards import build_leaderboard

    a = synth_run(tmp_path / "runs" / "a", model=0, dataset="xm3600-de-fr", dataset_hash="a" * 64)
    b = synth_run(tmp_path / "runs" / "b", model=1, dataset="xm3600-de-ja", dataset_hash="b" * 64)
    _with_languages(a, {"de": {"i2t": 51.5, "t2i": 40.25}, "fr": {"i2t": 48.0, "t2i": 39.5}})
    _with_languages(b, {"de": {"i2t": 61.0, "t2i": 50.0}, "ja": {"i2t": 33.5, "t2i": 29.75}})
    synth_run(tmp_path / "runs" / "c", model=2)  # an English run: no row
    build_leaderboard([tmp_path / "runs"], tmp_path / "lb")
    text = (tmp_path / "lb" / "multilingual.csv").read_text()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert text.splitlines()[0].startswith("dataset,model,condition,direction,de,fr,ja,mean,languages")
    got = {(r["run_id"], r["direction"]): r for r in rows}
    assert len(rows) == 4
    ra, rb = got[("run-a", "t2i")], got[("run-b", "i2t")]
    assert float(ra["de"]) == 40.25 and float(ra["fr"]) == 39.5 and ra["ja"] == ""
    assert float(rb["ja"]) == 33.5 and rb["fr"] == "" and rb["languages"] == "2"
    assert float(ra["mean"]) == 41.0  # the run's own clean t2i R@1 (synth_run: 40 + 1)


def test_no_multilingual_table_without_multilingual_runs(tmp_path):
    from vlbench.leaderboards import build_leaderboard

    synth_run(tmp_path / "runs" / "a")
    build_leaderboard([tmp_path / "runs"], tmp_path / "lb")
    assert not (tmp_path / "lb" / "multilingual.csv").exists()
