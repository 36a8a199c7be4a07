"""Fixtures of ARO's VG-Relation / VG-Attribution and MMVP-VLM in their released layouts (tiny generated images),
written by the tests (the real files are never shipped), and the plain-NumPy rules the papers define."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

#: relations of the authors' notebook list that the macro accuracy leaves out (a few, read from the notebook)
NOTEBOOK_EXCLUDED = ("near", "with", "next to", "of")


def noise_image(path: Path, seed: int, size=(40, 48), fmt: str | None = None) -> np.ndarray:
    """A random RGB image saved at ``path`` (format from the suffix unless ``fmt``); returns its pixels as saved
    (PNG: exactly; JPEG: as decoded again)."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (*size, 3), dtype=np.uint8)).save(path, format=fmt)
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def aro_row(image: str, box, true: str, false: str, group) -> dict:
    """One item of visual_genome_relation.json (``group`` a str) or visual_genome_attribution.json (two strs)."""
    row = {"image_id": image.split(".")[0], "image_path": image, "bbox_x": box[0], "bbox_y": box[1],
           "bbox_w": box[2], "bbox_h": box[3], "true_caption": true, "false_caption": false}
    if isinstance(group, str):
        row["relation_name"] = group
    else:
        row["attributes"] = list(group)
    return row


def write_aro(root: Path, relation: list[dict], attribution: list[dict]) -> Path:
    """<root>/aro/ with both JSON files; the caller writes the images into <root>/aro/images."""
    aro = root / "aro"
    (aro / "images").mkdir(parents=True, exist_ok=True)
    (aro / "visual_genome_relation.json").write_text(json.dumps(relation))
    (aro / "visual_genome_attribution.json").write_text(json.dumps(attribution))
    return aro


def crop(pixels: np.ndarray, box) -> np.ndarray:
    """The box (x, y, w, h) of an image by array slicing, black where it leaves the image (as PIL's crop)."""
    x, y, w, h = (int(v) for v in box)
    out = np.zeros((h, w, 3), dtype=np.uint8)
    H, W = pixels.shape[:2]
    y0, y1, x0, x1 = max(y, 0), min(y + h, H), max(x, 0), min(x + w, W)
    if y1 > y0 and x1 > x0:
        out[y0 - y:y1 - y, x0 - x:x1 - x] = pixels[y0:y1, x0:x1]
    return out


def aro_macro(groups: list[str], right: list[bool], keep) -> float:
    """The authors' macro accuracy: the mean over the kept groups of each group's share of right items, percent."""
    per: dict[str, list[bool]] = {}
    for g, ok in zip(groups, right):
        per.setdefault(g, []).append(ok)
    return 100.0 * float(np.mean([np.mean(v) for g, v in per.items() if keep(g, len(v))]))


def write_mmvp(root: Path, pairs: list[tuple[str, str, str]], folder: str = "MLLM_VLM Images") -> Path:
    """<root>/mmvp_vlm/Questions.csv from (Type, statement 1, statement 2) per pair, ids 1, 2, 3, ... in order; the
    caller writes the images ``<folder>/<Type>/<id>.jpg``."""
    base = root / "mmvp_vlm"
    (base / folder).mkdir(parents=True, exist_ok=True)
    with open(base / "Questions.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["Question ID", "Type", "Statement"])
        for k, (kind, s1, s2) in enumerate(pairs):
            w.writerow([2 * k + 1, kind, s1])
            w.writerow([2 * k + 2, kind, s2])
    return base


def mmvp_rules(s: np.ndarray) -> tuple[bool, bool, bool]:
    """Tong et al. 2024 from s[i, j] = s(statement i, image j): statement 1 picks image 1, statement 2 picks
    image 2 (the pair is right when both do), and the image-to-text reading (each image picks its statement)."""
    return bool(s[0, 0] > s[0, 1]), bool(s[1, 1] > s[1, 0]), bool(s[0, 0] > s[1, 0] and s[1, 1] > s[0, 1])
