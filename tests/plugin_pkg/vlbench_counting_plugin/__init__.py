"""A worked example of a vlbench model plug-in (installed for real in the tests).

Declare an entry point in your package's pyproject.toml::

    [project.entry-points."vlbench.models"]
    counting = "vlbench_counting_plugin:load"

``load(checkpoint, device=..., precision=..., **kw)`` returns a ModelAdapter. This toy model maps an
image to a vector from its pixel statistics and a caption to a hashed bag of words, and appends
every batch it encodes to the file named by $VLBENCH_COUNT_FILE (one JSON line per batch), so
tests can prove what was (not) encoded.

Checkpoint options (``counting:OPTS``, comma-separated): ``dim=N`` embedding size, ``slow=S``
seconds to sleep per batch, ``oom_above=N`` raise an out-of-memory error for batches larger than N,
``nan`` return NaN image embeddings, ``textdim=N`` a different text embedding size,
``fail`` fail to load.
"""

from __future__ import annotations

import hashlib
import json
import os
import time

import numpy as np

from vlbench import ModelAdapter


class FakeOutOfMemoryError(RuntimeError):
    """Named like torch.OutOfMemoryError: the runner recognizes it by name and message."""


class CountingModel(ModelAdapter):
    name = "counting"

    def __init__(self, opts: dict):
        self.opts = opts
        self.dim = int(opts.get("dim", 32))
        self.text_dim = int(opts.get("textdim", self.dim))
        self.device = "cpu"
        self.counts = {"images": 0, "texts": 0, "image_batches": 0, "text_batches": 0}

    def identity(self):
        return {"adapter": "counting", "opts": self.opts, "embed_dim": self.dim}

    def _log(self, kind, n):
        self.counts[kind] += n
        self.counts[kind[:-1] + "_batches"] += 1
        path = os.environ.get("VLBENCH_COUNT_FILE")
        if path:
            with open(path, "a") as fh:
                fh.write(json.dumps({"kind": kind, "n": n, "pid": os.getpid()}) + "\n")
        if "slow" in self.opts:
            time.sleep(float(self.opts["slow"]))

    def preprocess(self, image):
        import torch

        arr = np.asarray(image.resize((8, 8)), dtype=np.float32) / 255.0
        return torch.from_numpy(arr.reshape(-1))

    def encode_images(self, batch):
        n = len(batch)
        if "oom_above" in self.opts and n > int(self.opts["oom_above"]):
            raise FakeOutOfMemoryError(f"CUDA out of memory (fake) for a batch of {n}")
        x = batch.numpy()
        rng = np.random.default_rng(0)
        proj = rng.standard_normal((x.shape[1], self.dim)).astype(np.float32)
        out = (x - 0.5) @ proj
        if "nan" in self.opts:
            out[:] = np.nan
        self._log("images", n)
        return out

    def encode_texts(self, texts):
        out = np.zeros((len(texts), self.text_dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                h = int(hashlib.md5(w.encode()).hexdigest(), 16)
                out[i, h % self.text_dim] += 1.0 if (h >> 64) % 2 else -1.0
            out[i, 0] += 0.01
        self._log("texts", len(texts))
        return out


def load(checkpoint=None, **kw):
    opts = {}
    for part in filter(None, (checkpoint or "").split(",")):
        key, _, val = part.partition("=")
        opts[key] = val or True
    if "fail" in opts:
        raise RuntimeError("this checkpoint is broken on purpose")
    return CountingModel(opts)
