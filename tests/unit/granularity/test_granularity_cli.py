"""Reliability of ``vlbench granularity``: impossible --ci values, --out naming a file, a
negative --seed with --pair, and --pair written as in --dataset, all checked before any caption is parsed.

The commands go through ``vlbench.cli.main`` (the real entry point: exit status 2 and a message, no
traceback).
"""

from __future__ import annotations

import pandas  # noqa: F401
import pytest
from support.data import FIXTURES as FIX

from vlbench import cli  # noqa: E402
from vlbench.errors import VlbenchError  # noqa: E402
from vlbench.granularity import table as gtable  # noqa: E402
from vlbench.granularity.pairing import resolve_pairs  # noqa: E402

COCO_X = FIX / "granularity_coco_excerpt.jsonl"
COCO_FG_X = FIX / "granularity_coco_fg_excerpt.jsonl"


@pytest.fixture
def no_parsing(monkeypatch):
    """Any caption analysis fails the test: the refusals must come before it."""
    def boom(*a, **k):
        raise AssertionError("captions were analysed before the refusal")

    monkeypatch.setattr(gtable, "analyse_texts", boom)


def run(tmp_path, *extra, out=None):
    return cli.main(["granularity", "--dataset", f"custom:{COCO_X}", f"custom:{COCO_FG_X}", "--quiet",
                     "--bootstrap", "10", "--out", str(out or tmp_path / "out"), *extra])


@pytest.mark.parametrize("ci", ["1.5", "0", "1", "-0.2", "nan"])
def test_impossible_confidence_levels_are_refused(tmp_path, capsys, no_parsing, ci):
    assert run(tmp_path, "--ci", ci) == 2
    err = capsys.readouterr().err
    assert f"--ci {float(ci)}" in err and "strictly between 0 and 1" in err and "--ci 0.95" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_out_naming_a_file_is_a_clear_error(tmp_path, capsys, no_parsing):
    f = tmp_path / "results.txt"
    f.write_text("keep me\n")
    assert run(tmp_path, out=f) == 2
    err = capsys.readouterr().err
    assert f"--out '{f}' is a file, not a folder" in err and "give --out a folder" in err
    assert run(tmp_path, out=f / "sub") == 2
    assert "which is a file" in capsys.readouterr().err
    assert f.read_text() == "keep me\n"


def test_a_negative_seed_with_pair_reports_the_seed(tmp_path, capsys, no_parsing):
    # the pair names datasets that were not requested: the seed is still the first thing reported
    assert run(tmp_path, "--seed", "-3", "--pair", "coco,coco-fg") == 2
    err = capsys.readouterr().err
    assert "--seed -3 is not a valid bootstrap seed" in err and "pair" not in err


def test_a_pair_that_was_not_requested_is_refused_before_parsing(tmp_path, capsys, no_parsing):
    assert run(tmp_path, "--pair", "flickr30k,flickr30k-fg") == 2
    err = capsys.readouterr().err
    assert "pair 'flickr30k,flickr30k-fg' names a dataset that was not requested" in err
    assert f"custom:{COCO_X}" in err  # the requested datasets, written as --dataset took them


def test_pair_accepts_the_dataset_strings(tmp_path):
    loaded = [("flickr30k", None, "flickr30k"), ("flickr30k-fg", None, "flickr30k-fg"),
              ("custom:granularity_coco_excerpt.jsonl", None, f"custom:{COCO_X}"),
              ("custom:granularity_coco_fg_excerpt.jsonl", None, str(COCO_FG_X))]
    assert resolve_pairs([("flickr30k", "flickr30k-fg")], loaded) == [("flickr30k", "flickr30k-fg")]
    want = [("custom:granularity_coco_excerpt.jsonl", "custom:granularity_coco_fg_excerpt.jsonl")]
    # as given to --dataset, by the table's name, or by another path to the same manifest
    assert resolve_pairs([(f"custom:{COCO_X}", str(COCO_FG_X))], loaded) == want
    assert resolve_pairs([("custom:granularity_coco_excerpt.jsonl", f"custom:{COCO_FG_X}")], loaded) == want
    other = f"custom:{COCO_X.parent}/../fixtures/{COCO_X.name}"
    assert resolve_pairs([(other, str(COCO_FG_X))], loaded) == want
    with pytest.raises(VlbenchError, match="names the same dataset twice"):
        resolve_pairs([("flickr30k", "flickr30k")], loaded)


def test_pair_written_as_in_dataset_runs_end_to_end(tmp_path, capsys, language):
    assert run(tmp_path, "--limit", "5", "--pair", f"custom:{COCO_X},custom:{COCO_FG_X}") == 0
    diff = (tmp_path / "out" / "granularity_diff.csv").read_text()
    assert "custom:granularity_coco_fg_excerpt.jsonl - custom:granularity_coco_excerpt.jsonl" in diff


def test_the_new_readings_have_flags_that_override_the_profile(tmp_path, language):
    import json

    assert run(tmp_path, "--limit", "2", "--bootstrap", "0", "--cp-scope", "noun", "--quantifier-set", "all",
               "--depth-pos", "NOUN", "--diversity", "synonyms") == 0
    summary = json.loads((tmp_path / "out" / "granularity_summary.json").read_text())
    o = summary["options"]
    assert (o["cp_scope"], o["quantifier_set"], o["depth_pos"], o["diversity"]) == ("noun", "all", ["NOUN"], "synonyms")
    assert o["np_unit"] == "caption" and summary["profile"] == "per-caption"  # the rest of the default profile stays
