"""Worked example of a vlbench dataset plug-in: four colour squares with two captions each, made on first use.

A dataset plug-in is a factory called with the keyword arguments data_dir, gallery, require_images and
download (and extra_positives when given) that returns a vlbench Dataset; a JSONL manifest read by
load_custom is the simplest way. In a package, declare

    [project.entry-points."vlbench.datasets"]
    colour-squares = "mypkg.datasets:load_colour_squares"
"""

import json
from dataclasses import replace
from pathlib import Path

from PIL import Image

from vlbench.datasets.core import load_custom

SQUARES = {"red": (230, 20, 20), "green": (20, 200, 40), "blue": (30, 40, 220), "yellow": (240, 230, 30)}


def load_colour_squares(*, data_dir=None, require_images=True, **options):
    root = Path(data_dir or "vlbench-data") / "colour-squares"
    manifest = root / "manifest.jsonl"
    if not manifest.exists():
        root.mkdir(parents=True, exist_ok=True)
        rows = []
        for colour, rgb in SQUARES.items():
            Image.new("RGB", (32, 32), rgb).save(root / f"{colour}.png")
            rows.append({"image": f"{colour}.png", "captions": [f"a {colour} square", f"a square painted {colour}"]})
        manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = load_custom(str(manifest), require_images=require_images)
    return replace(ds, name="colour-squares")  # a Dataset is frozen: a renamed copy
