"""A test model plug-in that can read the shortcut digits (for tests/integration/test_shortcut_runs.py).

Its embedding is [content (3), digit code (60)]. Content: an image's mean colour, a caption's colour word.
Code: one-hot per (position, digit) of the six digits it reads, times ``WEIGHT``: on an image by template
matching the six top cells against scikit-learn's 8x8 digits (the cells the spec defines), on a caption
from its six trailing space-separated digits; nothing read, zero code.
"""

from __future__ import annotations

import re

import numpy as np

from vlbench.models.adapter import ModelAdapter

WEIGHT = 10.0
COLOURS = {"red": (200, 40, 40), "green": (40, 180, 60), "blue": (40, 60, 200), "yellow": (210, 200, 40),
           "grey": (128, 128, 128)}
_EX = None


def _exemplars():
    global _EX
    if _EX is None:
        from sklearn.datasets import load_digits

        d = load_digits()
        _EX = (d.images.reshape(len(d.images), -1) / 16.0, d.target)
    return _EX


def read_digits(img) -> str | None:
    """The six digits across the top, or None when the top cells hold no tiles (not greyscale)."""
    from PIL import Image

    ex, labels = _exemplars()
    w, h = img.size
    cell = w / 6
    side = int(min(cell, h / 3))
    top = np.asarray(img.crop((0, 0, w, side)), dtype=np.int32)
    if np.mean((top[..., 0] == top[..., 1]) & (top[..., 1] == top[..., 2])) < 0.9:
        return None
    gray = img.convert("L")
    out = ""
    for p in range(6):
        left = int(round(p * cell + (cell - side) / 2))
        v = np.asarray(gray.crop((left, 0, left + side, side)).resize((8, 8), Image.BOX), dtype=float).ravel() / 255
        out += str(labels[np.argmin(((ex - v) ** 2).sum(1))])
    return out


def _code(digits) -> np.ndarray:
    v = np.zeros(60, dtype=np.float32)
    if digits:
        v[[10 * p + int(d) for p, d in enumerate(digits)]] = WEIGHT
    return v


class DigitReader(ModelAdapter):
    name = "digit-reader"
    device = "cpu"

    def identity(self):
        return {"adapter": "tests.digit-reader", "weight": WEIGHT}

    def preprocess(self, image):
        import torch

        w, h = image.size
        body = np.asarray(image.crop((0, h // 2, w, h)), dtype=np.float32).reshape(-1, 3).mean(0) / 255.0 - 0.5
        return torch.from_numpy(np.concatenate([body, _code(read_digits(image))]).astype(np.float32))

    def encode_images(self, batch):
        return batch.numpy()

    def encode_texts(self, texts):
        rows = []
        for t in texts:
            m = re.search(r"((?: \d){6})$", t)
            colour = next(c for c in COLOURS if c in t)
            content = np.asarray(COLOURS[colour], dtype=np.float32) / 255.0 - 0.5
            rows.append(np.concatenate([content, _code(m.group(1).replace(" ", "") if m else None)]))
        return np.stack(rows)


def load(checkpoint=None, **kw):
    return DigitReader()
