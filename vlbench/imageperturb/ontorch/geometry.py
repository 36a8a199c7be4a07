"""Pillow's resampling in torch, value for value: the geometry a corruption is applied at, made where the images lie.

The reference path fits an image to the model's input with Pillow (:func:`vlbench.imageperturb.apply.fit_to_input`:
bicubic resize of the shorter side, centre crop) and shrinks or enlarges small images with Pillow's box and nearest
filters. On the device the same steps run here on uint8 tensors, with Pillow's own arithmetic: its filter taps and
their bounds, 22-bit fixed-point weights, the horizontal pass first (rows the vertical pass needs), each pass
rounded and clipped to 8 bits, and the nearest filter's accumulated source coordinates. The sums are integers
(exact in float64), so the result does not depend on the summation order or the device: an image fitted here has the
pixels Pillow gives it, which is what lets a corruption run on the device give the DataLoader workers' numbers.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from .digital import nearest_index

_BITS = 22  # Pillow's PRECISION_BITS for 8-bit images


def _box(x: float) -> float:
    return 1.0 if -0.5 < x <= 0.5 else 0.0


def _bilinear(x: float) -> float:
    x = abs(x)
    return 1.0 - x if x < 1.0 else 0.0


def _bicubic(x: float) -> float:
    a, x = -0.5, abs(x)
    if x < 1.0:
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    if x < 2.0:
        return (((x - 5) * x + 8) * x - 4) * a
    return 0.0


#: filter name -> (function, support), Pillow's
FILTERS = {"box": (_box, 0.5), "bilinear": (_bilinear, 1.0), "bicubic": (_bicubic, 2.0)}


@functools.lru_cache(maxsize=256)
def coefficients(n_in: int, n_out: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(source index, fixed-point weight) per output position and tap, each (n_out, taps): Pillow's
    ``precompute_coeffs`` then ``normalize_coeffs_8bpc`` (taps past an output's bound weigh 0)."""
    fn, support = FILTERS[name]
    scale = float(n_in) / n_out
    filterscale = max(scale, 1.0)
    support *= filterscale
    ksize = int(math.ceil(support)) * 2 + 1
    index = np.zeros((n_out, ksize), dtype=np.int64)
    weight = np.zeros((n_out, ksize), dtype=np.int64)
    for xx in range(n_out):
        center = (xx + 0.5) * scale
        xmin = max(int(center - support + 0.5), 0)
        xmax = min(int(center + support + 0.5), n_in) - xmin
        k = np.array([fn((x + xmin - center + 0.5) / filterscale) for x in range(xmax)], dtype=np.float64)
        total = k.sum()
        if total != 0.0:
            k = k / total
        fixed = [int(-0.5 + v * (1 << _BITS)) if v < 0 else int(0.5 + v * (1 << _BITS)) for v in k]
        index[xx, :xmax] = np.arange(xmin, xmin + xmax)
        index[xx, xmax:] = xmin
        weight[xx, :xmax] = fixed
    return index, weight


@functools.lru_cache(maxsize=256)
def weight_matrix(n_in: int, n_out: int, name: str) -> np.ndarray:
    """The fixed-point weights of :func:`coefficients` as a dense (n_in, n_out) float64 matrix (integers)."""
    index, weight = coefficients(n_in, n_out, name)
    dense = np.zeros((n_in, n_out), dtype=np.float64)
    np.add.at(dense, (index, np.broadcast_to(np.arange(n_out)[:, None], index.shape)), weight)
    return dense


def _pass(x: torch.Tensor, n_out: int, axis: int, name: str) -> torch.Tensor:
    """One of Pillow's two passes along ``axis`` (-1 columns, -2 rows) of a float64 batch of whole numbers,
    rounded and clipped to 8 bits as Pillow does. The products and sums are integers below 2**53, exact in
    float64 in any order, so a matrix product gives Pillow's integer sums on any device."""
    dense = torch.as_tensor(weight_matrix(int(x.shape[axis]), int(n_out), name), device=x.device)
    moved = x.transpose(-1, -2) if axis == -2 else x
    acc = torch.matmul(moved, dense) + float(1 << (_BITS - 1))
    out = torch.floor(acc / float(1 << _BITS)).clamp(0, 255)
    return out.transpose(-1, -2) if axis == -2 else out


def resize(x: torch.Tensor, size: tuple[int, int], name: str = "bicubic") -> torch.Tensor:
    """``Image.resize(size, filter)`` of a uint8 batch (B, C, H, W); ``size`` is (width, height), as PIL's."""
    w, h = int(size[0]), int(size[1])
    if name == "nearest":
        rows = torch.as_tensor(nearest_index(x.shape[-2], h), device=x.device)
        cols = torch.as_tensor(nearest_index(x.shape[-1], w), device=x.device)
        return x.index_select(-2, rows).index_select(-1, cols)
    out = x.to(torch.float64)
    if w != x.shape[-1]:
        out = _pass(out, w, -1, name)
    if h != x.shape[-2]:
        out = _pass(out, h, -2, name)
    return out.to(torch.uint8)


def fit_size(w: int, h: int, size: int) -> tuple[int, int, int, int]:
    """(resized width, height, left, top) of :func:`vlbench.imageperturb.apply.fit_to_input` for a w x h image."""
    scale = size / min(w, h)
    nw, nh = max(size, round(w * scale)), max(size, round(h * scale))
    return nw, nh, int(round((nw - size) / 2.0)), int(round((nh - size) / 2.0))


def fit_to_input(x: torch.Tensor, size: int) -> torch.Tensor:
    """The uint8 batch (B, 3, H, W) (images of one size) fitted as the reference fits one image: shorter side to
    ``size`` (Pillow's bicubic), then the centre ``size`` x ``size`` crop."""
    h, w = x.shape[-2:]
    nw, nh, left, top = fit_size(int(w), int(h), int(size))
    if (nw, nh) != (w, h):
        x = resize(x, (nw, nh), "bicubic")
    return x[..., top:top + size, left:left + size]
