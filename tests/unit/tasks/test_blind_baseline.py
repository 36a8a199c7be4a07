"""The blind (text-only) baseline checks overlap with its training text by content, not by name,
and says on the console when it is unavailable or left captions out."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from vlbench.tasks.blind import SUGARCREPE_TEST_IMAGES, BigramLM, blind_baseline, coco_image_id, normalized
from vlbench.tasks.choice import ChoiceItem, evaluate_text_only

SHARED_DATA = Path("/work/shared/data")
COCO = SHARED_DATA / "captions" / "coco5k_test.jsonl"


@pytest.fixture(scope="module")
def coco_rows():
    if not COCO.is_file():
        pytest.skip(f"the COCO test captions are not at {COCO}")
    return [json.loads(x) for x in COCO.read_text(encoding="utf-8").splitlines() if x.strip()]


def test_normalized_ignores_case_punctuation_and_spacing():
    assert normalized("A man  riding a WAVE, on a surfboard.") == "a man riding a wave on a surfboard"
    assert normalized("Two dogs' toys") == normalized("two dogs toys")


def test_pinned_sugarcrepe_images_equal_the_files(coco_rows):
    folder = SHARED_DATA / "sugarcrepe"
    if not (folder / "add_att.json").is_file():
        pytest.skip(f"the SugarCrepe files are not at {folder}")
    used = {coco_image_id(r["filename"]) for s in ("add_att", "add_obj", "replace_att", "replace_obj", "replace_rel",
                                                   "swap_att", "swap_obj")
            for r in json.loads((folder / f"{s}.json").read_text()).values()}
    test = {coco_image_id(r["image"]) for r in coco_rows}
    assert SUGARCREPE_TEST_IMAGES == used & test and len(SUGARCREPE_TEST_IMAGES) == 183


def _swap_middle(caption: str) -> str:
    w = caption.split()
    i = len(w) // 2
    w[i - 1], w[i] = w[i], w[i - 1]
    return " ".join(w)


def _order_like_items(captions):
    """2-way items: each caption against it with its two middle words swapped (an order item without spaCy)."""
    return [ChoiceItem(f"c{i}", f"img{i}", (c, _swap_middle(c)), 0, ("original", "swapped"))
            for i, c in enumerate(captions)]


@pytest.mark.slow  # trains the blind baseline on real caption files (~0.7 s CPU)
def test_custom_named_coco_captions_are_left_out_of_training(coco_rows):
    """60 COCO test captions under any name: exactly the training captions equal to an evaluated candidate
    are left out (counted independently here), and the accuracy is that of a model trained on the rest."""
    captions = [c for r in coco_rows[100:112] for c in r["captions"]]
    items = _order_like_items(captions)
    notes = []
    got = blind_baseline("order", {"task:order": items}, SHARED_DATA, seed=0, note=notes.append)
    cands = {normalized(c) for it in items for c in it.candidates}
    every = [c for r in coco_rows for c in r["captions"]]
    rest = [c for c in every if normalized(c) not in cands]
    assert len(every) == 25000 and len(every) - len(rest) >= 60
    assert got["available"] and got["excluded_captions_by_content"] == len(every) - len(rest)
    assert got["training_captions"] == len(rest) and got["source_captions"] == len(every)
    expected = evaluate_text_only(items, BigramLM(rest), seed=0).accuracy
    assert got["sets"]["task:order"]["accuracy"] == pytest.approx(expected)
    leaky = evaluate_text_only(items, BigramLM(every), seed=0).accuracy
    # trained on the items themselves, the "blind" model looked better than it is: 59 vs 55 of 60 right
    assert (leaky, expected) == (pytest.approx(100 * 59 / 60), pytest.approx(100 * 55 / 60))
    assert notes == [f"blind (text-only) baseline: {len(every) - len(rest)} of its 25,000 training captions "
                     "(COCO test) equal captions of the evaluated items and were left out of its training text"]


def test_evaluating_the_training_text_itself_is_refused(coco_rows):
    """All 25,000 COCO test captions evaluated (the order task on coco under any name): no blind baseline."""
    items = _order_like_items([c for r in coco_rows for c in r["captions"]])
    notes = []
    got = blind_baseline("order", {"task:order": items}, SHARED_DATA, note=notes.append)
    assert got["available"] is False and "sets" not in got
    assert got["why"].startswith("25,000 of its 25,000 training captions (COCO test) are captions of the evaluated "
                                 "items (checked by content)")
    assert notes == [f"blind (text-only) baseline unavailable: {got['why']}"]


def test_order_run_on_custom_named_coco_manifest(counting_plugin, coco_rows, tmp_path, capsys):
    """The issue's case end to end: COCO test captions in a custom manifest named 'my-set'."""
    from support.data import write_images

    from vlbench.cli import main

    rows = coco_rows[200:206]
    names = write_images(tmp_path / "d" / "images", len(rows))
    manifest = tmp_path / "d" / "m.jsonl"
    manifest.write_text("".join(json.dumps({"image": f"images/{n}", "captions": r["captions"]}) + "\n"
                                for n, r in zip(names, rows)))
    rc = main(["run", "--task", "order", "--model", "counting", "--dataset", f"custom:{manifest}",
               "--dataset-name", "my-set", "--data-dir", str(SHARED_DATA), "--num-workers", "0",
               "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 0, err
    doc = json.loads((tmp_path / "r" / "results.json").read_text())
    info = doc["task"]["blind_baseline"]
    per_item = {r["item_id"] for r in _per_item_rows(tmp_path / "r")}
    assert info["available"] and info["excluded_captions_by_content"] >= len(per_item) > 0
    assert "overlap_rule" in info
    assert f"{info['excluded_captions_by_content']} of its 25,000 training captions" in err


def test_unavailable_baseline_is_said_on_the_console(counting_plugin, manifest, tmp_path, capsys):
    from vlbench.cli import main

    empty = tmp_path / "no-data"
    empty.mkdir()
    rc = main(["run", "--task", "order", "--model", "counting", "--dataset", f"custom:{manifest}",
               "--data-dir", str(empty), "--num-workers", "0", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 0 and "note: blind (text-only) baseline unavailable: the blind baseline's training captions" in err


def test_the_missing_blind_training_file_is_named_with_where_it_was_looked_for(tmp_path):
    """It said "pass --data-dir" to a Winoground run that had passed it: the file is the coco set's captions,
    looked for in the data folder, and the fix names the file, the folder and the command."""
    from vlbench.errors import DataError
    from vlbench.tasks.blind import coco_caption_lm

    with pytest.raises(DataError) as err:
        coco_caption_lm(tmp_path, set())
    msg, hint = err.value.message, err.value.hint
    assert "(coco5k_test.jsonl: the captions of vlbench's coco retrieval set" in msg and "not a file of the task" in msg
    assert f"not in {tmp_path} nor in {tmp_path / 'captions'}" in msg
    assert f"vlbench download coco --captions-only --data-dir {tmp_path}" in hint and "pass --data-dir" not in hint


def _per_item_rows(out: Path) -> list[dict]:
    import gzip

    import pandas as pd

    with gzip.open(out / "per_item.csv.gz", "rt") as fh:
        return pd.read_csv(fh).to_dict("records")


def test_sugarcrepe_training_text_does_not_depend_on_files_present(coco_rows):
    """The SugarCrepe exclusion is the pinned id set: a candidate set with no overlap leaves out just the
    captions of those 183 images."""
    items = [ChoiceItem("x", "000000000001.jpg", ("zzz qqq", "qqq zzz"), 0, ("positive", "negative"))]
    got = blind_baseline("sugarcrepe", {"task:sugarcrepe:swap_obj": items}, SHARED_DATA)
    kept = [c for r in coco_rows if coco_image_id(r["image"]) not in SUGARCREPE_TEST_IMAGES for c in r["captions"]]
    assert got["excluded_images"] == 183 and got["training_captions"] == len(kept)
    assert got["excluded_captions_by_content"] == 0
    assert re.match(r"^[0-9a-f]{64}$", got["source_sha256"]) and np.isfinite(got["sets"]["task:sugarcrepe:swap_obj"]
                                                                                ["accuracy"])
