"""Synthetic-shortcut probes (the SVL framework of Bleeker et al., TMLR 2024, used at test time).

A shortcut is a number written as 6 zero-padded digits: on an image, as handwritten digit images evenly
spaced across the top (one cell of width W/6 per digit); on a caption, appended as space-separated digits.
A probe says which number each image and each caption carries (see :func:`probe_plan`).
"""

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


@dataclass
class ProbePlan:
    """Which number each image and each caption carries (None = no shortcut)."""

    probe: str
    seed: int
    image_numbers: list[int | None]
    caption_numbers: list[int | None]


def parse_probe(probe: str) -> int | None:
    """The n of 'bits=n' (1..19), None for the named probes; a VlbenchError for anything else."""
    if probe in PROBES:
        return None
    if probe.startswith("bits="):
        try:
            n = int(probe[5:])
        except ValueError:
            n = -1
        if 1 <= n <= 19:  # 2**19 < 10**6: every value fits in 6 digits
            return n
    raise VlbenchError(f"unknown shortcut probe {probe!r}",
                       f"use one of {', '.join(PROBES)} or bits=<n> with 1 <= n <= 19")


def derangement(n: int, seed: int) -> np.ndarray:
    """A seeded permutation of range(n) with no fixed point (n >= 2): a random cyclic shift of a
    random order, so every element moves."""
    if n < 2:
        raise VlbenchError(f"a mismatched probe needs at least 2 images, got {n}", "use a larger dataset")
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    shift = int(rng.integers(1, n))
    out = np.empty(n, dtype=np.int64)
    out[order] = order[(np.arange(n) + shift) % n]
    return out


def probe_plan(n_images: int, caption_to_image, probe: str, *, seed: int = 0) -> ProbePlan:
    """Numbers per image and per caption for a probe over a dataset of ``n_images`` images.

    Image i's number is i (``bits=n``: i mod 2**n). caption-only / image-only: only that modality carries
    it. matched: image i and its captions carry i's number. mismatched: image i carries i, the captions of
    image i carry the number of image d(i), d a seeded derangement.
    """
    bits = parse_probe(probe)
    if n_images > 10 ** N_DIGITS:
        raise VlbenchError(f"{n_images} images need more than {N_DIGITS} digits", "probe at most 1e6 images")
    c2i = np.asarray(caption_to_image, dtype=np.int64)
    own = np.arange(n_images) if bits is None else np.arange(n_images) % (2 ** bits)
    img: list[int | None] = [int(x) for x in own]
    cap_of_image = own
    if probe == "mismatched":
        cap_of_image = own[derangement(n_images, seed)]
    caps: list[int | None] = [int(cap_of_image[i]) for i in c2i]
    if probe == "caption-only":
        img = [None] * n_images
    if probe == "image-only":
        caps = [None] * len(c2i)
    return ProbePlan(probe, seed, img, caps)


def apply_plan_to_captions(captions: list[str], plan: ProbePlan) -> list[str]:
    if len(captions) != len(plan.caption_numbers):
        raise VlbenchError(f"{len(captions)} captions but the plan has {len(plan.caption_numbers)}",
                           "build the plan from the same dataset")
    return [t if k is None else caption(t, k) for t, k in zip(captions, plan.caption_numbers)]
