"""ColorSwap and BiVLC fixtures in their released layouts, written by the tests: the Hub's parquet files
(``data/<split>-00000-of-00001.parquet``, image columns as ``{"bytes", "path"}`` structs with the ``datasets``
library's feature metadata) and ColorSwap's archive layout (``data/test.json`` beside ``data/images/``); tiny
generated images, different per key so a tiny model tells them apart."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from support.hub_datasets import parquet_bytes

BIVLC_CAPTIONS = [("a man throwing a ball on a field", "a man throwing a ball while a child smiles on a field", "add"),
                  ("a red bus parked by a tree", "a blue bus parked by a tree", "replace"),
                  ("a cat on a chair next to a dog", "a dog on a chair next to a cat", "swap"),
                  ("two people ride horses on a beach", "two people walk horses on a beach", "replace"),
                  ("a plate of food with a fork", "a plate of food with a knife", "replace")]
COLORSWAP_CAPTIONS = [("someone holding a yellow umbrella wearing a white dress",
                       "someone holding a white umbrella wearing a yellow dress", "midjourney"),
                      ("a white raft floats on blue water", "a blue raft floats on white water", "dalle3"),
                      ("a red cup on a green table", "a green cup on a red table", "stable-diffusion"),
                      ("a black dog with a brown ball", "a brown dog with a black ball", "midjourney")]


def noise_png(seed: int, size=(24, 20)) -> bytes:
    """A small random-noise PNG (width x height), one per seed."""
    from PIL import Image

    buf = io.BytesIO()
    arr = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


IMAGE_FEATURE = {"_type": "Image"}


def bivlc_parquet(captions=BIVLC_CAPTIONS, seed: int = 0) -> bytes:
    """BiVLC's test split as one parquet file: image, caption, negative_caption, negative_image, type, subtype."""
    n = len(captions)
    cols = {"image": [(noise_png(seed + 2 * k), None) for k in range(n)],
            "caption": [c for c, _, _ in captions], "negative_caption": [c for _, c, _ in captions],
            "negative_image": [(noise_png(seed + 2 * k + 1), None) for k in range(n)],
            "type": [t for _, _, t in captions], "subtype": ["obj"] * n}
    feats = {"image": IMAGE_FEATURE, "caption": {"dtype": "string", "_type": "Value"},
             "negative_caption": {"dtype": "string", "_type": "Value"}, "negative_image": IMAGE_FEATURE,
             "type": {"dtype": "string", "_type": "Value"}, "subtype": {"dtype": "string", "_type": "Value"}}
    return parquet_bytes(cols, features=feats)


def colorswap_parquet(captions=COLORSWAP_CAPTIONS, seed: int = 100, first_id: int = 0) -> bytes:
    """A ColorSwap split as one parquet file: id, image_1, image_2, caption_1, caption_2, image_source,
    caption_source."""
    n = len(captions)
    cols = {"id": list(range(first_id, first_id + n)),
            "image_1": [(noise_png(seed + 2 * k), f"img_{first_id + k}_1.png") for k in range(n)],
            "image_2": [(noise_png(seed + 2 * k + 1), f"img_{first_id + k}_2.png") for k in range(n)],
            "caption_1": [a for a, _, _ in captions], "caption_2": [b for _, b, _ in captions],
            "image_source": [s for _, _, s in captions], "caption_source": ["human"] * n}
    return parquet_bytes(cols, features={"image_1": IMAGE_FEATURE, "image_2": IMAGE_FEATURE})


def write_bivlc(data_dir: Path, data: bytes | None = None) -> Path:
    """<data_dir>/bivlc/data/test-00000-of-00001.parquet, as 'hf download --local-dir' leaves it."""
    path = data_dir / "bivlc" / "data" / "test-00000-of-00001.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bivlc_parquet() if data is None else data)
    return path


def write_colorswap(data_dir: Path) -> Path:
    """<data_dir>/colorswap/data/{test,train}-00000-of-00001.parquet (the test split holds COLORSWAP_CAPTIONS)."""
    folder = data_dir / "colorswap" / "data"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test-00000-of-00001.parquet").write_bytes(colorswap_parquet())
    (folder / "train-00000-of-00001.parquet").write_bytes(colorswap_parquet(COLORSWAP_CAPTIONS[:1], 300, 900))
    return folder


def write_colorswap_archive(data_dir: Path, rows: list[dict] | None = None) -> Path:
    """The authors' archive layout: <data_dir>/colorswap/data/test.json and data/images/img_<id>_<k>.png."""
    folder = data_dir / "colorswap" / "data"
    if rows is None:
        rows = [{"id": k, "caption_1": a, "caption_2": b, "image_1": f"images/img_{k}_1.png",
                 "image_2": f"images/img_{k}_2.png", "image_source": s, "caption_source": "human"}
                for k, (a, b, s) in enumerate(COLORSWAP_CAPTIONS)]
    (folder / "images").mkdir(parents=True, exist_ok=True)
    for k, r in enumerate(rows):
        for j, f in enumerate(("image_1", "image_2")):
            if isinstance(r.get(f), str) and r[f].startswith("images/"):
                (folder / r[f]).write_bytes(noise_png(500 + 2 * k + j))
    (folder / "test.json").write_text(json.dumps(rows))
    return folder / "test.json"
