"""Choice sets as declarations: every metric, store and published score a set declares in its own module is what
the metric list, the cache, the published check and the leaderboard read; the leaderboard shows every score a
set's paper reports (Winoground's text and image scores beside the group score) and says why a blind cell is blank."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from vlbench.cli import main
from vlbench.tasks.registry import BUILTIN_MODULES, tasks


def test_every_module_in_the_sets_folder_is_found_without_a_line_in_the_registry():
    folder = Path(__file__).parents[2] / "vlbench" / "tasks" / "sets"
    found = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")}
    assert {m.rsplit(".", 1)[1] for m in BUILTIN_MODULES} == found
    assert "valse" in tasks()  # the set added as one file


def test_every_set_declares_its_size_licence_and_citation():
    for name, task in tasks().items():
        assert task.size and task.licence and task.citation, name


def test_every_declared_metric_and_paper_score_is_listed(capsys):
    assert main(["ls", "metrics"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    for name, task in tasks().items():
        declared = {m for m, _ in task.metrics}
        assert declared <= listed, (name, declared - listed)
        for metric, label in task.scores:
            assert metric in listed and label, (name, metric)
    assert {"tot_accuracy", "micro_accuracy", "pattern_text", "text_score", "i2t_score", "pair_accuracy"} <= listed


def test_the_published_scores_and_stores_come_from_the_sets(tmp_path, capsys):
    from vlbench.published.task_scores import task_document

    doc = task_document()
    by_task = {e["task"] for e in doc["entries"]}
    assert by_task == {n for n, t in tasks().items() if t.published} == {"sugarcrepe", "winoground", "whatsup", "bivlc",
                                                                         "negbench-mcq"}
    assert doc["not_shipped"]  # what is not shipped, and why, stays in task_scores.json
    assert main(["cache", "ls", "--cache-dir", str(tmp_path)]) == 0
    assert any(line.split()[:1] == ["aro-crops"] for line in capsys.readouterr().out.splitlines())


RED, BLUE, GREY = (255, 0, 0), (0, 0, 255), (128, 128, 128)


def _winoground(root: Path) -> None:
    """The hand-worked colour case of test_winoground_whatsup_runs.py: text 50%, image 50%, group 25%."""
    from PIL import Image

    cases = [(RED, BLUE, "a red cup", "a blue cup"), (RED, BLUE, "a red mug", "a plain mug"),
             (RED, GREY, "a red bowl", "a blue bowl"), (RED, BLUE, "a green hat", "the green hat")]
    (root / "images").mkdir(parents=True)
    lines = []
    for k, (i0, i1, c0, c1) in enumerate(cases):
        Image.new("RGB", (6, 4), i0).save(root / "images" / f"ex_{k}_img_0.png")
        Image.new("RGB", (6, 4), i1).save(root / "images" / f"ex_{k}_img_1.png")
        lines.append(json.dumps({"id": k, "image_0": f"ex_{k}_img_0", "image_1": f"ex_{k}_img_1", "caption_0": c0,
                                 "caption_1": c1, "collapsed_tag": "Object"}))
    (root / "examples.jsonl").write_text("\n".join(lines) + "\n")


def test_the_leaderboard_shows_winogrounds_text_and_image_scores_and_why_its_blind_cell_is_blank(colour_models,
                                                                                                   tmp_path):
    _winoground(tmp_path / "data" / "winoground")
    out = tmp_path / "runs" / "wg"
    assert main(["run", "--task", "winoground", "--model", "colour-vec", "--data-dir", str(tmp_path / "data"),
                 "--out", str(out), "--quiet", "--num-workers", "0", "--no-cache", "--perturb", "char-swap"]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["task"]["scores"] == [{"metric": "text_score", "label": "text"},
                                     {"metric": "image_score", "label": "image"},
                                     {"metric": "accuracy", "label": "group"}]
    assert doc["task"]["blind_baseline"]["available"] is False  # no coco captions in this data folder
    assert main(["leaderboard", "build", str(tmp_path / "runs"), "--out", str(tmp_path / "lb"), "--no-plots"]) == 0
    with open(tmp_path / "lb" / "choice_tasks.csv", newline="") as fh:
        head = next(csv.reader(fh))
        fh.seek(0)
        (row,) = list(csv.DictReader(fh))
    assert head.index("text_score") == head.index("ci_high") + 1 and head.index("image_score") == head.index(
        "ci_high") + 2
    assert (float(row["text_score"]), float(row["image_score"]), float(row["accuracy"])) == (50.0, 50.0, 25.0)
    assert row["blind"] == "" and row["flags"].startswith("blind baseline unavailable: the blind baseline's training "
                                                          "captions (coco5k_test.jsonl")
    assert "by design the set's blind ceiling is 0 for the image-to-text, text-to-image and group" in row["flags"]
    assert 'title="text_score">text %</th>' in (tmp_path / "lb" / "index.html").read_text()  # the page too
    with open(tmp_path / "lb" / "compositional.csv", newline="") as fh:  # the set under a caption perturbation
        (comp,) = list(csv.DictReader(fh))
    assert (float(comp["text_score"]), float(comp["image_score"]), float(comp["clean"])) == (50.0, 50.0, 25.0)
