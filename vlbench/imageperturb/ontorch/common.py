"""Shared pieces of the torch corruptions: per-image generators, border handling, separable and 2-D filters,
the reference's clipped zoom and its motion-blur shifts. Images are float batches ``(B, C, H, W)``."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 -- torch's own convention

from ..zoom import _taps


def generators(seeds, device) -> list[torch.Generator]:
    """One ``torch.Generator`` on ``device`` per image, seeded with the low 63 bits of its seed."""
    out = []
    for s in seeds:
        g = torch.Generator(device=device)
        g.manual_seed(int(s) & (2**63 - 1))
        out.append(g)
    return out


def border_index(n: int, pad: int, mode: str, device) -> torch.Tensor:
    """Source indices of a length-``n`` axis padded by ``pad`` on both sides. ``mode``: ``nearest`` (edge
    repeated), ``symmetric`` (``d c b a | a b c d | d c b a``: scipy's reflect) or ``reflect101``
    (``d c b | a b c d | c b a``: OpenCV's default, torch's reflect)."""
    i = torch.arange(-pad, n + pad, device=device)
    if mode == "nearest":
        return i.clamp(0, n - 1)
    if mode == "symmetric":
        period = 2 * n
        i = i % period
        return torch.where(i >= n, period - 1 - i, i)
    if mode == "reflect101":
        if n == 1:
            return torch.zeros_like(i)
        period = 2 * n - 2
        i = i % period
        return torch.where(i >= n, period - i, i)
    raise ValueError(mode)


def pad(x: torch.Tensor, ph: int, pw: int, mode: str) -> torch.Tensor:
    """``x`` (..., H, W) padded by ``ph`` rows and ``pw`` columns on each side."""
    h, w = x.shape[-2:]
    x = x.index_select(-2, border_index(h, ph, mode, x.device)) if ph else x
    return x.index_select(-1, border_index(w, pw, mode, x.device)) if pw else x


def gaussian_taps(sigma: float, truncate: float = 4.0) -> np.ndarray:
    """scipy.ndimage's 1-D Gaussian: radius ``int(truncate * sigma + 0.5)``, normalised to sum 1."""
    radius = int(truncate * float(sigma) + 0.5)
    t = np.arange(-radius, radius + 1, dtype=np.float64)
    phi = np.exp(-0.5 / float(sigma) ** 2 * t * t)
    return phi / phi.sum()


def filter_axis(x: torch.Tensor, taps, axis: int, mode: str) -> torch.Tensor:
    """Correlate each channel of ``x`` (B, C, H, W) with the 1-D ``taps`` along ``axis`` (-2 rows, -1 columns)."""
    taps = torch.as_tensor(np.asarray(taps), dtype=x.dtype, device=x.device)
    r = (taps.numel() - 1) // 2
    c = x.shape[1]
    if axis == -2:
        xp, weight = pad(x, r, 0, mode), taps.view(1, 1, -1, 1)
    else:
        xp, weight = pad(x, 0, r, mode), taps.view(1, 1, 1, -1)
    return F.conv2d(xp, weight.expand(c, 1, *weight.shape[2:]).contiguous(), groups=c)


def gaussian(x: torch.Tensor, sigma: float | tuple[float, float], mode: str = "nearest",
             truncate: float = 4.0) -> torch.Tensor:
    """skimage.filters.gaussian of each channel (scipy's gaussian_filter; ``sigma`` one value or (rows, cols))."""
    sy, sx = (sigma, sigma) if isinstance(sigma, (int, float)) else sigma
    x = filter_axis(x, gaussian_taps(sy, truncate), -2, mode)
    return filter_axis(x, gaussian_taps(sx, truncate), -1, mode)


def filter2d(x: torch.Tensor, kernel: torch.Tensor, mode: str = "reflect101") -> torch.Tensor:
    """cv2.filter2D of each channel with an odd square ``kernel`` (correlation, centred anchor)."""
    k = kernel.to(device=x.device, dtype=x.dtype)
    r = (k.shape[-1] - 1) // 2
    c = x.shape[1]
    return F.conv2d(pad(x, r, r, mode), k.view(1, 1, *k.shape).expand(c, 1, *k.shape).contiguous(), groups=c)


def _resample(x: torch.Tensor, axis: int, n_out: int, keep: int) -> torch.Tensor:
    lo, w0, w1 = _taps(x.shape[axis], n_out, keep)
    n = x.shape[axis]
    lo_t = torch.as_tensor(lo, device=x.device)
    hi_t = torch.as_tensor(np.minimum(lo + 1, n - 1), device=x.device)
    shape = [1] * x.dim()
    shape[axis] = len(lo)
    w0_t = torch.as_tensor(w0, dtype=x.dtype, device=x.device).view(shape)
    w1_t = torch.as_tensor(w1, dtype=x.dtype, device=x.device).view(shape)
    return x.index_select(axis, lo_t) * w0_t + x.index_select(axis, hi_t) * w1_t


def clipped_zoom(x: torch.Tensor, factor: float, keep: tuple[int, int] | None = None) -> torch.Tensor:
    """The reference's ``clipped_zoom``: the centre crop of ``x`` (..., H, W) by 1/``factor``, enlarged by
    ``factor`` with corner-aligned bilinear interpolation (scipy.ndimage.zoom, order 1, as vlbench's zoom.py);
    ``keep``: compute only the top-left (rows, cols) of the enlargement (all of it when None)."""
    h, w = x.shape[-2:]
    ch0, ch1 = int(math.ceil(h / float(factor))), int(math.ceil(w / float(factor)))
    top0, top1 = (h - ch0) // 2, (w - ch1) // 2
    crop = x[..., top0:top0 + ch0, top1:top1 + ch1]
    n0, n1 = int(round(ch0 * factor)), int(round(ch1 * factor))
    k0, k1 = keep if keep is not None else (n0, n1)
    return _resample(_resample(crop, -2, n0, k0), -1, n1, k1)


def motion_shifts(radius: int, sigma: float, angle: float, shape: tuple[int, int]) -> list[tuple[int, int, float]]:
    """(dx, dy, weight) of the reference's ``_motion_blur`` (its kernel and integer shifts along ``angle``),
    stopping where the reference stops (a shift as large as the image)."""
    width = radius * 2 + 1
    k = np.exp(-np.arange(width) ** 2 / (2 * sigma ** 2)) / (np.sqrt(2 * np.pi) * sigma)
    k = k / np.sum(k)
    point = (width * np.sin(np.deg2rad(angle)), width * np.cos(np.deg2rad(angle)))
    hypot = math.hypot(point[0], point[1])
    out = []
    for i in range(width):
        dy = -math.ceil(((i * point[0]) / hypot) - 0.5)
        dx = -math.ceil(((i * point[1]) / hypot) - 0.5)
        if abs(dy) >= shape[0] or abs(dx) >= shape[1]:
            break
        out.append((dx, dy, float(k[i])))
    return out


def motion_blur_one(x: torch.Tensor, shifts) -> torch.Tensor:
    """One image ``x`` (C, H, W) blurred along ``shifts``: sum of weight * x shifted by (dx, dy), the edge
    row/column repeated where the shift uncovers the image (the reference's ``shift``)."""
    h, w = x.shape[-2:]
    out = torch.zeros_like(x)
    rows0, cols0 = torch.arange(h, device=x.device), torch.arange(w, device=x.device)
    for dx, dy, weight in shifts:
        layer = x.index_select(-2, (rows0 - dy).clamp(0, h - 1)) if dy else x
        layer = layer.index_select(-1, (cols0 - dx).clamp(0, w - 1)) if dx else layer
        out = out + weight * layer
    return out


def uniform(g: torch.Generator, shape, low: float, high: float, device, dtype=torch.float64) -> torch.Tensor:
    """Uniform draws in [low, high) from ``g``."""
    return torch.rand(shape, generator=g, device=device, dtype=dtype) * (high - low) + low


def scalar_uniform(g: torch.Generator, low: float, high: float, device) -> float:
    return float(uniform(g, (1,), low, high, device).item())


def scalar_int(g: torch.Generator, high: int, device) -> int:
    """An integer in [0, high)."""
    return int(torch.randint(0, high, (1,), generator=g, device=device).item())
