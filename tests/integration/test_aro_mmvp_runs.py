"""`vlbench run --task aro|mmvp` end to end on fixtures in the released layouts (tiny generated images, a tiny
CLIP, the colour plug-in): every recorded similarity and score equals a computation that crops and encodes each
image and caption on its own and applies the authors' rules here."""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from support.aro_mmvp import NOTEBOOK_EXCLUDED, aro_macro, aro_row, crop, mmvp_rules, noise_image, write_aro, write_mmvp

from vlbench.cli import main


def _rows(out: Path) -> list[dict]:
    with gzip.open(out / "per_item.csv.gz", "rt") as fh:
        return list(csv.DictReader(fh))


def _results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())


def _encoder(spec):
    """(images, texts): each a function encoding a list on its own (one batch, unit vectors), away from the run."""
    import torch
    from PIL import Image

    from vlbench.models.adapter import load_model

    adapter = load_model(spec, device="cpu")

    def unit(v) -> np.ndarray:
        v = np.asarray(v.float())
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def images(pixels: list[np.ndarray]) -> np.ndarray:
        return unit(adapter.encode_images(torch.stack([adapter.preprocess(Image.fromarray(p)) for p in pixels])))

    def texts(ts: list[str]) -> dict[str, np.ndarray]:
        ts = list(dict.fromkeys(ts))
        return dict(zip(ts, unit(adapter.encode_texts(ts))))

    return images, texts


def _aro_fixture(root: Path) -> tuple[Path, dict]:
    rng = np.random.default_rng(0)
    rel = [aro_row(f"{k % 3}.jpg", (int(rng.integers(0, 20)), int(rng.integers(0, 15)), 20, 18),
                   f"the {a} is {g} the {b}", f"the {b} is {g} the {a}", g)
           for k, (a, b, g) in enumerate([("man", "horse", "on"), ("cup", "table", "on"), ("dog", "sofa", "on"),
                                          ("girl", "bike", "riding"), ("boy", "horse", "riding"),
                                          ("car", "tree", NOTEBOOK_EXCLUDED[0]), ("cat", "box", NOTEBOOK_EXCLUDED[0])])]
    att = [aro_row(f"{k % 3}.jpg", (k % 9, k % 7, 16 + k % 5, 14), f"the {c} bag and the {d} hat",
                   f"the {d} bag and the {c} hat", (c, d))
           for k, (c, d) in enumerate([("red", "blue")] * 26 + [("wet", "dry")] * 3)]
    aro = write_aro(root, rel, att)
    pixels = {f"{k}.jpg": noise_image(aro / "images" / f"{k}.jpg", 40 + k) for k in range(3)}
    return aro, pixels


def test_aro_run_macro_and_micro_accuracy_equal_the_authors_rule_on_a_tiny_model(tiny_models, blind_data_dir, tmp_path):
    spec = f"clip:{tiny_models('clip')}"
    aro, pixels = _aro_fixture(blind_data_dir)
    out = tmp_path / "aro"
    assert main(["run", "--task", "aro", "--model", spec, "--data-dir", str(blind_data_dir), "--out", str(out),
                 "--quiet", "--num-workers", "0"]) == 0
    doc = _results(out)
    assert list(doc["conditions"]) == ["task:aro:vg_relation", "task:aro:vg_attribution"]
    images, texts = _encoder(spec)
    rows = {r["item_id"]: r for r in _rows(out)}
    for subset, file, keep in (("vg_relation", "visual_genome_relation.json",
                                lambda g, n: g not in NOTEBOOK_EXCLUDED),
                               ("vg_attribution", "visual_genome_attribution.json", lambda g, n: n >= 25)):
        items = json.loads((aro / file).read_text())
        v = images([crop(pixels[r["image_path"]], [r[f] for f in ("bbox_x", "bbox_y", "bbox_w", "bbox_h")])
                    for r in items])
        t = texts([c for r in items for c in (r["false_caption"], r["true_caption"])])
        right, groups = [], []
        for k, row in enumerate(items):
            s_false, s_true = t[row["false_caption"]] @ v[k], t[row["true_caption"]] @ v[k]
            assert json.loads(rows[f"{subset}:{k}"]["scores"]) == pytest.approx([s_false, s_true], abs=1e-5)
            assert abs(s_true - s_false) > 1e-5  # no near-tie decided by rounding
            right.append(bool(s_true > s_false))
            groups.append(row.get("relation_name") or "_".join(row["attributes"]))
        got = {r["metric"]: r for r in doc["results"] if r["condition"] == f"task:aro:{subset}"}
        assert got["accuracy"]["value"] == pytest.approx(aro_macro(groups, right, keep))
        assert got["micro_accuracy"]["value"] == pytest.approx(100 * np.mean(right))
        assert got["chance"]["value"] == 50.0 and got["accuracy"]["n"] == len(right)
        assert 0 <= got["blind_accuracy"]["value"] <= 100 and 0 <= got["blind_micro_accuracy"]["value"] <= 100
    assert doc["conditions"]["task:aro:vg_attribution"]["groups_in_macro"] == 1
    assert doc["dataset"]["source"]["sha256"] == {  # the files read, recorded (no published checksum to pin)
        s: hashlib.sha256((aro / f).read_bytes()).hexdigest() for s, f in (
            ("vg_relation", "visual_genome_relation.json"), ("vg_attribution", "visual_genome_attribution.json"))}
    assert doc["task"]["blind_baseline"]["available"] and "macro accuracy %" in (out / "table.md").read_text()


RED, BLUE, GREY = (255, 0, 0), (0, 0, 255), (128, 128, 128)


def test_aro_run_crops_the_box_as_the_authors_on_a_hand_worked_colour_case(colour_models, tmp_path):
    """colour-vec: an image is its mean colour, a caption its first colour word. One image, left half red, right
    half blue, a grey strip below. Item 0 (on): box on the red half, "red" true, "blue" false: right (1 > 0; the
    whole image would tie them). Item 1 (holding): box on the grey strip: a tie, a miss. Item 2 (near, excluded
    from the macro): box on the blue half, "blue" true: right. Macro 50 (on 100, holding 0), micro 66.67."""
    from PIL import Image

    arr = np.zeros((30, 40, 3), dtype=np.uint8)
    arr[:20, :20], arr[:20, 20:], arr[20:] = RED, BLUE, GREY
    rel = [aro_row("7.jpg", (0, 0, 20, 20), "a red cup on a table", "a blue cup on a table", "on"),
           aro_row("7.jpg", (0, 20, 40, 10), "a red man holding a cup", "a blue man holding a cup", "holding"),
           aro_row("7.jpg", (20, 0, 20, 20), "a blue car near a tree", "a red car near a tree", "near")]
    write_aro(tmp_path, rel, [])
    (tmp_path / "elsewhere").mkdir()
    Image.fromarray(arr).save(tmp_path / "elsewhere" / "7.jpg", format="PNG")  # exact colours, the released name
    out = tmp_path / "out"
    assert main(["run", "--task", "aro", "--dataset", "aro:vg_relation", "--model", "colour-vec", "--data-dir",
                 str(tmp_path), "--images-dir", str(tmp_path / "elsewhere"), "--out", str(out), "--quiet",
                 "--num-workers", "0", "--cache-dir", str(tmp_path / "c")]) == 0
    got = {r["metric"]: r["value"] for r in _results(out)["results"]}
    assert got["accuracy"] == 50.0 and got["micro_accuracy"] == pytest.approx(200 / 3)
    assert len(list((tmp_path / "c" / "aro-crops").glob("*.png"))) == 3  # the crops live in the cache store
    assert [int(r["correct"]) for r in _rows(out)] == [1, 0, 1]


def _mmvp_fixture(root: Path) -> tuple[Path, dict]:
    base = write_mmvp(root, [("Orientation", "The arrow points up", "The arrow points down"),
                             ("Orientation", "The door is open", "The door is closed"),
                             ("Color", "The apple is red", "The apple is green")])
    kinds = {1: "Orientation", 2: "Orientation", 3: "Orientation", 4: "Orientation", 5: "Color", 6: "Color"}
    pixels = {q: noise_image(base / "MLLM_VLM Images" / k / f"{q}.jpg", 60 + q) for q, k in kinds.items()}
    return base, pixels


def test_mmvp_run_scores_equal_the_authors_rule_on_a_tiny_model(tiny_models, blind_data_dir, tmp_path):
    spec = f"clip:{tiny_models('clip')}"
    base, pixels = _mmvp_fixture(blind_data_dir)
    out = tmp_path / "mmvp"
    assert main(["run", "--task", "mmvp", "--model", spec, "--data-dir", str(blind_data_dir), "--out", str(out),
                 "--quiet", "--num-workers", "0"]) == 0
    images, texts = _encoder(spec)
    with open(base / "Questions.csv", newline="") as fh:
        q = list(csv.DictReader(fh))
    v = dict(zip(sorted(pixels), images([pixels[k] for k in sorted(pixels)])))
    t = texts(["a photo of " + r["Statement"] for r in q])
    flags = []
    rows = {r["item_id"]: r for r in _rows(out)}
    for a, b in zip(q[::2], q[1::2]):
        s = np.array([[t["a photo of " + r["Statement"]] @ v[int(i["Question ID"])] for i in (a, b)] for r in (a, b)])
        assert json.loads(rows[a["Question ID"]]["scores"]) == pytest.approx([s[0, 0], s[1, 0], s[0, 1], s[1, 1]],
                                                                           abs=1e-5)
        flags.append(mmvp_rules(s))
    f = np.array(flags, dtype=float)
    pair = f[:, 0] * f[:, 1]
    got = {r["metric"]: r for r in _results(out)["results"]}
    assert got["accuracy"]["value"] == pytest.approx(100 * pair.mean()) and got["accuracy"]["n"] == 3
    assert got["statement_accuracy"]["value"] == pytest.approx(100 * f[:, :2].mean())
    assert got["i2t_pair_accuracy"]["value"] == pytest.approx(100 * f[:, 2].mean())
    assert got["pattern_orientation"]["value"] == pytest.approx(100 * pair[:2].mean())
    assert got["pattern_color"]["value"] == pytest.approx(100 * pair[2])
    assert got["chance"]["value"] == 25.0 and got["blind_accuracy"]["value"] == 0.0  # no text-only signal
    doc = _results(out)
    assert doc["dataset"]["source"]["sha256"] == hashlib.sha256((base / "Questions.csv").read_bytes()).hexdigest()
    assert doc["dataset"]["prompt"] == "a photo of " and doc["dataset"]["n_images"] == 6
    table = (out / "table.md").read_text()
    assert "Orientation and Direction" in table and "statement %" in table


def test_mmvp_run_on_a_hand_worked_colour_case_with_a_tie(colour_models, tmp_path):
    """Pair 1: red / blue images, "red" / "blue" statements: right. Pair 2: red / blue images, "red" / a
    statement with no colour word (reads (1, 1, 1): the same cosine with both images): t2 ties, a miss."""
    from PIL import Image

    base = write_mmvp(tmp_path, [("Color", "The cup is red", "The cup is blue"),
                                 ("Color", "The hat is red", "The hat is plain")])
    (base / "MLLM_VLM Images" / "Color").mkdir(parents=True)
    for q, rgb in zip(range(1, 5), (RED, BLUE, RED, BLUE)):
        Image.new("RGB", (6, 4), rgb).save(base / "MLLM_VLM Images" / "Color" / f"{q}.jpg", format="PNG")
    out = tmp_path / "out"
    assert main(["run", "--task", "mmvp", "--model", "colour-vec", "--data-dir", str(tmp_path), "--out", str(out),
                 "--quiet", "--num-workers", "0", "--no-cache"]) == 0
    got = {r["metric"]: r["value"] for r in _results(out)["results"]}
    assert got["accuracy"] == 50.0 and got["statement_accuracy"] == 75.0 and got["pattern_color"] == 50.0
    rows = _rows(out)
    assert [(int(r["statement_1_correct"]), int(r["statement_2_correct"])) for r in rows] == [(1, 1), (1, 0)]


def test_missing_set_files_are_named_before_a_model_loads(tmp_path, capsys):
    for task, name in (("mmvp", "Questions.csv"), ("aro", "visual_genome_relation.json")):
        rc = main(["run", "--task", task, "--model", "no-such-model", "--data-dir", str(tmp_path), "--out",
                   str(tmp_path / task)])
        err = capsys.readouterr().err
        assert rc == 2 and name in err and str(tmp_path) in err
