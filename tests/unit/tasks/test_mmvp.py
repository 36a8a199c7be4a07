"""MMVP-VLM: the released layout (Questions.csv + image folders), malformed files, and every score recomputed here
from the authors' rule with plain NumPy (never vlbench's scoring code), on a hand-worked case with ties and on
random embeddings."""

from __future__ import annotations

import numpy as np
import pytest
from support.aro_mmvp import mmvp_rules, noise_image, write_mmvp

from vlbench import registry
from vlbench.errors import DataError
from vlbench.tasks.sets.mmvp import (
    MMVPItem,
    evaluate_mmvp,
    mmvp_images_dir,
    mmvp_items,
    mmvp_text_only,
    pattern_of,
    read_mmvp_file,
)

E = np.eye(4)
H = np.full(4, 0.5)  # a unit vector with exact dot products (1/2) with every axis


def _cos(a, b) -> float:
    return float(np.asarray(a) @ np.asarray(b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_released_layout_loads_pairs_with_the_authors_prompt_and_patterns(tmp_path):
    root = write_mmvp(tmp_path, [("Orientation", "The dog faces left", "The dog faces right"),
                                 ("Camera_Perspective", "Seen from above", "Seen from below")])
    for q, kind in ((1, "Orientation"), (2, "Orientation"), (3, "Camera_Perspective"), (4, "Camera_Perspective")):
        noise_image(root / "MLLM_VLM Images" / kind / f"{q}.jpg", q)
    items = mmvp_items(root)
    assert items[0] == MMVPItem("1", ("Orientation/1.jpg", "Orientation/2.jpg"),
                                ("a photo of The dog faces left", "a photo of The dog faces right"), "orientation")
    assert items[1].pattern == "viewpoint"
    assert items[1].images == ("Camera_Perspective/3.jpg", "Camera_Perspective/4.jpg")
    assert [pattern_of(t) for t in ("Presence", "Structural_Character", "Texts", "Color", "State", "Quantity",
                                    "Spatial")] == ["presence", "structural", "text", "color", "state", "quantity",
                                                    "positional"]
    assert pattern_of("Odd Kind") == "odd_kind"  # an unknown Type keeps its own name


def _hand_worked():
    """Four pairs, exact similarities (dyadic values, unit vectors); s rows t1, t2, columns I1, I2:

    1. [[1, 0], [0, 1]]     t1 -> I1, t2 -> I2: pair right; each image picks its statement too
    2. [[1, 0], [.5, .5]]   t2 ties between I1 and I2: a miss (the script's P(I1) > .5 rule would give t2 I2);
                            each image still picks its own statement (1 > .5, .5 > 0)
    3. [[.5, .5], [0, 1]]   t1 ties: a miss (the script's rule also misses it: a tie goes to I2); images right
    4. [[1, .5], [0, .5]]   statements right, but I2 ties between t1 and t2: the image-to-text reading misses
    """
    vecs = [(E[0], E[1], E[0], E[1]), (E[0], E[1], E[0], H), (E[0], E[1], H, E[1]), (E[0], H, E[0], E[1])]
    items, img, txt = [], {}, {}
    for k, (i1, i2, t1, t2) in enumerate(vecs):
        it = MMVPItem(str(2 * k + 1), (f"P/{2 * k + 1}.jpg", f"P/{2 * k + 2}.jpg"), (f"a photo of s{k}a",
                      f"a photo of s{k}b"), ("orientation", "color")[k % 2])
        img.update({it.images[0]: i1, it.images[1]: i2})
        txt.update({it.candidates[0]: t1, it.candidates[1]: t2})
        items.append(it)
    return items, img, txt


def test_scores_equal_the_authors_rule_on_a_hand_worked_case_with_ties():
    items, img, txt = _hand_worked()
    mats = [np.array([[_cos(txt[t], img[i]) for i in it.images] for t in it.candidates]) for it in items]
    flags = [mmvp_rules(m) for m in mats]
    assert flags == [(True, True, True), (True, False, True), (False, True, True), (True, True, False)]
    res = evaluate_mmvp(items, img, txt)
    assert [r.correct for r in res.records] == [True, False, False, True]
    assert res.accuracy == 50.0 and res.chance == 25.0 and res.n_items == 4
    assert res.scores["statement_accuracy"][0] == 75.0 and res.scores["statement_accuracy"][3] == 8
    assert res.scores["i2t_pair_accuracy"][0] == 75.0
    assert res.by_kind == {"orientation": {"accuracy": 50.0, "n": 2}, "color": {"accuracy": 50.0, "n": 2}}
    assert res.records[1].scores == [1.0, 0.5, 0.0, 0.5]  # s(t1,I1), s(t2,I1), s(t1,I2), s(t2,I2)


def test_scores_equal_an_independent_computation_on_random_embeddings():
    rng = np.random.default_rng(5)
    patterns = ("orientation", "presence", "state")
    items, img, txt = [], {}, {}
    for k in range(45):
        it = MMVPItem(str(2 * k + 1), (f"X/{2 * k + 1}.jpg", f"X/{2 * k + 2}.jpg"), (f"t{k} a", f"t{k} b"),
                      patterns[k % 3])
        for key in (*it.images, *it.candidates):
            (img if key.endswith(".jpg") else txt)[key] = rng.normal(size=6)
        items.append(it)
    res = evaluate_mmvp(items, img, txt, seed=3)
    f = np.array([mmvp_rules(np.array([[_cos(txt[t], img[i]) for i in it.images] for t in it.candidates]))
                  for it in items], dtype=float)
    pair = f[:, 0] * f[:, 1]
    assert res.accuracy == pytest.approx(100 * pair.mean())
    assert res.scores["statement_accuracy"][0] == pytest.approx(100 * f[:, :2].mean())
    assert res.scores["i2t_pair_accuracy"][0] == pytest.approx(100 * f[:, 2].mean())
    for j, p in enumerate(patterns):
        assert res.by_kind[p]["accuracy"] == pytest.approx(100 * pair[j::3].mean()) and res.by_kind[p]["n"] == 15
    values = {m: v for m, v, _ in res.more_values()}
    assert values["pattern_presence"] == pytest.approx(100 * pair[1::3].mean())
    assert res.ci_low <= res.accuracy <= res.ci_high


def test_blind_scores_are_zero_by_design_since_text_cannot_order_two_images():
    items, _, _ = _hand_worked()
    res = mmvp_text_only(items, lambda texts: [float(len(t)) for t in texts])
    assert res.accuracy == 0.0 and res.scores["statement_accuracy"][0] == 0.0
    assert res.scores["i2t_pair_accuracy"][0] == 0.0


def test_every_metric_an_mmvp_result_reports_is_listed():
    items, img, txt = _hand_worked()
    names = {m for m, _, _ in evaluate_mmvp(items, img, txt).more_values()}
    names |= {f"pattern_{p}" for p in ("orientation", "presence", "state", "quantity", "positional", "color",
                                       "structural", "text", "viewpoint")}
    assert names <= set(registry.metrics.names())


@pytest.mark.parametrize("body, line, field", [
    ("Question ID,Type\n1,Color\n", 1, "Statement"),
    ("Question ID,Type,Statement\n1,Color,a red car\n3,Color,a blue car\n", 3, "Question ID"),
    ("Question ID,Type,Statement\n1,Color,a red car\n2,State,a blue car\n", 3, "Type"),
    ("Question ID,Type,Statement\nx,Color,a red car\n2,Color,a blue car\n", 2, "Question ID"),
    ("Question ID,Type,Statement\n1,Color,a red car\n2,Color,  \n", 3, "Statement"),
    ("Question ID,Type,Statement\n1,../up,a red car\n2,../up,a blue car\n", 2, "Type"),
])
def test_a_malformed_questions_file_is_refused_naming_the_file_line_and_field(tmp_path, body, line, field):
    path = tmp_path / "Questions.csv"
    path.write_text(body)
    with pytest.raises(DataError) as err:
        read_mmvp_file(path)
    msg = err.value.message
    assert str(path) in msg and f"line {line}" in msg and repr(field) in msg


def test_an_unpaired_statement_and_a_non_utf8_file_are_refused(tmp_path):
    path = tmp_path / "Questions.csv"
    path.write_text("Question ID,Type,Statement\n1,Color,a red car\n2,Color,a blue car\n3,Color,a car\n")
    with pytest.raises(DataError, match="line 4 has no partner"):
        read_mmvp_file(path)
    path.write_bytes(b"Question ID,Type,Statement\n1,Color,a \xff car\n")
    with pytest.raises(DataError, match="not UTF-8"):
        read_mmvp_file(path)


def test_missing_images_are_named_with_the_folder(tmp_path):
    root = write_mmvp(tmp_path, [("Color", "a red car", "a blue car")])
    noise_image(root / "MLLM_VLM Images" / "Color" / "1.jpg", 1)
    with pytest.raises(DataError) as err:
        mmvp_items(root)
    assert "Color/2.jpg" in err.value.message and "MLLM_VLM Images" in err.value.message


def test_the_readmes_folder_name_and_images_dir_are_read(tmp_path):
    root = write_mmvp(tmp_path, [("Color", "a red car", "a blue car")], folder="MMVP_VLM_Images")
    assert mmvp_images_dir(root) == root / "MMVP_VLM_Images"
    assert mmvp_images_dir(root, tmp_path / "x") == tmp_path / "x"
    (root / "MMVP_VLM_Images").rmdir()
    with pytest.raises(DataError, match="MLLM_VLM Images"):
        mmvp_images_dir(root)


def test_ls_tasks_names_size_licence_and_citation_of_aro_and_mmvp(capsys):
    from vlbench.cli import main

    assert main(["ls", "tasks"]) == 0
    out = capsys.readouterr().out
    for name, words in (("aro", ("23,937 items", "CC BY 4.0", "Yuksekgonul")),
                        ("mmvp", ("135 pairs", "MMVP/MMVP_VLM", "Tong, Liu"))):
        text = " ".join(out.split(f"\n  {name} ", 1)[1].split("\n  ")[:4])
        assert all(w in text for w in words), (name, text)
        assert "size:" in text and "licence:" in text and "citation:" in text
