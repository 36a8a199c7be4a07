"""Applying a corruption to one decoded image, deterministically per (seed, name, severity, image id)."""

from __future__ import annotations

import hashlib

import numpy as np
from PIL import Image

from ..errors import VlbenchError
from .spec import SEVERITIES

MIN_SIDE = 32  # the reference needs at least 32 x 32 pixels


def derive_seed(seed: int, name: str, severity: int, image_id) -> int:
    """A 128-bit seed from (seed, name, severity, image id); stable across processes and platforms."""
    text = f"vlbench-image|{int(seed)}|{name}|{int(severity)}|{image_id}"
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:16], "little")


def _to_rgb(image, image_id) -> Image.Image:
    if not isinstance(image, Image.Image):
        raise VlbenchError(f"image {image_id!r}: corrupt() needs a decoded PIL image, got "
                           f"{type(image).__name__}", "decode the file with PIL.Image.open first")
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        background = Image.new("RGBA", image.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, image.convert("RGBA")).convert("RGB")
    return image.convert("RGB")


def corrupt(image, name: str, severity: int, seed: int, image_id) -> Image.Image:
    """``image`` corrupted by ``name`` at ``severity`` (1-5); an RGB PIL image of the same size.

    Greyscale, palette and alpha images become RGB first (alpha over white). Images with a side under
    32 pixels are enlarged (nearest) to 32, corrupted and shrunk back (box filter), since the reference
    definitions assume at least that size.
    """
    from .registry import image_perturbations
    if int(severity) not in SEVERITIES or isinstance(severity, bool):
        raise VlbenchError(f"image {image_id!r}: severity {severity!r} of {name!r} is outside 1-5",
                           "use a severity from 1 to 5")
    fn = image_perturbations.get(name)
    rgb = _to_rgb(image, image_id)
    size = rgb.size
    if min(size) < MIN_SIDE:
        scale = MIN_SIDE / min(size)
        rgb = rgb.resize((max(MIN_SIDE, round(size[0] * scale)), max(MIN_SIDE, round(size[1] * scale))),
                         Image.NEAREST)
    rng = np.random.Generator(np.random.PCG64(derive_seed(seed, name, int(severity), image_id)))
    out = np.asarray(fn(np.asarray(rgb, dtype=np.uint8), int(severity), rng))
    if out.shape != (rgb.size[1], rgb.size[0], 3):
        raise VlbenchError(f"image perturbation {name!r} returned shape {out.shape} for image {image_id!r} "
                           f"of size {rgb.size}", "a corruption must return an H x W x 3 array")
    result = Image.fromarray(np.uint8(np.clip(out, 0, 255)), "RGB")
    return result if result.size == size else result.resize(size, Image.BOX)


class CorruptedLoader:
    """Picklable transform for DataLoader workers: ``CorruptedLoader(name, severity, seed)(img, image_id)``.

    Apply after decoding and before the model's preprocessing; the output depends only on the
    constructor arguments, the image and its id, so worker count and order do not matter.
    """

    def __init__(self, name: str, severity: int, seed: int = 0):
        from .spec import cache_key
        self.name, self.severity, self.seed = name, int(severity), int(seed)
        self.cache_key = cache_key(name, self.severity, self.seed)  # also validates the name

    def __call__(self, image, image_id) -> Image.Image:
        return corrupt(image, self.name, self.severity, self.seed, image_id)

    def __repr__(self) -> str:
        return f"CorruptedLoader({self.name!r}, {self.severity}, seed={self.seed})"
