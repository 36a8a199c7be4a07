"""Winoground and What'sUp: their released file layouts, malformed files, and every score recomputed here
from the papers' definitions with plain NumPy (never vlbench's scoring code)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vlbench.errors import DataError
from vlbench.tasks import distinct_images, evaluate_choice
from vlbench.tasks.sets.whatsup import SUBSETS, read_whatsup_file, whatsup_items
from vlbench.tasks.sets.winoground import (
    CHANCE,
    WinogroundItem,
    evaluate_winoground,
    evaluate_winoground_text_only,
    read_winoground_file,
    winoground_items,
)

E = np.eye(4)
H = np.full(4, 0.5)  # a unit vector with exact dot products (1/2) with every axis


# ---------------------------------------------------------------------------------------------------------------
# Winoground


def _paper_scores(s: np.ndarray) -> tuple[bool, bool, bool]:
    """Thrush et al. 2022, from s[i, j] = s(caption i, image j): text, image and group scores of one item."""
    text = s[0, 0] > s[1, 0] and s[1, 1] > s[0, 1]
    image = s[0, 0] > s[0, 1] and s[1, 1] > s[1, 0]
    return bool(text), bool(image), bool(text and image)


def _cos(a, b) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _hand_worked():
    """Four items whose similarity matrices are exact (dyadic values, unit vectors): rows c0, c1; columns I0, I1.

    1. [[1, 0], [0, 1]]     text yes, image yes, group yes
    2. [[1, 0], [.5, .5]]   text yes (1 > .5, .5 > 0); image no: s(c1,I1) = s(c1,I0) is a tie
    3. [[1, .5], [0, .5]]   image yes (1 > .5, .5 > 0); text no: s(c1,I1) = s(c0,I1) is a tie
    4. [[1, 0], [0, 0]]     neither: s(c1,I1) ties both s(c0,I1) and s(c1,I0)
    """
    vecs = [(E[0], E[1], E[0], E[1]), (E[0], E[1], E[0], H), (E[0], H, E[0], E[1]), (E[0], E[1], E[0], E[2])]
    items, img, txt = [], {}, {}
    for k, (i0, i1, c0, c1) in enumerate(vecs):
        it = WinogroundItem(str(k), (f"ex_{k}_img_0.png", f"ex_{k}_img_1.png"), (f"caption {k} a", f"caption {k} b"))
        img.update({it.images[0]: i0, it.images[1]: i1})
        txt.update({it.captions[0]: c0, it.captions[1]: c1})
        items.append(it)
    return items, img, txt


def test_winoground_scores_equal_the_paper_definition_on_a_hand_worked_case_with_ties():
    items, img, txt = _hand_worked()
    res = evaluate_winoground(items, img, txt)
    by_hand = [(True, True, True), (True, False, False), (False, True, False), (False, False, False)]
    mats = [np.array([[_cos(txt[c], img[i]) for i in it.images] for c in it.captions]) for it in items]
    assert [_paper_scores(m) for m in mats] == by_hand  # the independent rule agrees with the hand-worked flags
    assert [(r.text, r.image_ok, r.group) for r in res.records] == by_hand
    assert res.scores["text"][0] == 50.0 and res.scores["image"][0] == 50.0 and res.scores["group"][0] == 25.0
    assert res.accuracy == 25.0 and res.n_items == 4
    # a tie is a failure: an argmax reading (first on ties) would have passed item 2's image score
    assert res.records[1].scores == [1.0, 0.5, 0.0, 0.5]
    assert CHANCE == pytest.approx({"text": 25.0, "image": 25.0, "group": 16.6667}, abs=1e-4)


def test_winoground_scores_equal_an_independent_computation_on_random_embeddings():
    rng = np.random.default_rng(3)
    items, img, txt = [], {}, {}
    for k in range(60):
        it = WinogroundItem(str(k), (f"i{k}a.png", f"i{k}b.png"), (f"c{k} x", f"c{k} y"), ("Object", "Relation")[k % 2])
        for key in (*it.images, *it.captions):
            (img if key.endswith(".png") else txt)[key] = rng.normal(size=8)
        items.append(it)
    res = evaluate_winoground(items, img, txt, seed=1)
    flags = np.array([_paper_scores(np.array([[_cos(txt[c], img[i]) for i in it.images] for c in it.captions]))
                      for it in items])
    assert 0 < flags[:, 2].sum() < len(items)  # the case is not degenerate
    for j, name in enumerate(("text", "image", "group")):
        assert res.scores[name][0] == pytest.approx(100 * flags[:, j].mean())
        assert res.scores[name][1] <= res.scores[name][0] <= res.scores[name][2]
    odd = flags[1::2]
    assert res.by_kind["Relation"]["group"] == pytest.approx(100 * odd[:, 2].mean())
    assert res.by_kind["Relation"]["n"] == 30


def test_winoground_items_have_two_images_each_and_both_are_embedded():
    items, _, _ = _hand_worked()
    assert distinct_images(items[:1]) == ["ex_0_img_0.png", "ex_0_img_1.png"]
    assert len(distinct_images(items)) == 8


def test_winoground_blind_ceiling_is_zero_since_a_text_score_cannot_tell_the_images_apart():
    items, _, _ = _hand_worked()
    res = evaluate_winoground_text_only(items, lambda texts: [float(len(t)) + 0.1 * i for i, t in enumerate(texts)])
    assert res.scores["text"][0] == res.scores["image"][0] == res.scores["group"][0] == 0.0


def _write_winoground(root, rows, images=True):
    from PIL import Image

    root.mkdir(parents=True, exist_ok=True)
    (root / "examples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if images:
        (root / "images").mkdir(exist_ok=True)
        for r in rows:
            for f in ("image_0", "image_1"):
                Image.new("RGB", (8, 6), (len(r[f]) * 9 % 256, 40, 90)).save(root / "images" / f"{r[f]}.png")


def _wino_rows(n=3):
    return [{"id": k, "image_0": f"ex_{k}_img_0", "image_1": f"ex_{k}_img_1", "caption_0": f"a dog chases a cat {k}",
             "caption_1": f"a cat chases a dog {k}", "tag": "Object", "secondary_tag": "", "num_main_preds": 1,
             "collapsed_tag": "Object"} for k in range(n)]


def test_winoground_fixture_in_the_released_layout_loads(tmp_path):
    _write_winoground(tmp_path / "winoground", _wino_rows())
    items = winoground_items(tmp_path / "winoground")
    assert [it.images for it in items][1] == ("ex_1_img_0.png", "ex_1_img_1.png")
    assert items[2].captions == ("a dog chases a cat 2", "a cat chases a dog 2") and items[0].tag == "Object"


@pytest.mark.parametrize("field, value", [("caption_1", None), ("image_0", ""), ("image_1", "../../etc/x")])
def test_malformed_winoground_file_names_the_file_and_the_field(tmp_path, field, value):
    rows = _wino_rows()
    if value is None:
        del rows[1][field]
    else:
        rows[1][field] = value
    _write_winoground(tmp_path, rows, images=False)
    with pytest.raises(DataError) as err:
        read_winoground_file(tmp_path / "examples.jsonl")
    assert str(tmp_path / "examples.jsonl") in err.value.message and "line 2" in err.value.message
    assert repr(field) in err.value.message


def test_winoground_missing_image_names_the_folder_and_the_file(tmp_path):
    _write_winoground(tmp_path, _wino_rows())
    (tmp_path / "images" / "ex_2_img_1.png").unlink()
    with pytest.raises(DataError, match="ex_2_img_1.png") as err:
        winoground_items(tmp_path)
    assert str(tmp_path / "images") in err.value.message


# ---------------------------------------------------------------------------------------------------------------
# What'sUp


def _write_whatsup(root):
    """One file per subset kind, in the authors' layout, with tiny generated images."""
    from PIL import Image

    rows_a = [{"image_path": f"data/controlled_images/mug_{p}_table.jpeg",
               "caption_options": [f"A mug {p} a table", *[f"A mug {q} a table" for q in
                                                            ("on", "under", "left of", "right of") if q != p]]}
              for p in ("on", "under", "left of", "right of")]
    rows_qa = [[397133, "A dog to the left of a cat", "A dog to the right of a cat"],
               [37777, "A cup above a plate", "A cup below a plate"]]
    root.mkdir(parents=True, exist_ok=True)
    (root / SUBSETS["controlled_a"].file).write_text(json.dumps(rows_a))
    (root / SUBSETS["coco_qa_two"].file).write_text(json.dumps(rows_qa))
    for folder, names in (("controlled_images", [r["image_path"].split("/")[-1] for r in rows_a]),
                          ("val2017", [f"{r[0]:012d}.jpg" for r in rows_qa])):
        (root / folder).mkdir(exist_ok=True)
        for n in names:
            Image.new("RGB", (6, 5), (len(n) * 7 % 256, 20, 30)).save(root / folder / n)
    return rows_a, rows_qa


def test_whatsup_fixture_in_the_released_layout_loads(tmp_path):
    rows_a, rows_qa = _write_whatsup(tmp_path)
    a = whatsup_items(tmp_path, "controlled_a")
    qa = whatsup_items(tmp_path, "coco-qa-two")
    assert [it.image for it in a][0] == "controlled_images/mug_on_table.jpeg"
    assert all(len(it.candidates) == 4 and it.correct == 0 for it in a)
    assert a[1].candidates == tuple(rows_a[1]["caption_options"])
    assert [it.image for it in qa] == ["val2017/000000397133.jpg", "val2017/000000037777.jpg"]
    assert qa[1].candidates == ("A cup above a plate", "A cup below a plate")


@pytest.mark.parametrize("subset, rows, field", [
    ("controlled_a", [{"image_path": "data/controlled_images/x.jpeg", "caption_options": ["a", "b", "c"]}],
     "caption_options"),
    ("controlled_b", [{"caption_options": ["a", "b", "c", "d"]}], "image_path"),
    ("coco_qa_one", [["not-an-id", "a", "b"]], "image_id"),
    ("vg_qa_two", [[12, "a", ""]], "captions"),
])
def test_malformed_whatsup_file_names_the_file_and_the_field(tmp_path, subset, rows, field):
    path = tmp_path / SUBSETS[subset].file
    path.write_text(json.dumps(rows))
    with pytest.raises(DataError) as err:
        read_whatsup_file(path, subset)
    assert str(path) in err.value.message and "item 0" in err.value.message and field in err.value.message


def test_whatsup_accuracy_equals_an_independent_four_way_computation():
    rng = np.random.default_rng(5)
    from vlbench.tasks import ChoiceItem

    items = [ChoiceItem(str(k), f"img{k}.jpeg", tuple(f"t{k} {p}" for p in ("on", "under", "left", "right")), 0)
             for k in range(80)]
    img = {it.image: rng.normal(size=6) for it in items}
    txt = {c: rng.normal(size=6) for it in items for c in it.candidates}
    # a tie between the right caption and a wrong one: the same vector, so a miss (an argmax would say a hit)
    txt[items[0].candidates[3]] = txt[items[0].candidates[0]] = img[items[0].image]
    res = evaluate_choice(items, img, txt)
    hits = []
    for it in items:
        s = np.array([_cos(txt[c], img[it.image]) for c in it.candidates])
        hits.append(all(s[0] > s[k] for k in range(1, 4)))
    assert not hits[0] and not res.records[0].correct
    assert 0 < sum(hits) < len(items)
    assert res.accuracy == pytest.approx(100 * np.mean(hits)) and res.chance == 25.0


def test_ls_tasks_names_size_licence_and_citation_of_both_sets(capsys):
    from vlbench.cli import main

    assert main(["ls", "tasks"]) == 0
    out = capsys.readouterr().out
    for name, words in (("winoground", ("400 items", "Getty Images", "Thrush et al.")),
                        ("whatsup", ("controlled_a", "MIT", "Kamath, Hessel and Chang"))):
        block = out.split(f"  {name} ", 1)[1].split("\n  ")[:4]
        text = " ".join(block)
        assert all(w in text for w in words), (name, text)
        assert "size:" in text and "licence:" in text and "citation:" in text


def test_whatsup_controlled_pair_and_set_accuracies_equal_the_authors_definition():
    """Kamath et al.: per object pair, a pair (left/right, on/under) is right when both its images are; a set
    when all four are; recomputed here from per-image hits."""
    from vlbench.tasks import ChoiceItem
    from vlbench.tasks.sets.whatsup import evaluate_whatsup

    rng = np.random.default_rng(11)
    preps = {"left": "left_of", "right": "right_of", "on": "on", "under": "under"}
    items = [ChoiceItem(f"{o}-{p}", f"controlled_images/{o}_{name}_table.jpeg",
                        tuple(f"A {o} {q} the table" for q in [p, *(x for x in preps if x != p)]), 0)
             for o in ("mug", "book", "lamp", "cup", "vase", "plant") for p, name in preps.items()]
    img = {it.image: rng.normal(size=5) for it in items}
    txt = {c: rng.normal(size=5) for it in items for c in it.candidates}
    res = evaluate_whatsup(items, img, txt)
    hit = {}
    for it in items:
        s = [_cos(txt[c], img[it.image]) for c in it.candidates]
        hit[it.item_id] = s[0] > max(s[1:])
    objs = ("mug", "book", "lamp", "cup", "vase", "plant")
    pairs = [hit[f"{o}-{a}"] and hit[f"{o}-{b}"] for o in objs for a, b in (("left", "right"), ("on", "under"))]
    sets = [all(hit[f"{o}-{p}"] for p in preps) for o in objs]
    assert res.accuracy == pytest.approx(100 * np.mean(list(hit.values())))
    assert res.groups["pair"] == {"accuracy": pytest.approx(100 * np.mean(pairs)), "n": 12}
    assert res.groups["set"] == {"accuracy": pytest.approx(100 * np.mean(sets)), "n": 6}
    assert 0 < sum(pairs) < 12
    assert {m for m, _, _ in res.more_values()} == {"pair_accuracy", "set_accuracy"}
