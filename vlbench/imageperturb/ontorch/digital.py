"""The digital corruptions in torch: contrast, elastic_transform, pixelate, jpeg_compression (conventions: noise.py).

pixelate repeats Pillow's arithmetic: the box-filter reduction's coefficients (Pillow's support bounds and
box test), 22-bit fixed-point weights and rounding, horizontal pass then vertical, each rounded to 8 bits, then
nearest-neighbour enlargement with Pillow's accumulated source coordinates. jpeg_compression encodes and decodes
with torchvision (libjpeg on the CPU, nvJPEG on a CUDA device) at the reference's qualities, 4:2:0.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 -- torch's own convention

from .common import gaussian, uniform

CONTRAST = [0.4, .3, .2, .1, .05]
ELASTIC = [250 * 0.05, 250 * 0.065, 250 * 0.085, 250 * 0.1, 250 * 0.12]
PIXELATE = [0.6, 0.5, 0.4, 0.3, 0.25]
JPEG = [25, 18, 15, 10, 7]
_BITS = 22  # Pillow's PRECISION_BITS for 8-bit images


def contrast(x, severity, draws):
    """(x/255 - m) * c + m, m the per-channel mean, clipped, times 255."""
    img = x / 255.
    m = img.mean(dim=(2, 3), keepdim=True)
    return ((img - m) * CONTRAST[severity - 1] + m).clamp(0, 1) * 255


def draw_elastic_transform(g, x, severity):
    h, w = x.shape[-2:]
    most = h * 0.005  # the reference uses the height for both directions
    return {"dx": uniform(g, (h, w), -most, most, x.device), "dy": uniform(g, (h, w), -most, most, x.device)}


def elastic_transform(x, severity, draws):
    """x/255 sampled (bilinear, mirrored border) at (row + dy, col + dx): uniform fields smoothed by a Gaussian of
    sigma 1% of each side (mirrored border, truncated at 3 sigma), times alpha; clipped, times 255."""
    b, _, h, w = x.shape
    alpha = ELASTIC[severity - 1]
    sigma = (h * 0.01, w * 0.01)
    fields = torch.stack([torch.stack([d["dx"], d["dy"]]) for d in draws])  # (B, 2, H, W) float64
    smooth = (gaussian(fields, sigma, mode="symmetric", truncate=3) * alpha).to(torch.float32)
    rows = torch.arange(h, device=x.device, dtype=torch.float64)[:, None] + smooth[:, 1].double()
    cols = torch.arange(w, device=x.device, dtype=torch.float64)[None, :] + smooth[:, 0].double()
    grid = torch.stack([(2 * cols + 1) / w - 1, (2 * rows + 1) / h - 1], dim=-1).to(x.dtype)
    out = F.grid_sample(x / 255., grid, mode="bilinear", padding_mode="reflection", align_corners=False)
    return out.clamp(0, 1) * 255


@functools.lru_cache(maxsize=64)
def box_weights(n_in: int, n_out: int) -> np.ndarray:
    """Pillow's fixed-point box-filter weights, (n_out, n_in) integers as float64."""
    scale = float(n_in) / n_out
    filterscale = max(scale, 1.0)
    support, ss = 0.5 * filterscale, 1.0 / filterscale
    out = np.zeros((n_out, n_in))
    for xx in range(n_out):
        center = (xx + 0.5) * scale
        xmin = max(int(center - support + 0.5), 0)
        xmax = min(int(center + support + 0.5), n_in) - xmin
        k = np.array([1.0 if -0.5 < (x + xmin - center + 0.5) * ss <= 0.5 else 0.0 for x in range(xmax)])
        if k.sum():
            k = k / k.sum()
        out[xx, xmin:xmin + xmax] = np.where(k < 0, np.trunc(-0.5 + k * (1 << _BITS)),
                                             np.trunc(0.5 + k * (1 << _BITS)))
    return out


@functools.lru_cache(maxsize=64)
def nearest_index(n_in: int, n_out: int) -> np.ndarray:
    """Pillow's nearest-neighbour source index per output pixel (its coordinate accumulated pixel by pixel)."""
    step = float(n_in) / n_out
    pos, out = step * 0.5, []
    for _ in range(n_out):
        out.append(-1 if pos < 0 else min(int(pos), n_in - 1))
        pos += step
    return np.asarray(out, dtype=np.int64)


def _box_pass(x: torch.Tensor, weights: np.ndarray, axis: int) -> torch.Tensor:
    wt = torch.as_tensor(weights, dtype=torch.float64, device=x.device)
    acc = torch.tensordot(x.double().movedim(axis, -1), wt.T, dims=1) + float(1 << (_BITS - 1))
    return torch.floor(acc / float(1 << _BITS)).clamp(0, 255).movedim(-1, axis)


def pixelate(x, severity, draws):
    """Box-filter reduction to int(side * c) (Pillow, 8-bit rounding per pass), nearest enlargement back."""
    h, w = x.shape[-2:]
    c = PIXELATE[severity - 1]
    nh, nw = int(h * c), int(w * c)
    small = _box_pass(x, box_weights(w, nw), -1) if nw != w else x.double()
    small = _box_pass(small, box_weights(h, nh), -2) if nh != h else small
    rows = torch.as_tensor(nearest_index(nh, h), device=x.device)
    cols = torch.as_tensor(nearest_index(nw, w), device=x.device)
    return small.index_select(-2, rows).index_select(-1, cols).to(x.dtype)


def jpeg_compression(x, severity, draws):
    """JPEG at quality 25 18 15 10 7, decoded again (torchvision: libjpeg on the CPU, nvJPEG on CUDA).
    torchvision deprecated its image codecs in 0.29 in favour of TorchCodec; its warning is silenced here (the
    codec is pinned by the version in the cache key, and a move to TorchCodec would bump it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from torchvision.io import ImageReadMode, decode_jpeg, encode_jpeg  # lazy: torchvision only for this one

        images = [img for img in x.round().clamp(0, 255).to(torch.uint8)]
        encoded = encode_jpeg(images, quality=JPEG[severity - 1])
        decoded = decode_jpeg([e.cpu() for e in encoded], mode=ImageReadMode.RGB, device=x.device)
    return torch.stack(list(decoded)).to(x.dtype)
