"""Two deterministic test model plug-ins for the protocol tests (tests/unit/studies/test_hendriksen2024_protocol.py), and the
colour dataset they are worked by hand on (the ``folder_manifest`` fixture).

``colour-vec``: an image is its mean RGB colour; a caption is the vector of its first colour word
(red, green, blue, yellow), except that a caption containing "true" reads as blue (so the distraction
"and true it true" moves every t2i query). ``colour-rel``: the fixed relevance model; an image is the
one-hot of its strongest channel (first on ties), a caption the vector of its first colour word.
Vectors are L2-normalized by vlbench's encode step, so similarities are cosines.
"""

from __future__ import annotations

import numpy as np

from vlbench.models.adapter import ModelAdapter

#: the ``folder_manifest`` dataset: 5 solid-colour images in the folder, 3 of them listed in the manifest
FOLDER_IMAGES = {"a.png": (255, 50, 0), "b.png": (0, 255, 0), "c.png": (0, 0, 255), "d.png": (255, 0, 0),
                 "e.png": (255, 255, 0)}
FOLDER_CAPTIONS = {"a.png": ["a red car", "a green car"], "b.png": ["a green tree", "a blue door"],
                   "c.png": ["a blue sky", "the blue sea"]}

WORDS = {"red": (1.0, 0.0, 0.0), "green": (0.0, 1.0, 0.0), "blue": (0.0, 0.0, 1.0), "yellow": (1.0, 1.0, 0.0)}


def colour_of(text: str) -> np.ndarray:
    for w in text.lower().replace(".", " ").split():
        if w in WORDS:
            return np.asarray(WORDS[w], dtype=np.float32)
    return np.ones(3, dtype=np.float32)


class ColourModel(ModelAdapter):
    device = "cpu"

    def __init__(self, name: str, relevance: bool):
        self.name, self.relevance = name, relevance

    def identity(self):
        return {"adapter": f"tests.{self.name}"}

    def preprocess(self, image):
        import torch

        mean = np.asarray(image.convert("RGB"), dtype=np.float32).reshape(-1, 3).mean(0) / 255.0
        if self.relevance:
            mean = np.eye(3, dtype=np.float32)[int(np.argmax(mean))]
        return torch.from_numpy(mean)

    def encode_images(self, batch):
        return batch.numpy()

    def encode_texts(self, texts):
        blue = np.asarray(WORDS["blue"], dtype=np.float32)
        return np.stack([blue if not self.relevance and "true" in t.split() else colour_of(t) for t in texts])


def load_vec(checkpoint=None, **kw):
    return ColourModel("colour-vec", relevance=False)


def load_rel(checkpoint=None, **kw):
    return ColourModel("colour-rel", relevance=True)
