"""Shortcut digits: the handwritten digit bank (MNIST, or scikit-learn's digits) and the rendering of a
number onto an image (6 zero-padded digits evenly spaced across the top) or onto a caption."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import stores
from ..errors import VlbenchError

N_DIGITS = 6
PROBES = ("caption-only", "image-only", "matched", "mismatched")  # plus "bits=<n>"
DIGIT_SOURCES = ("auto", "mnist", "sklearn-digits")  # --digits


@dataclass
class DigitBank:
    """Handwritten digit exemplars: ``images[d]`` is a (n, h, w) uint8 array, white ink on black."""

    images: dict[int, np.ndarray]
    source: str  # "mnist" or "sklearn-digits", recorded with results
    fallback: str | None = None  # why "auto" fell back to scikit-learn's digits (printed and recorded)


def _sklearn_bank() -> DigitBank:
    from sklearn.datasets import load_digits

    d = load_digits()
    imgs = np.clip(d.images * (255.0 / 16.0), 0, 255).astype(np.uint8)
    return DigitBank({k: imgs[d.target == k] for k in range(10)}, "sklearn-digits")


def _mnist_bank(root: Path, download: bool) -> DigitBank:
    from torchvision.datasets import MNIST

    ds = MNIST(str(root), train=False, download=download)
    imgs, labels = ds.data.numpy(), ds.targets.numpy()
    return DigitBank({k: imgs[labels == k] for k in range(10)}, "mnist")


def load_digit_bank(source: str = "auto", *, cache_dir: str | os.PathLike | None = None,
                    download: bool = True) -> DigitBank:
    """Digit exemplars from MNIST (torchvision, cached under ``cache_dir``) or scikit-learn's 8x8 digits.

    ``source``: "mnist", "sklearn-digits", or "auto" (MNIST when cached or downloadable, else sklearn).
    """
    if source not in DIGIT_SOURCES:
        raise VlbenchError(f"unknown digit source {source!r}", "use 'auto', 'mnist' or 'sklearn-digits'")
    if source == "sklearn-digits":
        return _sklearn_bank()

    root = stores.path("digits", cache_dir)
    try:
        return _mnist_bank(root, download)
    except Exception as exc:  # offline, torchvision missing, or a broken download
        if source == "mnist":
            raise VlbenchError(f"MNIST could not be loaded from {root} ({exc})",
                               "go online once, or use source='sklearn-digits'") from exc
        bank = _sklearn_bank()
        reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        bank.fallback = (f"the shortcut probes use scikit-learn's 8x8 digits, not MNIST: MNIST could not be loaded "
                         f"from {root} ({reason}); go online once (MNIST is then kept there), or pass --digits "
                         "sklearn-digits to ask for these digits")
        return bank


def digits_of(number: int) -> str:
    if not isinstance(number, (int, np.integer)) or not 0 <= number < 10 ** N_DIGITS:
        raise VlbenchError(f"shortcut number {number!r} is not an integer in [0, {10 ** N_DIGITS})",
                           "pass a number with at most 6 digits")
    return f"{int(number):0{N_DIGITS}d}"


def caption(text: str, number: int) -> str:
    """The caption with the shortcut appended as space-separated digits: 'a dog' -> 'a dog 0 0 0 0 4 2'."""
    return f"{text.rstrip()} {' '.join(digits_of(number))}"


def exemplar_index(seed: int, image_id: str, position: int, n: int) -> int:
    """Which exemplar of a digit to draw: a hash of (seed, image id, position), independent of order."""
    h = hashlib.sha256(f"{seed}\x1f{image_id}\x1f{position}".encode()).digest()
    return int.from_bytes(h[:8], "little") % n


def cell_boxes(width: int, height: int) -> list[tuple[int, int, int, int]]:
    """(left, top, right, bottom) of each digit: 6 square cells across the top, side = min(W/6, H/3)."""
    cell = width / N_DIGITS
    side = max(1, int(min(cell, height / 3)))
    boxes = []
    for p in range(N_DIGITS):
        left = int(round(p * cell + (cell - side) / 2))
        boxes.append((left, 0, left + side, side))
    return boxes


def render(image, number: int, *, bank: DigitBank, seed: int = 0, image_id: str = ""):
    """A copy of ``image`` (PIL) with ``number`` drawn as 6 handwritten digits across its top.

    Each digit tile (white ink on black, as in MNIST) replaces the pixels of its cell so the digit is
    legible whatever the image; the exemplar of each digit is fixed by (seed, image_id, position).
    """
    from PIL import Image

    out = image.convert("RGB").copy()
    for pos, (ch, box) in enumerate(zip(digits_of(number), cell_boxes(*out.size))):
        pool = bank.images[int(ch)]
        tile = pool[exemplar_index(seed, image_id, pos, len(pool))]
        side = box[2] - box[0]
        tile_img = Image.fromarray(tile, mode="L").resize((side, side), Image.Resampling.BILINEAR).convert("RGB")
        out.paste(tile_img, box[:2])
    return out
