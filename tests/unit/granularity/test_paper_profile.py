"""Granularity profiles (``paper`` / ``per-noun``) and FG pairs matched by image, not by line.

Hand-worked values: each caption's counts are worked out below in comments; the real-caption check
compares the paper profile with the two percentages published in the chapter's results paragraph
("a 21% increase in the number of concept phrases" Flickr30k -> Flickr30k-FG, "a 38% increase in the
number of adjectives per caption" MS-COCO -> MS-COCO-FG).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import pytest
import spacy  # noqa: F401
from support.data import FIXTURES as FIX

from vlbench import registry  # noqa: E402
from vlbench.errors import VlbenchError  # noqa: E402
from vlbench.granularity import caption_features, granularity_report, granularity_table  # noqa: E402
from vlbench.granularity import cli as gcli  # noqa: E402
from vlbench.granularity.features import PROFILES, FeatureOptions, profile_options  # noqa: E402

COCO_X = FIX / "granularity_coco_excerpt.jsonl"
COCO_FG_X = FIX / "granularity_coco_fg_excerpt.jsonl"


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return f"custom:{path}"


# ------------------------------------------------------------------------------------------------
# profiles


def test_profiles_are_named_option_sets():
    assert set(PROFILES) == {"per-caption", "per-noun"}  # the library's; the study adds "paper"
    # the paper reads as the default but for complement phrases (every prepositional phrase)
    assert profile_options("paper") == {**PROFILES["per-caption"], "cp_scope": "caption", "cp_relations": ("prep",)}
    assert registry.granularity_profiles.entry("paper").source == "study:hendriksen2024"
    assert FeatureOptions.from_kwargs(**profile_options("per-noun")) == FeatureOptions()
    paper = FeatureOptions.from_kwargs(**profile_options("paper"))
    assert (paper.np_unit, paper.participles, paper.predicative) == ("caption", True, True)
    assert profile_options(None) == profile_options("per-caption")         # the default profile
    assert profile_options("paper", np_unit="noun", participles=None)["np_unit"] == "noun"  # override
    with pytest.raises(VlbenchError, match="unknown granularity profile"):
        profile_options("table-5.1")
    parser = argparse.ArgumentParser()
    gcli.configure(parser)
    choices = next(a.choices for a in parser._actions if a.dest == "profile")
    assert sorted(choices) == sorted([*PROFILES, "paper"])                # the CLI offers every profile


def test_paper_and_per_noun_readings_by_hand(language):
    texts = ["A crocheted hat.",          # nouns hat; "crocheted" attributive participle; article "A"
             "The dog is brown.",         # nouns dog; "brown" predicative; article "The"
             "Two small dogs in a park."]  # nouns dogs, park; adjective small; CP "in a park"; article a; "Two"
    paper = caption_features(texts, profile="paper")
    noun = caption_features(texts, profile="per-noun")
    # paper: counts per caption, participles and predicative adjectives counted
    assert paper["adjectives"].tolist() == [1, 1, 1]
    assert paper["complement_phrases"].tolist() == [0, 0, 1]
    assert paper["articles"].tolist() == [1, 1, 1]
    assert paper["quantifiers"].tolist() == [0, 0, 1]
    # per-noun: ratios per identified noun, attributive adjectives only
    assert noun["adjectives"].tolist() == [0, 0, pytest.approx(1 / 2)]
    assert noun["complement_phrases"].tolist() == [0, 0, pytest.approx(1 / 2)]
    assert noun["articles"].tolist() == [1, 1, pytest.approx(1 / 2)]
    assert noun["quantifiers"].tolist() == [0, 0, pytest.approx(1 / 2)]
    # caption length and words do not depend on the profile
    for f in ("caption_length", "words_per_caption"):
        assert paper[f].tolist() == noun[f].tolist(), f
    # concept depth: per-noun, the nouns only (hat 9; dog 9; dogs 9, park 9); paper, nouns and verbs:
    # "crocheted" (crochet.v.01, min_depth 4) joins hat -> (9 + 4) / 2; "is" is an auxiliary
    assert noun["concept_depth"].tolist() == [9.0, 9.0, 9.0]
    assert paper["concept_depth"].tolist() == [6.5, 9.0, 9.0]
    # concept diversity: per-noun, distinct content concepts per word (2/3, 2/4, 3/6); paper, distinct
    # concepts among all words, per caption (a crocheted hat: 3; the dog is brown: 4; two small dogs in a
    # park: 6)
    assert noun["concept_diversity"].tolist() == pytest.approx([2 / 3, 2 / 4, 3 / 6])
    assert paper["concept_diversity"].tolist() == [3, 4, 6]


def test_cli_profile_flag_and_override(tmp_path, language, capsys):
    spec = write(tmp_path / "p.jsonl", [{"image": "1.jpg", "captions": ["Two small dogs in a park."]}])

    def table(*flags):
        out = tmp_path / f"o{len(list(tmp_path.iterdir()))}"
        parser = argparse.ArgumentParser()
        gcli.configure(parser)
        assert gcli.main(parser.parse_args(["--dataset", spec, "--out", str(out), "--quiet", *flags])) == 0
        summary = json.loads((out / "granularity_summary.json").read_text())
        return pd.read_csv(out / "granularity.csv", index_col="feature").iloc[:, 0], summary

    t, s = table()
    assert t["adjectives"] == 1.0 and s["profile"] == "per-caption"  # per caption: 1 adjective
    t, s = table("--profile", "per-noun")
    assert t["adjectives"] == 0.5 and s["profile"] == "per-noun"    # 1 adjective / 2 nouns
    t, s = table("--profile", "paper", "--np-unit", "noun")                  # one reading overridden
    assert t["adjectives"] == 0.5 and s["options"]["participles"] is True
    capsys.readouterr()


# ------------------------------------------------------------------------------------------------
# pairing by image


@pytest.mark.slow  # parses a manifest's captions with spaCy (~0.6 s CPU)
def test_reordered_fg_manifest_is_paired_by_image(tmp_path, language):
    fg = rows_of(COCO_FG_X)
    reordered = write(tmp_path / "fg_reordered.jsonl", fg[::-1])  # same images, reversed order
    pair = [(f"custom:{COCO_X.name}", "custom:fg_reordered.jsonl")]
    straight = granularity_report([f"custom:{COCO_X}", f"custom:{COCO_FG_X}"], n_boot=200, seed=3,
                                  pairs=[(f"custom:{COCO_X.name}", f"custom:{COCO_FG_X.name}")])
    rev = granularity_report([f"custom:{COCO_X}", reordered], pairs=pair, n_boot=200, seed=3)
    a, b = straight.differences, rev.differences
    assert a["paired"].all() and b["paired"].all()
    # same images matched whatever the order: identical point estimates and identical intervals
    # (images are sorted by key before resampling, so the seeded resamples are the same)
    for col in ("difference", "ci_low", "ci_high"):
        assert b[col].tolist() == pytest.approx(a[col].tolist(), rel=1e-12, abs=1e-12), col
    per = rev.per_caption
    assert per.loc[per["dataset"] == "custom:fg_reordered.jsonl", "image"].iloc[0] == fg[-1]["image"]


@pytest.mark.slow  # parses two manifests' captions with spaCy (~0.4 s CPU)
def test_unrelated_manifest_is_refused_or_reported_unpaired(tmp_path, language):
    other = [{"image": f"other_{k}.jpg", "captions": r["captions"]} for k, r in enumerate(rows_of(COCO_FG_X))]
    spec = write(tmp_path / "unrelated.jsonl", other)
    pair = [(f"custom:{COCO_X.name}", "custom:unrelated.jsonl")]
    with pytest.raises(VlbenchError) as err:
        granularity_report([f"custom:{COCO_X}", spec], pairs=pair, n_boot=20)
    msg = str(err.value)
    assert "custom:unrelated.jsonl" in msg and "custom:granularity_coco_excerpt.jsonl" in msg
    assert "0 shared" in msg and "20 only in" in msg and "--unpaired" in msg
    rep = granularity_report([f"custom:{COCO_X}", spec], pairs=pair, n_boot=20, pairing="independent")
    assert not rep.differences["paired"].any()
    note = rep.differences_markdown()
    assert "NOT paired" in note and "same images" not in note


def test_folder_prefix_differences_still_pair_by_file_name(tmp_path, language):
    fg = [dict(r, image=f"images/./{r['image']}") for r in rows_of(COCO_FG_X)]
    spec = write(tmp_path / "prefixed.jsonl", fg)
    rep = granularity_report([f"custom:{COCO_X}", spec], n_boot=10,
                             pairs=[(f"custom:{COCO_X.name}", "custom:prefixed.jsonl")])
    assert rep.differences["paired"].all()


# ------------------------------------------------------------------------------------------------
# the published percentages on the real captions (skipped when absent)


@pytest.mark.slow
def test_paper_profile_reproduces_the_published_percentages(shared_captions, language):
    t = granularity_table(["coco", "coco-fg", "flickr30k", "flickr30k-fg"], data_dir=shared_captions,
                          profile="paper")
    adj = 100 * (t.loc["adjectives", "coco-fg"] / t.loc["adjectives", "coco"] - 1)
    cps = 100 * (t.loc["complement_phrases", "flickr30k-fg"] / t.loc["complement_phrases", "flickr30k"] - 1)
    assert abs(adj - 38) <= 3, adj   # measured 38.8
    assert abs(cps - 21) <= 3, cps   # measured 19.2 (every prepositional phrase; 20.6 inside noun phrases)
