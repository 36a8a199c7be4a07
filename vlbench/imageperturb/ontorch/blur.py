"""The blur corruptions in torch: defocus_blur, glass_blur, motion_blur, zoom_blur (conventions: noise.py).

glass_blur's pixel moves are the reference's sequential copy chain (``x[h, w] = x[h + dy, w + dx]`` in
descending raster order, each copy reading pixels already moved), resolved in parallel: a pixel whose source
was moved before it takes that source's final source, found by pointer jumping (log2 of the longest chain
steps), so the result equals the sequential loop for the same offsets.
"""

from __future__ import annotations

import numpy as np
import torch

from ..glass import PARAMS as GLASS
from ..zoom import FACTORS as ZOOM
from .common import clipped_zoom, filter2d, filter_axis, gaussian, motion_blur_one, motion_shifts, scalar_uniform

DEFOCUS = [(3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5)]
MOTION = [(10, 3), (15, 5), (15, 8), (15, 12), (20, 15)]


def disk(radius: int, alias_blur: float) -> torch.Tensor:
    """The reference's anti-aliased disk: a normalised binary disk, smoothed by a 3x3 (5x5 above radius 8)
    Gaussian of sigma ``alias_blur`` with OpenCV's default border (reflect-101)."""
    span = 8 if radius <= 8 else radius
    size = 3 if radius <= 8 else 5
    t = np.arange(-span, span + 1)
    xx, yy = np.meshgrid(t, t)
    aliased = np.array((xx ** 2 + yy ** 2) <= radius ** 2, dtype=np.float32)
    aliased /= np.sum(aliased)
    s = np.arange(size) - (size - 1) / 2
    g = np.exp(-s * s / (2 * alias_blur ** 2))
    g = g / g.sum()
    k = torch.as_tensor(aliased, dtype=torch.float64)[None, None]
    k = gaussian_kernel_pass(k, g)
    return k[0, 0]


def gaussian_kernel_pass(k: torch.Tensor, taps) -> torch.Tensor:
    return filter_axis(filter_axis(k, taps, -2, "reflect101"), taps, -1, "reflect101")


def defocus_blur(x, severity, draws):
    """Each channel of x/255 correlated with the disk (cv2.filter2D, reflect-101 border), clipped, times 255."""
    radius, alias = DEFOCUS[severity - 1]
    return filter2d(x / 255., disk(radius, alias)).clamp(0, 1) * 255


def _moved_sources(h: int, w: int, delta: int, offsets: torch.Tensor) -> torch.Tensor:
    """Flat source index of every pixel after one pass of the reference's copies with ``offsets``
    ((steps, 2): dx, dy per visited pixel in the reference's order)."""
    dev = offsets.device
    n = h * w
    rows = torch.arange(h - delta, delta, -1, device=dev)
    cols = torch.arange(w - delta, delta, -1, device=dev)
    if rows.numel() == 0 or cols.numel() == 0:
        return torch.arange(n, device=dev)
    p = (rows[:, None] * w + cols[None, :]).reshape(-1)
    q = p + offsets[:, 1] * w + offsets[:, 0]
    visited = torch.zeros(n, dtype=torch.bool, device=dev)
    visited[p] = True
    target = torch.arange(n, device=dev)
    target[p] = q
    # a visited pixel whose source was visited before it (higher raster index: the order is descending)
    # copies that source's final value; any other pixel has its answer now
    follow = torch.zeros(n, dtype=torch.bool, device=dev)
    follow[p] = visited[q] & (q > p)
    answer = torch.where(follow, torch.zeros_like(target), target)
    jump = target.clone()
    while bool(follow.any()):
        settled = ~follow[jump]
        take = follow & settled
        answer = torch.where(take, answer[jump], answer)
        jump = torch.where(follow & ~settled, jump[jump], jump)
        follow = follow & ~settled
    return answer


def draw_glass_blur(g, x, severity):
    sigma, delta, iterations = GLASS[severity - 1]
    h, w = x.shape[-2:]
    steps = max(0, h - 2 * delta) * max(0, w - 2 * delta)
    return {"offsets": [torch.randint(-delta, delta, (steps, 2), generator=g, device=x.device)
                        for _ in range(iterations)]}


def glass_blur(x, severity, draws):
    """Gaussian blur (truncated to uint8), the local pixel moves per iteration, Gaussian blur again."""
    sigma, delta, _ = GLASS[severity - 1]
    blurred = torch.floor(gaussian(x / 255., sigma) * 255)
    b, c, h, w = x.shape
    flat = blurred.reshape(b, c, h * w)
    out = []
    for i, d in enumerate(draws):
        img = flat[i]
        for offsets in d["offsets"]:
            img = img[:, _moved_sources(h, w, delta, offsets)]
        out.append(img)
    moved = torch.stack(out).reshape(b, c, h, w)
    return gaussian(moved / 255., sigma).clamp(0, 1) * 255


def draw_motion_blur(g, x, severity):
    return {"angle": scalar_uniform(g, -45, 45, x.device)}


def motion_blur(x, severity, draws):
    """The reference's motion blur (Gaussian weights along a line at a random angle in [-45, 45) degrees)."""
    radius, sigma = MOTION[severity - 1]
    h, w = x.shape[-2:]
    return torch.stack([motion_blur_one(x[i], motion_shifts(radius, sigma, d["angle"], (h, w)))
                        for i, d in enumerate(draws)]).clamp(0, 255)


def zoom_blur(x, severity, draws):
    """Mean of x/255 and its centre zooms by each factor of the severity (top-left H x W of each enlargement)."""
    img = x / 255.
    h, w = x.shape[-2:]
    out = torch.zeros_like(img)
    for factor in ZOOM[severity - 1]:
        layer = clipped_zoom(img, float(factor), keep=(h, w))
        out[..., :layer.shape[-2], :layer.shape[-1]] += layer
    return ((img + out) / (len(ZOOM[severity - 1]) + 1)).clamp(0, 1) * 255
