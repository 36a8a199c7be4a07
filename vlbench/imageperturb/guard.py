"""Calling an image perturbation and checking what it returns (plug-ins above all), and the pixel limit.

A plug-in is third-party code: it may raise, return the wrong shape, floats in [0, 1] instead of 0-255, or NaN.
Each of these is a DataError naming the perturbation, its source (the plug-in's distribution and version)
and what it returned, raised where the image is corrupted; in DataLoader workers that error travels back as
data (vlbench/encoding/variant_images.py), so the run stops with the message and exit status 2, with or
without workers.

A plug-in that draws from NumPy's global ``RandomState`` (``np.random.rand``) or Python's ``random`` module
instead of the ``rng`` it is given would see whatever state its worker process happens to have, so its output
would depend on the DataLoader worker count and order. Both global states are therefore seeded per image from
(seed, name, severity, image id) before the call and restored after it, under one lock: the output is the same
with 0 or N workers. The ``rng`` argument is not touched by this (it stays the plug-in's first choice).
"""

from __future__ import annotations

import hashlib
import os
import random
import threading

import numpy as np

from ..errors import DataError, VlbenchError

# Largest image (width x height) corrupted at its own size (--corrupt-at original). The reference code works in
# float64 (24 bytes a pixel for RGB) and several corruptions hold a few such copies at once: an 8,000 x 8,000
# image would need 1.43 GiB per copy. 16 megapixels is about 384 MiB a copy; larger photos are refused with a
# message (use --corrupt-at input, or raise the limit with VLBENCH_MAX_CORRUPT_PIXELS).
MAX_CORRUPT_PIXELS = 16_000_000
PIXELS_ENV = "VLBENCH_MAX_CORRUPT_PIXELS"

_LOCK = threading.RLock()


def max_corrupt_pixels() -> int:
    """The pixel limit: ``$VLBENCH_MAX_CORRUPT_PIXELS`` when set (a positive integer), else the default."""
    text = os.environ.get(PIXELS_ENV, "").strip()
    if not text:
        return MAX_CORRUPT_PIXELS
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise VlbenchError(f"{PIXELS_ENV}={text!r} is not a positive whole number of pixels",
                           f"unset it (default {MAX_CORRUPT_PIXELS:,}) or set e.g. {PIXELS_ENV}=40000000")
    return value


def check_size(size: tuple[int, int], image_id) -> None:
    """DataError when a ``(width, height)`` image is above the pixel limit."""
    limit = max_corrupt_pixels()
    if size[0] * size[1] > limit:
        raise DataError(f"image {image_id!r} is {size[0]} x {size[1]} pixels ({size[0] * size[1]:,}), above the "
                        f"{limit:,}-pixel limit for corrupting an image at its own size (--corrupt-at original); "
                        f"the float64 reference code would need about {size[0] * size[1] * 24 / 2**30:.2f} GiB "
                        "per copy of it",
                        f"use --corrupt-at input (corrupt at the model's input size, the default), shrink the "
                        f"image, or raise the limit with {PIXELS_ENV}=<pixels> if the memory is there")


def _global_seed(seed_text: str) -> list[int]:
    digest = hashlib.sha256(("vlbench-image-global|" + seed_text).encode("utf-8")).digest()
    return [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4)]


def call_plugin(fn, name: str, source: str, x: np.ndarray, severity: int, rng, seed_text: str, image_id):
    """``fn(x, severity, rng)`` with NumPy's global RandomState and Python's ``random`` seeded from
    ``seed_text`` (restored afterwards); any exception becomes a DataError naming the plug-in."""
    words = _global_seed(seed_text)
    with _LOCK:
        np_state, py_state = np.random.get_state(), random.getstate()
        try:
            np.random.seed(words)
            random.seed(bytes(np.asarray(words, dtype="<u4").tobytes()))
            return fn(x, severity, rng)
        except VlbenchError:
            raise
        except (Exception, SystemExit) as exc:  # third-party code: report it, whatever it raised
            raise DataError(f"image perturbation {name!r} ({source}) raised {type(exc).__name__}: {exc} "
                            f"on image {image_id!r} at severity {severity}",
                            f"fix or update the plug-in that provides {name!r}, or leave {name!r} out of "
                            "--perturb-images") from None
        finally:
            np.random.set_state(np_state)
            random.setstate(py_state)


def checked_output(out, name: str, source: str, shape: tuple, image_id, plugin: bool,
                   input_max: float = 255.0) -> np.ndarray:
    """``out`` as an array of ``shape`` (H, W, 3) with values for 0-255 pixels, or a DataError saying what
    the perturbation returned instead. A plug-in's float output entirely in [0, 1] for an input that is not
    itself black (``input_max`` > 1) is taken for the [0, 1] convention and refused (a plug-in that means a
    black image can return uint8)."""
    who = f"image perturbation {name!r} ({source})"
    fix = (f"a perturbation must return an H x W x 3 array of the input's size with values 0-255 "
           f"(uint8 or float); fix the plug-in or leave {name!r} out")
    try:
        arr = np.asarray(out)
    except Exception:  # noqa: BLE001 - whatever the object is, it is not an image
        arr = np.asarray(None)
    if arr.dtype.kind not in "biuf":
        raise DataError(f"{who} returned {type(out).__name__} (dtype {arr.dtype}) for image {image_id!r}, "
                        "not a numeric array", fix)
    if arr.shape != shape:
        raise DataError(f"{who} returned shape {arr.shape} for image {image_id!r}, expected {shape}", fix)
    if arr.dtype.kind == "f":
        bad = int(np.count_nonzero(~np.isfinite(arr)))
        if bad:
            raise DataError(f"{who} returned {bad} NaN or infinite values of {arr.size} for image {image_id!r}",
                            fix)
        if plugin and input_max > 1 and arr.size and float(arr.max()) <= 1.0 and float(arr.min()) >= 0.0:
            raise DataError(f"{who} returned floats in [0, 1] (max {float(arr.max()):.4g}) for image "
                            f"{image_id!r}: read as 0-255 pixel values these make an almost black image",
                            "return pixel values 0-255 (multiply by 255, or return uint8); " + fix)
    return arr
