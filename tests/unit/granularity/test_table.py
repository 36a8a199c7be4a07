"""Dataset-level granularity: the table, the FG differences with bootstrap CIs, the CLI, bad input.

The dataset means below are worked out by hand from the per-caption counts analysed in
test_granularity_features.py. Tests that need the real caption files skip when they are absent;
the COCO / COCO-FG excerpts (first 20 images of the 5k test set) are committed as fixtures.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pandas as pd
import pytest
import spacy  # noqa: F401
from support.data import FIXTURES as FIX

from vlbench.errors import VlbenchError  # noqa: E402
from vlbench.granularity import FEATURES, caption_features, granularity_report, granularity_table  # noqa: E402
from vlbench.granularity import cli as gcli  # noqa: E402

COCO_X = FIX / "granularity_coco_excerpt.jsonl"
COCO_FG_X = FIX / "granularity_coco_fg_excerpt.jsonl"
BAD = FIX / "granularity_bad_captions.jsonl"

ROWS = ["adjectives", "complement_phrases", "articles", "quantifiers", "concept_depth", "caption_length",
        "words_per_caption", "concept_diversity"]


def write_manifest(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return f"custom:{path}"


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="vlbench granularity")
    gcli.configure(parser)
    return gcli.main(parser.parse_args(argv))


def test_table_means_by_hand(tmp_path, language):
    spec = write_manifest(tmp_path / "m.jsonl", [
        {"image": "1.jpg", "captions": ["A small brown dog with a red collar.", "Two dogs and several cats."]},
        {"image": "2.jpg", "captions": ["An apple and the orange.", "Running quickly."]},
    ])
    # the per-noun profile (the default is "paper", per caption: checked below)
    t = granularity_table([spec], profile="per-noun")
    assert list(t.index) == ROWS and t.index.name == "feature" and list(t.columns) == ["custom:m.jsonl"]
    col = t["custom:m.jsonl"]
    # per caption (see test_granularity_features): nouns 2, 2, 2, 0
    #   adjectives/noun 3/2, 0, 0, undefined -> mean over 3 captions = 0.5
    #   CPs/noun 1/2, 0, 0 -> 1/6; articles/noun 2/2, 0, 2/2 -> 2/3; quantifiers/noun 0, 2/2, 0 -> 1/3
    assert col["adjectives"] == pytest.approx(0.5)
    assert col["complement_phrases"] == pytest.approx(1 / 6)
    assert col["articles"] == pytest.approx(2 / 3)
    assert col["quantifiers"] == pytest.approx(1 / 3)
    # words: 8, 5 (Two dogs and several cats), 5 (An apple and the orange), 2 -> 20/4;
    # characters 36, 26 ("Two dogs and several cats."), 24 ("An apple and the orange."), 16 -> 102/4
    assert col["words_per_caption"] == pytest.approx(20 / 4)
    assert col["caption_length"] == pytest.approx(102 / 4)
    # per-caption counts instead of ratios: adjectives 3, 0, 0, 0 -> 3/4 (the no-noun caption counts 0)
    t2 = granularity_table([spec], profile="per-noun", np_unit="caption")
    assert t2.loc["adjectives", "custom:m.jsonl"] == pytest.approx(3 / 4)
    # the default (paper) profile reads per caption: CPs 1, 0, 0, 0; articles 2, 0, 2, 0; quantifiers
    # (numerals only: "Two", not "several") 0, 1, 0, 0 (no participle or predicative adjective here, so
    # adjectives stay 3/4)
    t3 = granularity_table([spec])
    col3 = t3["custom:m.jsonl"]
    assert (col3["adjectives"], col3["complement_phrases"], col3["articles"], col3["quantifiers"]) == \
        pytest.approx((3 / 4, 1 / 4, 4 / 4, 1 / 4))
    assert granularity_table([spec], profile="paper").equals(t3)
    with pytest.raises(VlbenchError, match="unknown granularity profile 'pape'"):
        granularity_table([spec], profile="pape")
    assert t.attrs["captions"]["custom:m.jsonl"]["n_without_noun"] == 1


def test_bad_captions_do_not_crash_and_are_reported(tmp_path, language):
    out = tmp_path / "out"
    assert run_cli(["--dataset", f"custom:{BAD}", "--out", str(out), "--quiet"]) == 0
    table = pd.read_csv(out / "granularity.csv")
    assert list(table.columns) == ["feature", "custom:granularity_bad_captions.jsonl"]
    assert list(table["feature"]) == ROWS
    summary = json.loads((out / "granularity_summary.json").read_text())
    rep = summary["captions"]["custom:granularity_bad_captions.jsonl"]
    # 9 captions: "", "   ", Chinese, Arabic and emoji-only are excluded (5); 4 are analysed,
    # one of them ("Running quickly.") without a noun
    assert (rep["n_captions"], rep["n_excluded"], rep["n_analysed"], rep["n_without_noun"]) == (9, 5, 4, 1)
    excluded = pd.read_csv(out / "granularity_excluded.csv", keep_default_na=False)
    assert len(excluded) == 5
    assert sorted(excluded["caption_id"]) == ["a.jpg#1", "a.jpg#2", "b.jpg#0", "b.jpg#1", "b.jpg#2"]
    # words over the 4 analysed captions: "A black dog on a red sofa." 7, "Two cats sleeping on a bed." 6,
    # "Running quickly." 2, "A dog 🐶 on a sofa." 5 (the emoji is not a word) -> 20/4 = 5
    assert table.set_index("feature").iloc[:, 0]["words_per_caption"] == pytest.approx(5.0)


def test_fg_pair_differences_with_seeded_bootstrap(tmp_path, language):
    rep = granularity_report([f"custom:{COCO_X}", f"custom:{COCO_FG_X}"],
                             pairs=[("custom:granularity_coco_excerpt.jsonl",
                                     "custom:granularity_coco_fg_excerpt.jsonl")], n_boot=300, seed=7)
    d = rep.differences.set_index("feature")
    assert list(d.index) == ROWS
    assert d["paired"].all()                             # same 20 images in both files
    for f in ROWS:
        a, b = rep.table.iloc[:, 0][f], rep.table.iloc[:, 1][f]
        assert d.loc[f, "difference"] == pytest.approx(b - a)
        assert d.loc[f, "ci_low"] <= d.loc[f, "ci_high"]
    # the FG captions add words: 20 images x 5 captions, FG mean words > original mean words
    assert d.loc["words_per_caption", "difference"] > 0
    again = granularity_report([f"custom:{COCO_X}", f"custom:{COCO_FG_X}"],
                               pairs=[("custom:granularity_coco_excerpt.jsonl",
                                       "custom:granularity_coco_fg_excerpt.jsonl")], n_boot=300, seed=7)
    pd.testing.assert_frame_equal(rep.differences, again.differences)  # seeded: identical


def test_cli_writes_table_differences_and_per_caption_values(tmp_path, language, capsys):
    out = tmp_path / "g"
    rc = run_cli(["--dataset", f"custom:{COCO_X}", f"custom:{COCO_FG_X}", "--out", str(out),
                  "--pair", "custom:granularity_coco_excerpt.jsonl,custom:granularity_coco_fg_excerpt.jsonl",
                  "--bootstrap", "200", "--quiet"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "| Adjectives |" in printed and "difference" in printed
    for name in ("granularity.csv", "granularity.md", "granularity_diff.csv", "granularity_diff.md",
                 "granularity_captions.csv", "granularity_excluded.csv", "granularity_summary.json"):
        assert (out / name).is_file(), name
    per = pd.read_csv(out / "granularity_captions.csv")
    assert len(per) == 200 and set(FEATURES) <= set(per.columns)
    table = pd.read_csv(out / "granularity.csv", index_col="feature")
    means = per[per["status"] == "ok"].groupby("dataset")["words_per_caption"].mean()
    assert table.loc["words_per_caption"].to_dict() == pytest.approx(means.to_dict())


def test_feature_flags_reach_the_features(tmp_path, language):
    spec = write_manifest(tmp_path / "p.jsonl", [{"image": "1.jpg", "captions": ["The dog is brown."]}])
    out = tmp_path / "o"
    assert run_cli(["--dataset", spec, "--out", str(out), "--quiet", "--predicative", "--length-unit", "words"]) == 0
    t = pd.read_csv(out / "granularity.csv", index_col="feature").iloc[:, 0]
    # "The dog is brown." with predicative adjectives: 1 adjective / 1 noun; length in words: 4
    assert t["adjectives"] == 1.0 and t["caption_length"] == 4.0
    summary = json.loads((out / "granularity_summary.json").read_text())
    assert summary["options"]["predicative"] is True


def test_unknown_dataset_and_bad_options_are_clear_errors(tmp_path):
    from vlbench.errors import VlbenchError

    with pytest.raises(VlbenchError):
        granularity_table([f"custom:{tmp_path / 'missing.jsonl'}"])
    with pytest.raises(VlbenchError, match="unknown granularity option"):
        granularity_table([f"custom:{COCO_X}"], adjective_rule="x")


def test_caption_features_order_and_duplicates(language):
    df = caption_features(["A dog.", "A dog.", "", "Two cats."])
    assert list(df["status"]) == ["ok", "ok", "excluded", "ok"]
    assert df["n_nouns"].tolist()[:2] == [1, 1] and df["quantifiers"][3] == 1.0


# ------------------------------------------------------------------------------------------------
# the real caption files (skipped when absent)


def test_builtin_datasets_without_images(shared_captions, language, tmp_path, monkeypatch):
    monkeypatch.setenv("VLBENCH_DATA_DIR", str(tmp_path / "no-images-here"))
    t = granularity_table(["flickr30k", "flickr30k-fg"], data_dir=shared_captions, limit=60)
    assert list(t.columns) == ["flickr30k", "flickr30k-fg"] and list(t.index) == ROWS
    assert t.notna().all().all()
    # FG captions are the originals with details added: more words on average
    assert t.loc["words_per_caption", "flickr30k-fg"] > t.loc["words_per_caption", "flickr30k"]
    assert not any(p.suffix == ".jpg" for p in tmp_path.rglob("*"))


def test_builtin_fg_pair_is_compared_automatically(shared_captions, language):
    rep = granularity_report(["coco", "coco-fg"], data_dir=shared_captions, limit=50, n_boot=50)
    assert rep.differences is not None and set(rep.differences["pair"]) == {"coco-fg - coco"}
    assert bool(rep.differences["paired"].all())
    assert not math.isnan(rep.differences.set_index("feature").loc["caption_length", "ci_low"])
