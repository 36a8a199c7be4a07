"""Transformed images kept between the Evaluator's calls: the corrupted (or otherwise transformed) image of each
condition and gallery image is made at the first call and read back at the next ones.

A condition's transform names its output by its own key (the corruption, severity, seed and the geometry bound
from the model's preprocessing) and the image file's content key, so a kept image is found again only where the
transform would make the same pixels. The images are kept as uint8 arrays (exactly the pixels made), in a
folder the worker processes that decode images can read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path


class KeptTransform:
    """An ImageTransform (conditions.py) whose PIL outputs are kept in ``folder``; other outputs pass through."""

    def __init__(self, inner, folder: str | os.PathLike):
        self.inner = inner
        self.folder = str(folder)

    def bind(self, adapter) -> dict:
        bind = getattr(self.inner, "bind", None)
        return dict(bind(adapter) or {}) if bind is not None else {}

    def key(self, index: int, content: str) -> str | None:
        return self.inner.key(index, content)

    def _path(self, key: str, content: str) -> Path:
        digest = hashlib.sha256(f"{key}|{content}".encode("utf-8", "surrogatepass")).hexdigest()
        return Path(self.folder) / digest[:2] / f"{digest[:40]}.npy"

    def __call__(self, image, index: int, content: str):
        import numpy as np
        from PIL import Image

        key = self.inner.key(index, content)
        if key is None:
            return self.inner(image, index, content)
        path = self._path(key, content)
        if path.is_file():
            try:
                return Image.fromarray(np.load(path, allow_pickle=False))
            except (OSError, ValueError):
                pass  # a partly written file: made again below
        out = self.inner(image, index, content)
        if isinstance(out, Image.Image):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npy")
            np.save(tmp, np.asarray(out), allow_pickle=False)
            os.replace(tmp, path)
        return out


def kept_plan(plan, folder: str | os.PathLike):
    """The plan with every image-changing condition's transform kept in ``folder``."""

    conditions = tuple(dataclasses.replace(c, image=KeptTransform(c.image, folder)) if c.image is not None else c
                       for c in plan.conditions)
    return dataclasses.replace(plan, conditions=conditions)
