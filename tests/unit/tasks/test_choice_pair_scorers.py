"""Choice sets scored by a pair scorer (``vlbench run --task winoground --model blip-itm:...``): tiny random-weight
BLIP and BLIP-2 ITM models of the real transformers classes, loaded through vlbench's own path; every recorded
score equals a recomputation from a plain loop that calls the model's own forward per (image, caption) pair as
the model cards show (softmax of the ITM logits, index 1) and applies the sets' rules here (strict: a tie is a
miss). Scores agree within 1e-5 (float32 in another order: vlbench batches pairs and pads texts); every
comparison the fixtures make has a margin far above that, checked, so no flag can flip between the two paths."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from PIL import Image
from support.tiny_pair_models import SAVERS

from vlbench.cli import main
from vlbench.errors import VlbenchError
from vlbench.tasks.choice import ChoiceItem, PairScores, evaluate_choice
from vlbench.tasks.pair_run import needed_pairs
from vlbench.tasks.run import run_task
from vlbench.tasks.sets.winoground import WinogroundItem, evaluate_winoground

ATOL = 1e-5
MARGIN = 1e-4  # the smallest score difference a fixture's comparison may have (ten times ATOL)
WINO = [("a man riding horse on the beach", "a horse riding man on the beach"),
        ("a red car near a blue bus", "a blue car near a red bus"),
        ("two dogs play in the snow", "the snow play in two dogs"),
        ("a woman with an umbrella near a building", "a building with an umbrella near a woman"),
        ("a cat sits on the mat", "the mat sits on a cat"),
        ("a very long bus parked near a car", "a car parked near a very long bus")]
WHATSUP = [("cat_on_mat", ["a cat on the mat", "a cat near the mat", "a cat in the mat", "a mat on the cat"]),
           ("car_near_bus", ["a car near the bus", "a car on the bus", "a car in the bus", "a bus near the car"]),
           ("dog_in_snow", ["a dog in the snow", "a dog on the snow", "a dog near the snow", "the snow in a dog"])]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("choice-pair-models")
    return {family: save(root / family) for family, save in SAVERS.items()}


def _noise(path: Path, seed: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (28, 36, 3), dtype=np.uint8)).save(path)


@pytest.fixture
def data_dir(tmp_path):
    """Winoground (examples.jsonl + images/, the released layout) and What'sUp Controlled A (its JSON file +
    controlled_images/), with noise images that differ per key."""
    root = tmp_path / "data"
    wino = root / "winoground"
    lines = []
    for k, (c0, c1) in enumerate(WINO):
        lines.append(json.dumps({"id": k, "image_0": f"ex_{k}_img_0", "image_1": f"ex_{k}_img_1", "caption_0": c0,
                                 "caption_1": c1, "tag": ("Object", "Relation")[k % 2], "secondary_tag": "",
                                 "num_main_preds": 1, "collapsed_tag": "Object"}))
        for j in (0, 1):
            _noise(wino / "images" / f"ex_{k}_img_{j}.png", 10 * k + j)
    (wino / "examples.jsonl").write_text("\n".join(lines) + "\n")
    from vlbench.tasks.sets.whatsup import SUBSETS

    up = root / "whatsup"
    rows = [{"image_path": f"data/controlled_images/{name}.png", "caption_options": opts} for name, opts in WHATSUP]
    up.mkdir(parents=True)
    (up / SUBSETS["controlled_a"].file).write_text(json.dumps(rows))
    for k, (name, _) in enumerate(WHATSUP):
        _noise(up / "controlled_images" / f"{name}.png", 100 + k)
    return root


class CardLoop:
    """The model card's use of an ITM model, one pair per forward: processor(images=, text=), the ITM head's two
    logits, softmax, index 1 ("match")."""

    def __init__(self, family: str, folder: Path):
        self.family = family
        cls = "BlipForImageTextRetrieval" if family == "blip-itm" else "Blip2ForImageTextRetrieval"
        self.model = getattr(transformers, cls).from_pretrained(folder).eval()
        self.processor = transformers.AutoProcessor.from_pretrained(folder)

    def __call__(self, image_path: Path, text: str) -> float:
        inputs = self.processor(images=Image.open(image_path).convert("RGB"), text=text, return_tensors="pt")
        with torch.no_grad():
            if self.family == "blip-itm":
                logits = self.model(**inputs, use_itm_head=True).itm_score
            else:
                logits = self.model(**inputs, use_image_text_matching_head=True).logits_per_image
        return float(torch.softmax(logits, dim=1)[0, 1])


def _per_item(out: Path) -> dict:
    with gzip.open(out / "per_item.csv.gz", "rt") as fh:
        return {(r["condition"], r["item_id"]): r for r in csv.DictReader(fh)}


def _values(out: Path, condition: str) -> dict:
    doc = json.loads((out / "results.json").read_text())
    return {r["metric"]: r["value"] for r in doc["results"] if r["condition"] == condition}


def _strict(a: float, b: float) -> bool:
    """``a > b`` (a tie is a miss). An exact tie is kept (two captions the tokenizer reads alike get one score on
    both paths); any other comparison must have a margin no float32 summation order can cross."""
    assert a == b or abs(a - b) > MARGIN, f"the fixture has a near tie ({a} vs {b}): no test of the rule"
    return a > b


@pytest.mark.parametrize("family", sorted(SAVERS))
def test_winoground_run_with_an_itm_scorer_equals_the_model_card_loop(family, folders, data_dir, tmp_path):
    out = tmp_path / "run"
    assert main(["run", "--task", "winoground", "--model", f"{family}:{folders[family]}", "--data-dir", str(data_dir),
                 "--out", str(out), "--no-cache", "--num-workers", "0", "--quiet", "--batch-size", "3"]) == 0
    card = CardLoop(family, folders[family])
    rows = _per_item(out)
    flags = []
    for k, (c0, c1) in enumerate(WINO):
        imgs = [data_dir / "winoground" / "images" / f"ex_{k}_img_{j}.png" for j in (0, 1)]
        s = np.array([[card(i, c) for i in imgs] for c in (c0, c1)])  # s[i, j] = s(caption i, image j)
        got = json.loads(rows[("task:winoground", str(k))]["scores"])
        np.testing.assert_allclose(got, [s[0, 0], s[1, 0], s[0, 1], s[1, 1]], rtol=0, atol=ATOL)
        text = _strict(s[0, 0], s[1, 0]) and _strict(s[1, 1], s[0, 1])  # Thrush et al. 2022
        image = _strict(s[0, 0], s[0, 1]) and _strict(s[1, 1], s[1, 0])
        flags.append((text, image, text and image))
    f = np.array(flags, dtype=float) * 100
    v = _values(out, "task:winoground")
    assert v["text_score"] == pytest.approx(f[:, 0].mean()) and v["image_score"] == pytest.approx(f[:, 1].mean())
    assert v["accuracy"] == pytest.approx(f[:, 2].mean())
    assert np.ptp(f[:, :2]) > 0  # items differ: the scores are not all 0 or all 100
    doc = json.loads((out / "results.json").read_text())
    assert doc["model"]["kind"] == "pair" and doc["model"]["identity"]["kind"] == "pair-scorer"
    assert doc["model"]["identity"]["model_class"].endswith("ForImageTextRetrieval")
    enc = doc["encoding"]
    # each image encoded once, each distinct pair scored once: 6 items x 2 images, 6 x 4 pairs
    assert enc["kind"] == "pair" and enc["images_encoded"] == 12 and enc["pairs_scored"] == 24


def test_whatsup_controlled_a_with_blip_itm_picks_by_the_pair_scores(folders, data_dir, tmp_path):
    out = tmp_path / "up"
    res = run_task(task="whatsup", model=f"blip-itm:{folders['blip-itm']}", dataset="whatsup:controlled_a",
                   data_dir=str(data_dir), out=str(out), no_cache=True, quiet=True, num_workers=0)
    card = CardLoop("blip-itm", folders["blip-itm"])
    rows = _per_item(out)
    right = []
    for name, opts in WHATSUP:
        s = [card(data_dir / "whatsup" / "controlled_images" / f"{name}.png", t) for t in opts]
        (row,) = [r for (c, _), r in rows.items() if c == "task:whatsup:controlled_a" and name in r["image"]]
        np.testing.assert_allclose(json.loads(row["scores"]), s, rtol=0, atol=ATOL)
        right.append(all(_strict(s[0], x) for x in s[1:]))  # the first option strictly above every other
        assert int(row["correct"]) == right[-1]
    assert _values(out, "task:whatsup:controlled_a")["accuracy"] == pytest.approx(100 * np.mean(right))
    assert res.results["model"]["hash"] and "pair" in res.results["task"]["rule"]


def test_a_pair_score_tie_is_a_miss_in_every_shape():
    items = [ChoiceItem("0", "i.png", ("right", "wrong")), ChoiceItem("1", "i.png", ("right", "other"))]
    s = PairScores({("i.png", "right"): 1.0, ("i.png", "wrong"): 1.0, ("i.png", "other"): 0.5})
    res = evaluate_choice(items, s, None)
    assert [r.correct for r in res.records] == [False, True] and res.accuracy == 50.0
    w = [WinogroundItem("0", ("a.png", "b.png"), ("x", "y"))]
    ties = PairScores({("a.png", "x"): 1.0, ("a.png", "y"): 0.2, ("b.png", "x"): 0.2, ("b.png", "y"): 0.2})
    r = evaluate_winoground(w, ties, None).records[0]
    assert (r.text, r.image_ok, r.group) == (False, False, False)  # s(y, b) ties s(x, b) and s(y, a)
    with pytest.raises(VlbenchError, match="no pair scorer score"):
        evaluate_choice([ChoiceItem("2", "j.png", ("right", "wrong"))], s, None)
    with pytest.raises(VlbenchError, match="text embeddings"):
        evaluate_choice(items, s, {"right": np.ones(2)})


def test_needed_pairs_are_each_items_images_times_its_candidates_once():
    items = [WinogroundItem("0", ("a", "b"), ("x", "y")), WinogroundItem("1", ("a", "c"), ("y", "z"))]
    assert needed_pairs({"s": items, "t": [ChoiceItem("2", "a", ("x", "w"))]}) == {
        "a": ["x", "y", "z", "w"], "b": ["x", "y"], "c": ["y", "z"]}


def test_a_caption_condition_rescores_only_the_changed_pairs_from_the_cache(folders, data_dir, tmp_path):
    spec = f"blip-itm:{folders['blip-itm']}"
    common = dict(task="winoground", model=spec, data_dir=str(data_dir), cache_dir=str(tmp_path / "cache"),
                  quiet=True, num_workers=0)
    clean = run_task(out=str(tmp_path / "clean"), **common).results["encoding"]
    assert clean["pairs_scored"] == clean["distinct_pairs"] == 24 and clean["pairs_from_cache"] == 0
    typo = run_task(out=str(tmp_path / "typos"), perturb="char-swap", **common)
    enc = typo.results["encoding"]
    # the clean pairs come from the cache; only the pairs of changed captions are scored
    assert enc["pairs_from_cache"] == 24 and enc["pairs_scored"] == enc["distinct_pairs"] - 24 > 0
    assert set(typo.evaluations) == {"task:winoground", "task:winoground@char-swap"}
    again = run_task(out=str(tmp_path / "again"), perturb="char-swap", **common)
    assert again.results["encoding"]["pairs_scored"] == 0 and again.results["encoding"]["model_loaded"] is False
    # the cached scores are the model's, bit for bit: the warm run's values equal the cold run's
    assert again.results["results"] == typo.results["results"]
    clean_rows, typo_rows = _per_item(tmp_path / "clean"), _per_item(tmp_path / "typos")
    for (cond, item), row in clean_rows.items():
        assert typo_rows[(cond, item)]["scores"] == row["scores"]
    flips = [r for (c, _), r in typo_rows.items() if c.endswith("@char-swap")]
    assert {r["flip"] for r in flips} <= {"", "hit_to_miss", "miss_to_hit"} and len(flips) == len(WINO)


def test_a_pair_scorer_is_refused_where_the_set_needs_text_embeddings_or_image_conditions(folders, data_dir,
                                                                                          tmp_path):
    spec = f"blip-itm:{folders['blip-itm']}"
    with pytest.raises(VlbenchError, match="TOT") as err:
        run_task(task="sugarcrepe++", model=spec, data_dir=str(data_dir), out=str(tmp_path / "a"), quiet=True)
    assert "dual encoder" in err.value.hint
    with pytest.raises(VlbenchError, match="--perturb-images"):
        run_task(task="winoground", model=spec, data_dir=str(data_dir), out=str(tmp_path / "b"), quiet=True,
                 perturb_images="gaussian_noise:1")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()  # refused before any output


MMVP = [("Color", "a red car near a building", "a blue car near a building"),
        ("Quantity", "two dogs play in the snow", "a dog play in the snow"),
        ("Spatial", "a cat sits on the mat", "a cat sits near the mat"),
        ("State", "a man riding a horse", "a man with a horse")]


def test_mmvp_with_blip_itm_equals_the_papers_rules_on_the_model_card_scores(folders, tmp_path):
    from support.aro_mmvp import mmvp_rules, noise_image, write_mmvp

    root = write_mmvp(tmp_path / "data", MMVP)
    for k, (kind, _, _) in enumerate(MMVP):
        for q in (2 * k + 1, 2 * k + 2):
            noise_image(root / "MLLM_VLM Images" / kind / f"{q}.jpg", 40 + q)
    out = tmp_path / "mmvp"
    run_task(task="mmvp", model=f"blip-itm:{folders['blip-itm']}", data_dir=str(tmp_path / "data"), out=str(out),
             no_cache=True, quiet=True, num_workers=0)
    card = CardLoop("blip-itm", folders["blip-itm"])
    rows = _per_item(out)
    flags = []
    for k, (kind, s1, s2) in enumerate(MMVP):
        imgs = [root / "MLLM_VLM Images" / kind / f"{q}.jpg" for q in (2 * k + 1, 2 * k + 2)]
        # the authors' prompt before each statement, as the set's model reads it
        s = np.array([[card(i, f"a photo of {t}") for i in imgs] for t in (s1, s2)])
        got = json.loads(rows[("task:mmvp", str(2 * k + 1))]["scores"])
        np.testing.assert_allclose(got, [s[0, 0], s[1, 0], s[0, 1], s[1, 1]], rtol=0, atol=ATOL)
        for a, b in ((s[0, 0], s[0, 1]), (s[1, 1], s[1, 0]), (s[0, 0], s[1, 0]), (s[1, 1], s[0, 1])):
            _strict(a, b)
        flags.append(mmvp_rules(s))
    f = np.array(flags, dtype=float) * 100
    v = _values(out, "task:mmvp")
    assert v["accuracy"] == pytest.approx((f[:, 0] * f[:, 1] / 100).mean())
    assert v["statement_accuracy"] == pytest.approx(f[:, :2].mean())
    assert v["i2t_pair_accuracy"] == pytest.approx(f[:, 2].mean())


def test_bivlc_with_blip_itm_scores_both_directions_from_the_model_card_scores(folders, tmp_path):
    from support.pair_sets import BIVLC_CAPTIONS, noise_png, write_bivlc

    write_bivlc(tmp_path / "data")
    out = tmp_path / "bivlc"
    run_task(task="bivlc", model=f"blip-itm:{folders['blip-itm']}", data_dir=str(tmp_path / "data"), out=str(out),
             no_cache=True, quiet=True, num_workers=0)
    card = CardLoop("blip-itm", folders["blip-itm"])
    rows = _per_item(out)
    flags = []
    for k, (c0, c1, _) in enumerate(BIVLC_CAPTIONS):
        imgs = []
        for j in (0, 1):  # I0 = image, I1 = negative_image, written as the set's files hold them
            imgs.append(tmp_path / f"probe_{k}_{j}.png")
            imgs[-1].write_bytes(noise_png(2 * k + j))
        s = np.array([[card(i, c) for i in imgs] for c in (c0, c1)])
        np.testing.assert_allclose(json.loads(rows[("task:bivlc", str(k))]["scores"]),
                                   [s[0, 0], s[1, 0], s[0, 1], s[1, 1]], rtol=0, atol=ATOL)
        ipos, ineg = _strict(s[0, 0], s[1, 0]), _strict(s[1, 1], s[0, 1])
        tpos, tneg = _strict(s[0, 0], s[0, 1]), _strict(s[1, 1], s[1, 0])
        flags.append((ipos and ineg, tpos and tneg, ipos and ineg and tpos and tneg))
    f = np.array(flags, dtype=float) * 100
    v = _values(out, "task:bivlc")
    assert (v["i2t_score"], v["t2i_score"], v["accuracy"]) == pytest.approx(tuple(f.mean(axis=0)))


def test_aro_with_blip_itm_scores_the_box_crops_as_the_model_card_loop(folders, tmp_path):
    from support.aro_mmvp import aro_row, crop, noise_image, write_aro

    rel = [aro_row("1.jpg", (2, 3, 20, 24), "the man is riding the horse", "the horse is riding the man", "riding"),
           aro_row("2.jpg", (0, 0, 30, 30), "the cat sits on the mat", "the mat sits on the cat", "on")]
    root = write_aro(tmp_path / "data", rel, [])
    pixels = {k: noise_image(root / "images" / f"{k}.jpg", k) for k in (1, 2)}
    out = tmp_path / "aro"
    run_task(task="aro", model=f"blip-itm:{folders['blip-itm']}", dataset="aro:vg_relation", out=str(out),
             data_dir=str(tmp_path / "data"), cache_dir=str(tmp_path / "cache"), quiet=True, num_workers=0)
    card = CardLoop("blip-itm", folders["blip-itm"])
    rows = _per_item(out)
    right = []
    for k, row in enumerate(rel):
        (got,) = [r for (c, i), r in rows.items() if c == "task:aro:vg_relation" and i == f"vg_relation:{k}"]
        patch = tmp_path / f"crop_{k}.png"  # the box crop of the decoded image, as the set cuts it (PIL crop)
        Image.fromarray(crop(pixels[int(row["image_id"])], _box(row))).save(patch)
        s = [card(patch, t) for t in (row["false_caption"], row["true_caption"])]  # the authors' order
        np.testing.assert_allclose(json.loads(got["scores"]), s, rtol=0, atol=ATOL)
        right.append(_strict(s[1], s[0]))
    v = _values(out, "task:aro:vg_relation")
    # one item per relation: the macro accuracy (over relations) and the micro one (over items) agree
    assert v["micro_accuracy"] == pytest.approx(100 * np.mean(right)) == v["accuracy"]

def _box(row: dict) -> tuple:
    return tuple(int(row[k]) for k in ("bbox_x", "bbox_y", "bbox_w", "bbox_h"))
