"""Probe plans: which number each image and each caption carries under a probe (matched, mismatched,
caption-only, image-only, bits=<n>)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import VlbenchError
from .digits import N_DIGITS, PROBES, caption


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
