"""A fast zoom_blur with the reference's output.

The reference (``imagecorruptions`` 1.1.2) averages the image with crops of itself enlarged by each zoom factor of
its severity (up to 16 factors), each enlargement a ``scipy.ndimage.zoom`` of order 1. Order-1 spline interpolation
is bilinear, and bilinear interpolation is separable: an enlargement interpolates rows, then columns, two taps
each (``scipy.ndimage.zoom``'s corner-aligned coordinate map, ``in = out * (n_in - 1) / (n_out - 1)``; an output
whose ``in`` overshoots the last sample by float rounding is 0, as under the reference's ``mode='constant'``).
Two vectorised passes per factor replace a per-pixel spline evaluation. Only the rows and columns the reference
keeps (the top-left H x W of the enlargement, a quirk of its ``clipped_zoom`` kept here) are computed.
Arithmetic is float64, cast to float32 per factor as the reference does. scripts/benchmarks/scan_zoom_blur.py compares
the output with the reference's at every side length 32..1024 and severity (0 mismatches).
"""

from __future__ import annotations

import numpy as np

FACTORS = [np.arange(1, 1.11, 0.01), np.arange(1, 1.16, 0.01), np.arange(1, 1.21, 0.02),
           np.arange(1, 1.26, 0.02), np.arange(1, 1.31, 0.03)]  # per severity, as in the reference


def _taps(n_in: int, n_out: int, keep: int):
    """Bilinear taps of a corner-aligned resize from n_in to n_out samples, for the first min(keep, n_out)
    outputs: (lower index, weight of the lower sample, weight of the upper sample)."""
    scale = (n_in - 1) / (n_out - 1) if n_out > 1 else 1.0
    pos = np.arange(min(keep, n_out), dtype=np.float64) * scale
    lo = np.minimum(np.floor(pos).astype(np.int64), max(n_in - 2, 0))
    frac = pos - lo
    # scipy.ndimage.zoom with mode='constant' (the reference's) gives cval 0 to an output whose coordinate lies
    # past the last input sample; ``kk * scale`` can overshoot ``n_in - 1`` by rounding for the last output
    # (e.g. 30 -> 36 samples), and then the reference's whole edge row or column is 0: do the same.
    outside = pos > n_in - 1
    return lo, np.where(outside, 0.0, 1.0 - frac), np.where(outside, 0.0, frac)


def _interp(a: np.ndarray, axis: int, n_out: int, keep: int) -> np.ndarray:
    lo, w0, w1 = _taps(a.shape[axis], n_out, keep)
    hi = np.minimum(lo + 1, a.shape[axis] - 1)
    shape = [1] * a.ndim
    shape[axis] = len(lo)
    return np.take(a, lo, axis) * w0.reshape(shape) + np.take(a, hi, axis) * w1.reshape(shape)


def _enlarged(x: np.ndarray, factor: float) -> np.ndarray:
    """The reference's ``clipped_zoom(x, factor)[:H, :W]`` for an H x W x 3 float32 image."""
    h, w = x.shape[:2]
    ch0, ch1 = int(np.ceil(h / float(factor))), int(np.ceil(w / float(factor)))
    top0, top1 = (h - ch0) // 2, (w - ch1) // 2
    crop = x[top0:top0 + ch0, top1:top1 + ch1].astype(np.float64)
    rows = _interp(crop, 0, int(round(ch0 * factor)), h)
    return _interp(rows, 1, int(round(ch1 * factor)), w).astype(np.float32)


def zoom_blur(x: np.ndarray, severity: int) -> np.ndarray:
    """ImageNet-C zoom blur of an H x W x 3 uint8 image; float values in [0, 255] like the reference."""
    img = (np.asarray(x) / 255.).astype(np.float32)
    out = np.zeros_like(img)
    for factor in FACTORS[severity - 1]:
        layer = _enlarged(img, factor)
        out[:layer.shape[0], :layer.shape[1]] += layer
    blended = (img + out) / (len(FACTORS[severity - 1]) + 1)
    return np.clip(blended, 0, 1) * 255
