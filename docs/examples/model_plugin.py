"""Worked example of a vlbench model plug-in: a dual encoder of colours, with no weights.

An image becomes its mean colour, a caption the colour its colour words name; both as (R, G, B) - 0.5,
so vlbench's cosine similarity is 1 for a caption that names the image's colour. In a package, declare

    [project.entry-points."vlbench.models"]
    colour = "mypkg.models:load_colour_model"
"""

import numpy as np

from vlbench import ModelAdapter

RGB = {"red": (1, 0, 0), "green": (0, 1, 0), "blue": (0, 0, 1), "yellow": (1, 1, 0)}


class ColourModel(ModelAdapter):
    name = "colour"
    device = "cpu"

    def identity(self) -> dict:  # everything that changes a vector; hashed into cache keys and results
        return {"adapter": "colour", "version": 1, "embed_dim": 3}

    def preprocess(self, image):  # PIL image (RGB) -> model input; runs in the DataLoader workers
        return np.asarray(image, dtype=np.float32).reshape(-1, 3).mean(axis=0) / 255.0

    def collate(self, items):  # model inputs -> one batch
        return np.stack(items)

    def encode_images(self, batch):  # -> (n, 3); vlbench L2-normalizes
        return batch - 0.5

    def encode_texts(self, texts):  # a caption with no colour word is black
        out = np.zeros((len(texts), 3), dtype=np.float32)
        for i, text in enumerate(texts):
            named = [RGB[w] for w in text.lower().replace(".", " ").split() if w in RGB]
            out[i] = np.mean(named, axis=0) if named else 0.0
        return out - 0.5


def load_colour_model(checkpoint=None, *, device="cpu", precision="fp32", **options):
    """The loader vlbench calls for ``--model colour[:CHECKPOINT]``."""
    return ColourModel()
