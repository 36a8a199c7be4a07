"""The leaderboard names how each model scored a choice task: a Winoground run of a tiny BLIP ITM pair scorer
(kind "pair") beside one of a tiny CLIP (kind "dual"), each row's accuracy the one its run recorded."""

from __future__ import annotations

import csv
import json

import numpy as np
from PIL import Image
from support.tiny_pair_models import save_blip_itm

from vlbench.cli import main

WINO = [("a man riding horse on the beach", "a horse riding man on the beach"),
        ("a red car near a blue bus", "a blue car near a red bus"),
        ("two dogs play in the snow", "the snow play in two dogs")]


def _winoground(root):
    """Winoground in its released layout (examples.jsonl + images/), noise images that differ per key."""
    wino = root / "winoground"
    (wino / "images").mkdir(parents=True)
    lines = []
    for k, (c0, c1) in enumerate(WINO):
        lines.append(json.dumps({"id": k, "image_0": f"ex_{k}_img_0", "image_1": f"ex_{k}_img_1", "caption_0": c0,
                                 "caption_1": c1, "tag": "Object", "secondary_tag": "", "num_main_preds": 1,
                                 "collapsed_tag": "Object"}))
        for j in (0, 1):
            px = np.random.default_rng(10 * k + j).integers(0, 256, (28, 36, 3), dtype=np.uint8)
            Image.fromarray(px).save(wino / "images" / f"ex_{k}_img_{j}.png")
    (wino / "examples.jsonl").write_text("\n".join(lines) + "\n")
    return root


def test_the_choice_table_names_a_pair_scorer_and_a_dual_encoder(tmp_path, tiny_models):
    data = _winoground(tmp_path / "data")
    runs = {"pair": (tmp_path / "blip", f"blip-itm:{save_blip_itm(tmp_path / 'blip-itm')}"),
            "dual": (tmp_path / "clip", f"clip:{tiny_models('clip')}")}
    for out, model in runs.values():
        assert main(["run", "--task", "winoground", "--model", model, "--data-dir", str(data), "--out", str(out),
                     "--no-cache", "--num-workers", "0", "--quiet"]) == 0
    board = tmp_path / "board"
    assert main(["leaderboard", "build", *(str(o) for o, _ in runs.values()), "--out", str(board),
                 "--no-plots"]) == 0
    with open(board / "choice_tasks.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert sorted(r["stages"] for r in rows) == ["dual", "pair"]
    for kind, (out, _) in runs.items():
        doc = json.loads((out / "results.json").read_text())
        want = next(r["value"] for r in doc["results"] if r["metric"] == "accuracy")
        (row,) = [r for r in rows if r["stages"] == kind]
        assert float(row["accuracy"]) == round(want, 6)
    assert "kind / stages" in (board / "index.html").read_text()
