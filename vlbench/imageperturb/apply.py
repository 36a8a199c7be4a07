"""Applying a corruption to one decoded image, deterministically per (seed, name, severity, image id)."""

from __future__ import annotations

import hashlib

import numpy as np
from PIL import Image

from ..errors import VlbenchError
from .guard import call_plugin, check_size, checked_output
from .registry import image_perturbations
from .spec import SEVERITIES, TORCH_DEVICE, cache_key, check_backend

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


def corrupt(image, name: str, severity: int, seed: int, image_id, backend: str = "reference",
            device: str = TORCH_DEVICE) -> Image.Image:
    """``image`` corrupted by ``name`` at ``severity`` (1-5); an RGB PIL image of the same size.

    ``backend="torch"``: a built-in runs through the torch code (vlbench/imageperturb/ontorch) on ``device`` (the
    CPU unless told), seeded with the same per-image seed (other numbers: torch's generator); plug-ins run their
    own code either way.

    Greyscale, palette and alpha images become RGB first (alpha over white). Images with a side under
    32 pixels are enlarged (nearest) to 32, corrupted and shrunk back (box filter), since the reference
    definitions assume at least that size. Images above the pixel limit (:mod:`.guard`) are refused; a
    plug-in's errors and bad outputs are DataErrors naming it, and it runs with NumPy's and Python's global
    random state seeded per image (so its output does not depend on DataLoader workers).
    """
    if int(severity) not in SEVERITIES or isinstance(severity, bool):
        raise VlbenchError(f"image {image_id!r}: severity {severity!r} of {name!r} is outside 1-5",
                           "use a severity from 1 to 5")
    entry = image_perturbations.entry(name)
    fn = image_perturbations.get(name)
    check_backend(backend)
    rgb = _to_rgb(image, image_id)
    size = rgb.size
    check_size(size, image_id)
    if min(size) < MIN_SIDE:
        scale = MIN_SIDE / min(size)
        rgb = rgb.resize((max(MIN_SIDE, round(size[0] * scale)), max(MIN_SIDE, round(size[1] * scale))),
                         Image.Resampling.NEAREST)
    rng = np.random.Generator(np.random.PCG64(derive_seed(seed, name, int(severity), image_id)))
    x = np.asarray(rgb, dtype=np.uint8)
    plugin = entry.source != "builtin"
    if backend == "torch" and not plugin:
        from .ontorch import corrupt_array  # lazy: torch only for --corrupt-backend torch

        out = corrupt_array(x, name, int(severity), derive_seed(seed, name, int(severity), image_id), device)
    elif plugin:  # third-party code: errors reported by name, global random state seeded per image
        out = call_plugin(fn, name, entry.source, x, int(severity), rng,
                          f"{int(seed)}|{name}|{int(severity)}|{image_id}", image_id)
    else:
        out = fn(x, int(severity), rng)
    out = checked_output(out, name, entry.source, (rgb.size[1], rgb.size[0], 3), image_id, plugin,
                         float(x.max()) if x.size else 0.0)
    result = Image.fromarray(np.uint8(np.clip(out, 0, 255)), "RGB")
    return result if result.size == size else result.resize(size, Image.Resampling.BOX)


def fit_to_input(image: Image.Image, size: int) -> Image.Image:
    """ImageNet-C geometry: shorter side resized to ``size`` (bicubic), then the centre ``size`` x ``size`` crop,
    which is also what CLIP-style preprocessing does before normalising (so the model sees the same pixels)."""
    size = int(size)
    w, h = image.size
    scale = size / min(w, h)
    nw, nh = max(size, round(w * scale)), max(size, round(h * scale))
    if (nw, nh) != (w, h):
        image = image.resize((nw, nh), Image.Resampling.BICUBIC)
    left, top = int(round((nw - size) / 2.0)), int(round((nh - size) / 2.0))
    return image.crop((left, top, left + size, top + size))


def model_input_size(preprocess) -> int | None:
    """The square input resolution a model's image preprocessing produces (e.g. 224), found by preprocessing
    a blank 320 x 256 image; None when the output is not a square C x H x W array (corrupt the original then)."""
    out = preprocess(Image.new("RGB", (320, 256), (128, 128, 128)))
    shape = tuple(getattr(out, "shape", ()))
    return int(shape[1]) if len(shape) == 3 and shape[1] == shape[2] and shape[1] >= MIN_SIDE else None


class CorruptedLoader:
    """Picklable transform for DataLoader workers: ``CorruptedLoader(name, severity, seed)(img, image_id)``.

    ``input_size`` (e.g. 224): corrupt at the model's input geometry (:func:`fit_to_input` first), as ImageNet-C
    does; its severities are calibrated in pixels of a 224 x 224 image. ``None`` corrupts the decoded original.

    ``device``: where the torch backend runs (the CPU in DataLoader workers; it names the device type in the cache
    key). Apply after decoding and before the model's preprocessing; the output depends only on the
    constructor arguments, the image and its id, so worker count and order do not matter.
    """

    def __init__(self, name: str, severity: int, seed: int = 0, input_size: int | None = None,
                 backend: str = "reference", device: str = TORCH_DEVICE):
        self.name, self.severity, self.seed, self.backend = name, int(severity), int(seed), check_backend(backend)
        self.device = str(device)
        self.input_size = None if input_size is None else int(input_size)
        if self.input_size is not None and self.input_size < MIN_SIDE:
            raise VlbenchError(f"input_size {input_size!r} is below {MIN_SIDE} pixels",
                               "give the model's input resolution, e.g. 224, or None to corrupt the original image")
        self.cache_key = cache_key(name, self.severity, self.seed, backend, self.device)  # also validates the name
        if self.input_size is not None:
            self.cache_key += f":at{self.input_size}"

    def __call__(self, image, image_id) -> Image.Image:
        if self.input_size is not None:
            image = fit_to_input(_to_rgb(image, image_id), self.input_size)
        return corrupt(image, self.name, self.severity, self.seed, image_id, self.backend, self.device)

    def __repr__(self) -> str:
        at = "" if self.input_size is None else f", input_size={self.input_size}"
        at += "" if self.backend == "reference" else f", backend={self.backend!r}"
        at += "" if self.device == TORCH_DEVICE else f", device={self.device!r}"
        return f"CorruptedLoader({self.name!r}, {self.severity}, seed={self.seed}{at})"
