"""NegBench MCQ (vlbench/tasks/sets/negbench.py): the released CSV layout read as the authors' loader reads it
(tests/fixtures/negbench, rows written in that layout), bad input named by its row with the fix, and the scores
(overall and per question type) equal to a NumPy recomputation from the vectors, exact ties counted as misses."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import numpy as np
import pytest
from support.published_task_runs import task_run

from vlbench.errors import DataError, VlbenchError
from vlbench.published import check_run
from vlbench.published.task_scores import entries_for
from vlbench.tasks.choice import distinct_images, distinct_texts
from vlbench.tasks.run import TaskConfig
from vlbench.tasks.sets.negbench import (
    COLUMNS,
    PIECES,
    TASK,
    evaluate_negbench,
    negbench_sets,
    negbench_text_only,
    parse_spec,
    read_piece,
)

FIXTURE = Path(__file__).parents[2] / "fixtures" / "negbench"
COCO = FIXTURE / PIECES["coco"][0]


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _write(path: Path, rows: list[dict], header=COLUMNS) -> Path:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(header), lineterminator="\n", extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return path


def test_the_released_columns_are_read_in_file_order_with_the_question_types():
    rows, items = _rows(COCO), read_piece(COCO, "coco")
    assert len(items) == len(rows) == 8
    for n, (row, it) in enumerate(zip(rows, items), start=1):
        assert it.item_id == f"coco:{n}" and it.correct == int(row["correct_answer"]) == 0
        assert it.candidates == tuple(row[f"caption_{k}"] for k in range(4))
        assert it.image == "coco/" + row["image_path"].rsplit("/", 1)[1]
        assert it.question_type == {"positive": "affirmation", "negative": "negation",
                                    "hybrid": "hybrid"}[row["correct_answer_template"]]
        assert it.kinds == ("right", "wrong:hybrid", "wrong:affirmation", "wrong:negation")
    assert [it.question_type for it in items].count("negation") == 3
    assert len(read_piece(FIXTURE / PIECES["voc2007"][0], "voc2007")) == 4


@pytest.mark.parametrize("change, said", [
    (lambda r: r.update(correct_answer="4"), "row 3 (line 4): correct_answer 4 is out of range: the row has 4 "
                                             "captions"),
    (lambda r: r.update(correct_answer="-1"), "row 3 (line 4): correct_answer -1 is out of range"),
    (lambda r: r.update(correct_answer="first"), "row 3 (line 4): correct_answer 'first' is not a whole number"),
    (lambda r: r.update(correct_answer_template="affirmation"), "row 3 (line 4): correct_answer_template "
                                                                "'affirmation' is not one of positive, negative"),
    (lambda r: r.update(caption_2=" "), "row 3 (line 4): caption_2 is empty"),
    (lambda r: r.update(image_path="/data/val2017/.."), "row 3 (line 4): image_path"),
    (lambda r: r.update(image_path="/data/val2017/"), "row 3 (line 4): image_path '/data/val2017/' names no file"),
    (lambda r: r.update(image_path="/elsewhere/000000000139.jpg"), "has the file name of row 1's"),
])
def test_a_bad_row_is_named_with_its_row_and_the_fix(tmp_path, change, said):
    rows = _rows(COCO)
    change(rows[2])
    path = _write(tmp_path / PIECES["coco"][0], rows)
    with pytest.raises(DataError) as err:
        read_piece(path, "coco")
    assert said in err.value.message and str(path) in err.value.message
    assert err.value.hint


def test_a_missing_column_is_named_with_the_header_it_found(tmp_path):
    header = [c for c in COLUMNS if c != "correct_answer_template"]
    path = _write(tmp_path / "x.csv", _rows(COCO), header)
    with pytest.raises(DataError) as err:
        read_piece(path, "coco")
    assert "has no column 'correct_answer_template'" in err.value.message
    assert "correct_answer_template" in err.value.hint  # the fix lists the released columns


def _cfg(tmp_path, images=None, dataset=TASK) -> TaskConfig:
    return TaskConfig(task=TASK, model="clip", dataset=dataset, data_dir=str(tmp_path / "data"),
                      images_dir=str(images) if images else None)


def _images(folder: Path, names) -> Path:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for k, name in enumerate(sorted(names)):
        Image.fromarray(np.full((8, 8, 3), k * 20, dtype=np.uint8)).save(folder / name)
    return folder


def _data(tmp_path) -> set:
    (tmp_path / "data" / "negbench").mkdir(parents=True)
    for p in PIECES.values():
        shutil.copy(FIXTURE / p[0], tmp_path / "data" / "negbench" / p[0])
    return {r["image_path"].rsplit("/", 1)[1] for p in PIECES.values() for r in _rows(FIXTURE / p[0])}


def test_an_image_that_is_not_there_names_its_row_and_where_to_get_it(tmp_path):
    names = _data(tmp_path)
    images = _images(tmp_path / "img", names - {"000000000632.jpg"})
    with pytest.raises(DataError) as err:
        negbench_sets(_cfg(tmp_path, images, f"{TASK}:coco"))
    assert "row 6: its image '000000000632.jpg' is not in" in err.value.message
    assert "COCO 2017 validation images" in err.value.hint and "--images-dir" in err.value.hint
    sets = negbench_sets(_cfg(tmp_path, _images(tmp_path / "img", names)))
    assert list(sets.sets) == [f"task:{TASK}:coco", f"task:{TASK}:voc2007"]
    assert sets.notes[f"task:{TASK}:coco"] == {"items": 8, "types": {"affirmation": 3, "negation": 3, "hybrid": 2}}
    assert sets.dataset["source"]["repository"].startswith("github.com/m1k2zoo/negbench@2ac009b")


def test_a_missing_file_says_where_to_download_it(tmp_path):
    with pytest.raises(DataError) as err:
        negbench_sets(_cfg(tmp_path))
    assert "COCO_val_mcq_llama3.1_rephrased.csv" in err.value.message and "drive.google.com" in err.value.hint
    with pytest.raises(VlbenchError, match="unknown NegBench MCQ piece 'synthetic'"):
        parse_spec(f"{TASK}:synthetic")


def _recompute(items, img: dict, txt: dict):
    """From the definitions: an item is right when its right caption's cosine is strictly above each other one's."""
    right = []
    for it in items:
        v = img[it.image] / np.linalg.norm(img[it.image])
        s = [float(v @ (txt[c] / np.linalg.norm(txt[c]))) for c in it.candidates]
        right.append(all(s[it.correct] > s[k] for k in range(len(s)) if k != it.correct))
    per = {}
    for name in ("affirmation", "negation", "hybrid"):
        got = [ok for it, ok in zip(items, right) if it.question_type == name]
        per[name] = (100.0 * sum(got) / len(got), len(got))
    return 100.0 * sum(right) / len(right), per


def test_scores_equal_a_numpy_recomputation_per_type_with_exact_ties_as_misses():
    items = read_piece(COCO, "coco")
    rng = np.random.default_rng(7)
    img = {k: rng.normal(size=16) for k in distinct_images(items)}
    txt = {t: rng.normal(size=16) for t in distinct_texts(items)}
    for it in items:  # the right captions drawn toward their image, so each type has hits and misses
        txt[it.candidates[it.correct]] = txt[it.candidates[it.correct]] + 0.6 * img[it.image]
    # an exact tie: item 1's right caption has the same vector as its wrong caption_3 (a miss, not a hit)
    txt[items[0].candidates[0]] = txt[items[0].candidates[3]].copy()
    # a near tie: item 4's right caption 1e-9 above its strongest wrong one (a hit)
    it = items[3]
    v = img[it.image] / np.linalg.norm(img[it.image])
    best = max((float(v @ txt[c]) / np.linalg.norm(txt[c]), c) for c in it.candidates[1:])
    unit = txt[best[1]] / np.linalg.norm(txt[best[1]])
    txt[it.candidates[0]] = unit + 1e-9 * v
    res = evaluate_negbench(items, img, txt)
    acc, per = _recompute(items, img, txt)
    assert not res.records[0].correct and res.records[3].correct
    assert res.accuracy == pytest.approx(acc) and res.n_items == 8 and res.chance == 25.0
    assert list(res.types) == list(per)
    for name, (value, n) in per.items():
        assert res.types[name] == {"accuracy": pytest.approx(value), "n": n} and 0 < value < 100, name
    assert [m for m, _, _ in res.more_values()] == ["affirmation_accuracy", "negation_accuracy", "hybrid_accuracy"]
    assert res.as_dict()["more_values"][1] == ["negation_accuracy", pytest.approx(per["negation"][0]),
                                               {"n": per["negation"][1]}]


def test_the_blind_scorer_gets_the_per_type_accuracies_too():
    items = read_piece(COCO, "coco")
    res = negbench_text_only(items, lambda texts: [float(len(t)) for t in texts])
    longest = [max(range(4), key=lambda k: len(it.candidates[k])) == 0 and
               sorted(len(c) for c in it.candidates)[-1] > sorted(len(c) for c in it.candidates)[-2] for it in items]
    assert res.accuracy == pytest.approx(100.0 * np.mean(longest))
    assert set(res.types) == {"affirmation", "negation", "hybrid"}


SPEC = "openclip:ViT-B-32/openai"


def test_the_repository_totals_are_declared_and_checked(tmp_path):
    (entry,) = entries_for(SPEC, TASK)
    assert {c: w["scores"] for c, w in entry.sets.items()} == {f"task:{TASK}:coco": {"accuracy": 39.30},
                                                               f"task:{TASK}:voc2007": {"accuracy": 38.72}}
    assert entries_for("clip:openai/clip-vit-base-patch32", TASK) == [entry]
    # the repository's fractions, rounded as declared
    assert round(100 * 1162 / 2957, 2) == 39.30 and round(100 * 1948 / 5031, 2) == 38.72
    assert round(100 * 0.39296584376056815, 2) == 39.30 and round(100 * 0.38719936394355, 2) == 38.72
    scores = {c: dict(w["scores"]) for c, w in entry.sets.items()}
    ok = check_run(task_run(tmp_path / "ok", task=TASK, spec=SPEC, scores=scores, files={"coco": "c" * 64,
                                                                                         "voc2007": "v" * 64}))
    assert ok.status == "pass", ok.format()
    off_scores = {c: {"accuracy": s["accuracy"] + 3.0} for c, s in scores.items()}
    off = check_run(task_run(tmp_path / "off", task=TASK, spec=SPEC, scores=off_scores, files={"coco": "c" * 64}))
    facts = {f.fact: f.status for f in off.rows[0].facts}
    assert off.status == "off" and facts["tie_rule"] == "differs" and facts["set_version"] == "unknown"
    assert facts["implementation"] == facts["precision"] == "same"
    assert "torch.argmax" in off.format()
