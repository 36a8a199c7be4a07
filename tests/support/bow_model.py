"""Two deterministic model plug-ins for the sensitivity tests: a bag-of-words model (order-free, as the blind
baseline's reference point: it cannot tell "a dog chases a cat" from "a cat chases a dog") and a model that keeps
word order (its words and its word bigrams).

A caption's vector counts its lower-case word tokens (``[a-z0-9]+``; punctuation and case do not count), each
word hashed to a fixed dimension, in the first :data:`DIM` dimensions; the ordered model adds its word bigrams in
the next :data:`DIM`. Counts are integers, so two captions with the same words get the very same vector,
whatever their order. An image is the sum of its captions' vectors: the images are solid colours, and
:data:`CAPTIONS` (filled by :func:`write_colour_set`) says which captions each colour has. vlbench's encode
step L2-normalises both, so similarities are cosines.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np

from vlbench.models.adapter import ModelAdapter

DIM = 4096  # wide enough that no two words (or bigrams) of the tests share a dimension
#: colour (r, g, b) -> the captions of that image (written by write_colour_set)
CAPTIONS: dict[tuple, list[str]] = {}
_WORD = re.compile(r"[a-z0-9]+")


def _slot(token: str) -> int:
    return int(hashlib.sha256(token.encode()).hexdigest(), 16) % DIM


def text_vector(text: str, ordered: bool) -> np.ndarray:
    words = _WORD.findall(text.lower())
    v = np.zeros(2 * DIM if ordered else DIM, dtype=np.float32)
    for w in words:
        v[_slot(w)] += 1.0
    if ordered:
        for a, b in zip(words, words[1:]):
            v[DIM + _slot(f"{a} {b}")] += 1.0
    return v


class WordModel(ModelAdapter):
    device = "cpu"

    def __init__(self, ordered: bool):
        self.ordered = ordered

    def identity(self):
        return {"adapter": "tests.bow_model", "ordered": self.ordered, "order_free": not self.ordered}

    def preprocess(self, image):
        import torch

        rgb = np.asarray(image.convert("RGB"), dtype=np.int64).reshape(-1, 3)[0]
        return torch.from_numpy(rgb)

    def image_vector(self, rgb) -> np.ndarray:
        caps = CAPTIONS.get(tuple(int(x) for x in rgb))
        if not caps:
            raise KeyError(f"no captions registered for the colour {tuple(rgb)}")
        return np.sum([text_vector(c, self.ordered) for c in caps], axis=0)

    def encode_images(self, batch):
        return np.stack([self.image_vector(rgb) for rgb in batch.numpy()])

    def encode_texts(self, texts):
        return np.stack([text_vector(t, self.ordered) for t in texts])


def load_bow(checkpoint=None, **kw):
    return WordModel(ordered=False)


def load_ordered(checkpoint=None, **kw):
    return WordModel(ordered=True)


def write_colour_set(root: Path, rows: list[list[str]]) -> Path:
    """One solid-colour image per row of captions under ``root/images`` and a manifest ``root/m.jsonl``;
    registers each colour's captions in :data:`CAPTIONS`. Returns the manifest."""
    from PIL import Image

    from support.data import write_rows

    folder = root / "images"
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, caps in enumerate(rows):
        rgb = (10 + 20 * (i % 12), 40 + 15 * (i // 12), 200 - 7 * i)
        CAPTIONS[rgb] = list(caps)
        name = f"img{i:02d}.png"
        Image.fromarray(np.full((8, 8, 3), rgb, dtype=np.uint8)).save(folder / name)
        out.append({"image": f"images/{name}", "captions": list(caps)})
    return write_rows(root / "m.jsonl", out)
