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


def test_a_language_mean_is_labelled_in_the_clean_table_and_kept_out_of_the_ranking(tmp_path):
    """The clean-retrieval table showed XM3600's mean over languages as plain R@k, and the ranking averaged it with
    the other sets' RSUM; now the row says so and the ranking's mean is over the other sets only."""
    from vlbench.leaderboards.build import make
    from vlbench.leaderboards.paper.ranking import ranking_table

    for m in (0, 1):
        synth_run(tmp_path / "runs" / f"en{m}", model=m)
        xm = synth_run(tmp_path / "runs" / f"xm{m}", model=m, dataset="xm3600-de-fr", dataset_hash="a" * 64,
                       clean_r1=10.0 + 60 * (1 - m))  # model 0 far ahead on the language mean only
        _with_languages(xm, {"de": {"i2t": 51.5, "t2i": 40.25}, "fr": {"i2t": 48.0, "t2i": 39.5}})
    built = make([tmp_path / "runs"], plots=False)
    clean = built.tables["clean_retrieval"]
    flags = {r[0]: r[clean.column("flags")] for r in clean.rows}
    assert flags["xm3600-de-fr"].startswith("language mean: R@k, nDCG and RSUM are the mean over 2 languages (de, fr)")
    assert flags["custom:mini.jsonl"] == ""
    assert "mean over its selected languages" in clean.description
    rank = ranking_table(clean, built.tables["rsum_changes"])
    assert [c.key for c in rank.columns if c.key.startswith("clean_rsum:")] == ["clean_rsum:custom:mini.jsonl"]
    assert [(r[0], r[1]) for r in rank.rows] == [(1, "clip:model-1"), (2, "clip:model-0")]  # English RSUM only
    assert "not one of the datasets averaged here" in rank.description
