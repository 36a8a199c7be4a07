"""`vlbench run --task winoground|whatsup` end to end on fixtures in the released layouts (tiny generated images,
a tiny CLIP): every recorded similarity and score equals a computation that encodes each image and caption on
its own and applies the papers' rules here."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from vlbench.cli import main


def _rows(out: Path) -> list[dict]:
    with gzip.open(out / "per_item.csv.gz", "rt") as fh:
        return list(csv.DictReader(fh))


def _encoder(spec):
    import torch

    from vlbench.encoding.encode import load_image
    from vlbench.models.adapter import load_model

    adapter = load_model(spec, device="cpu")

    def image(path):
        v = np.asarray(adapter.encode_images(torch.stack([adapter.preprocess(load_image(path))])).float())[0]
        return v / np.linalg.norm(v)

    def text(t):
        v = np.asarray(adapter.encode_texts([t]).float())[0]
        return v / np.linalg.norm(v)

    return image, text


def _image(path: Path, k: int) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.random.default_rng(k).integers(0, 256, (20, 24, 3), dtype=np.uint8)).save(path)


@pytest.fixture
def data_dir(blind_data_dir):
    """A data folder: the blind baseline's COCO captions, winoground/ and whatsup/ in their released layouts."""
    root = blind_data_dir
    pairs = [("a dog chases a cat", "a cat chases a dog"), ("the red cup is on the blue plate",
             "the blue cup is on the red plate"), ("a man above a boat", "a boat above a man"),
             ("there is more water than milk", "there is more milk than water"), ("a big tree and a small house",
             "a small tree and a big house"), ("people walk past a bus", "a bus drives past people")]
    wino = root / "winoground"
    lines = []
    for k, (c0, c1) in enumerate(pairs):
        lines.append(json.dumps({"id": k, "image_0": f"ex_{k}_img_0", "image_1": f"ex_{k}_img_1", "caption_0": c0,
                                 "caption_1": c1, "tag": "Object", "secondary_tag": "", "num_main_preds": 1,
                                 "collapsed_tag": ("Object", "Relation")[k % 2]}))
        for j in (0, 1):
            _image(wino / "images" / f"ex_{k}_img_{j}.png", 10 * k + j)
    (wino / "examples.jsonl").write_text("\n".join(lines) + "\n")
    ws = root / "whatsup"
    preps = ("on", "under", "to the left of", "to the right of")
    named = {"on": "on", "under": "under", "to the left of": "left_of", "to the right of": "right_of"}
    rows = [{"image_path": f"data/controlled_images/{o}_{named[p]}_table.jpeg",
             "caption_options": [f"A {o} {p} a table", *(f"A {o} {q} a table" for q in preps if q != p)]}
            for o in ("mug", "book", "lamp") for p in preps]
    (ws / "controlled_images").mkdir(parents=True)
    (ws / "controlled_images_dataset.json").write_text(json.dumps(rows))
    for k, r in enumerate(rows):
        _image(ws / "controlled_images" / r["image_path"].split("/")[-1], 100 + k)
    qa = [[k + 1, f"A dog {a} a cat", f"A dog {b} a cat"] for k, (a, b) in
          enumerate([("above", "below"), ("below", "above"), ("left of", "right of"), ("right of", "left of")])]
    (ws / "vg_qa_two_obj.json").write_text(json.dumps(qa))
    for r in qa:
        _image(ws / "vg_images" / f"{r[0]}.jpg", 200 + r[0])
    return root


def test_winoground_run_scores_equal_the_paper_rule_on_a_tiny_model(tiny_models, data_dir, tmp_path):
    spec = f"clip:{tiny_models('clip')}"
    out = tmp_path / "wg"
    assert main(["run", "--task", "winoground", "--model", spec, "--data-dir", str(data_dir), "--out", str(out),
                 "--quiet", "--num-workers", "0"]) == 0
    doc = json.loads((out / "results.json").read_text())
    image, text = _encoder(spec)
    flags = []
    rows = {r["item_id"]: r for r in _rows(out)}
    for line in (data_dir / "winoground" / "examples.jsonl").read_text().splitlines():
        ex = json.loads(line)
        imgs = [image(data_dir / "winoground" / "images" / f"{ex[f'image_{j}']}.png") for j in (0, 1)]
        caps = [text(ex[f"caption_{i}"]) for i in (0, 1)]
        s = np.array([[c @ v for v in imgs] for c in caps])  # s[i, j] = s(caption i, image j)
        assert json.loads(rows[str(ex["id"])]["scores"]) == pytest.approx([s[0, 0], s[1, 0], s[0, 1], s[1, 1]],
                                                                          abs=1e-5)
        t = s[0, 0] > s[1, 0] and s[1, 1] > s[0, 1]
        i = s[0, 0] > s[0, 1] and s[1, 1] > s[1, 0]
        flags.append((t, i, t and i))
        assert rows[str(ex["id"])]["image_1"] == f"ex_{ex['id']}_img_1.png"
    got = {r["metric"]: r for r in doc["results"] if r["condition"] == "task:winoground"}
    f = np.array(flags, dtype=float)
    assert got["text_score"]["value"] == pytest.approx(100 * f[:, 0].mean())
    assert got["image_score"]["value"] == pytest.approx(100 * f[:, 1].mean())
    assert got["accuracy"]["value"] == pytest.approx(100 * f[:, 2].mean()) and got["accuracy"]["n"] == 6
    assert got["chance"]["value"] == pytest.approx(100 / 6) and got["text_score_chance"]["value"] == 25.0
    assert got["blind_accuracy"]["value"] == 0.0  # a text-only score cannot order two images
    assert doc["dataset"]["n_images"] == 12 and doc["encoding"]["images_encoded"] == 12
    assert "group %" in (out / "table.md").read_text()


def test_whatsup_run_accuracy_equals_an_independent_computation(tiny_models, data_dir, tmp_path):
    spec = f"clip:{tiny_models('clip')}"
    out = tmp_path / "ws"
    assert main(["run", "--task", "whatsup", "--model", spec, "--dataset", "whatsup:controlled_a,vg_qa_two",
                 "--data-dir", str(data_dir), "--out", str(out), "--quiet", "--num-workers", "0"]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert list(doc["conditions"]) == ["task:whatsup:controlled_a", "task:whatsup:vg_qa_two"]
    image, text = _encoder(spec)
    ws = data_dir / "whatsup"
    cases = {"controlled_a": [(ws / "controlled_images" / r["image_path"].split("/")[-1], r["caption_options"])
                              for r in json.loads((ws / "controlled_images_dataset.json").read_text())],
             "vg_qa_two": [(ws / "vg_images" / f"{r[0]}.jpg", r[1:])
                           for r in json.loads((ws / "vg_qa_two_obj.json").read_text())]}
    for subset, items in cases.items():
        hits = []
        for path, options in items:
            s = np.array([text(c) @ image(path) for c in options])
            assert abs(s[0] - s[1:].max()) > 1e-5  # no near-tie decided by rounding
            hits.append(bool(s[0] > s[1:].max()))  # the first option is the right one
        got = {r["metric"]: r for r in doc["results"] if r["condition"] == f"task:whatsup:{subset}"}
        assert got["accuracy"]["value"] == pytest.approx(100 * np.mean(hits)) and got["accuracy"]["n"] == len(items)
        if subset == "controlled_a":  # 3 objects x (on, under, left, right), in that order: pairs and sets
            h = np.array(hits).reshape(3, 4)
            pairs = [h[o, 0] and h[o, 1] for o in range(3)] + [h[o, 2] and h[o, 3] for o in range(3)]
            assert got["pair_accuracy"]["value"] == pytest.approx(100 * np.mean(pairs))
            assert got["set_accuracy"]["value"] == pytest.approx(100 * np.mean(h.all(axis=1)))
        else:
            assert "pair_accuracy" not in got
        assert got["chance"]["value"] == 100 / len(items[0][1])
        assert 0 <= got["blind_accuracy"]["value"] <= 100
    assert doc["task"]["blind_baseline"]["available"]


def test_whatsup_missing_file_is_named_before_a_model_loads(data_dir, tmp_path, capsys):
    rc = main(["run", "--task", "whatsup", "--model", "no-such-model", "--dataset", "whatsup:coco_qa_one",
               "--data-dir", str(data_dir), "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 2 and "coco_qa_one_obj.json" in err and str(data_dir / "whatsup") in err


def _solid(path: Path, rgb) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (6, 4), rgb).save(path)


RED, BLUE, GREY = (255, 0, 0), (0, 0, 255), (128, 128, 128)


def test_winoground_run_on_a_hand_worked_colour_case_with_ties(colour_models, tmp_path):
    """colour-vec (tests/support/colour_model.py): an image is its mean colour, a caption its first colour word
    (none: (1, 1, 1)); cosines, so every similarity below is exact. Rows c0, c1; columns I0, I1:

    0. red / blue images, "red" / "blue" captions: [[1, 0], [0, 1]]          text, image, group
    1. red / blue images, "red" / no colour:       [[1, 0], [.58, .58]]      text only (s(c1,I1) = s(c1,I0): a tie)
    2. red / grey images, "red" / "blue":          [[1, .58], [0, .58]]      image only (s(c1,I1) = s(c0,I1): a tie)
    3. red / blue images, "green" / "green":       [[0, 0], [0, 0]]          none (every comparison ties)
    so text 50%, image 50%, group 25%."""
    root = tmp_path / "winoground"
    cases = [(RED, BLUE, "a red cup", "a blue cup"), (RED, BLUE, "a red mug", "a plain mug"),
             (RED, GREY, "a red bowl", "a blue bowl"), (RED, BLUE, "a green hat", "the green hat")]
    lines = []
    for k, (i0, i1, c0, c1) in enumerate(cases):
        _solid(root / "images" / f"ex_{k}_img_0.png", i0)
        _solid(root / "images" / f"ex_{k}_img_1.png", i1)
        lines.append(json.dumps({"id": k, "image_0": f"ex_{k}_img_0", "image_1": f"ex_{k}_img_1", "caption_0": c0,
                                 "caption_1": c1, "tag": "Object", "secondary_tag": "", "num_main_preds": 1,
                                 "collapsed_tag": "Object"}))
    (root / "examples.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    assert main(["run", "--task", "winoground", "--model", "colour-vec", "--data-dir", str(tmp_path), "--out",
                 str(out), "--quiet", "--num-workers", "0", "--no-cache"]) == 0
    got = {r["metric"]: r["value"] for r in json.loads((out / "results.json").read_text())["results"]}
    assert (got["text_score"], got["image_score"], got["accuracy"]) == (50.0, 50.0, 25.0)
    rows = _rows(out)
    flags = [(int(r["text_correct"]), int(r["image_correct"]), int(r["group_correct"])) for r in rows]
    assert flags == [(1, 1, 1), (1, 0, 0), (0, 1, 0), (0, 0, 0)]


def test_whatsup_run_on_a_hand_worked_colour_case_with_a_tie(colour_models, tmp_path):
    """Four Controlled-A-shaped items, the right caption first: red image vs red/blue/green/yellow (1 > .71:
    right); grey image vs four colours (all .58 or .82 for yellow: wrong); blue image, right "blue" (right); red
    image, right caption with no colour word tied with another (.58 = .58: a miss). Accuracy 50%."""
    root = tmp_path / "whatsup"
    cases = [(RED, ["a red mug on a table", "a blue mug on a table", "a green mug on a table",
                    "a yellow mug on a table"]),
             (GREY, ["a red lamp on a table", "a blue lamp on a table", "a green lamp on a table",
                     "a yellow lamp on a table"]),
             (BLUE, ["a blue book under a table", "a red book under a table", "a green book under a table",
                     "a yellow book under a table"]),
             (RED, ["a mug left of a plate", "a mug right of a plate", "a green mug on a plate",
                    "a blue mug under a plate"])]
    rows = []
    for k, (rgb, options) in enumerate(cases):
        _solid(root / "controlled_images" / f"obj{k}_on_table.jpeg", rgb)
        rows.append({"image_path": f"data/controlled_images/obj{k}_on_table.jpeg", "caption_options": options})
    (root / "controlled_images_dataset.json").write_text(json.dumps(rows))
    out = tmp_path / "out"
    assert main(["run", "--task", "whatsup", "--model", "colour-vec", "--dataset", "whatsup:controlled_a",
                 "--data-dir", str(tmp_path), "--out", str(out), "--quiet", "--num-workers", "0", "--no-cache"]) == 0
    got = {r["metric"]: r["value"] for r in json.loads((out / "results.json").read_text())["results"]}
    assert got["accuracy"] == 50.0 and got["chance"] == 25.0
    assert [int(r["correct"]) for r in _rows(out)] == [1, 0, 1, 0]
