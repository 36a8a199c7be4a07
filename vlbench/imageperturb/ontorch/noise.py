"""The noise corruptions in torch: gaussian_noise, shot_noise, impulse_noise (same parameters as the reference).

Each corruption is a pair: ``draw_<name>(g, x, severity)`` makes one image's random draws from its generator
``g`` (on the image's device), ``<name>(x, severity, draws)`` applies them to the batch ``x`` (B, 3, H, W),
floats 0-255, and returns floats to be clipped to 0-255 and truncated, as the reference's output is.
"""

from __future__ import annotations

import torch

GAUSSIAN = [.08, .12, 0.18, 0.26, 0.38]
SHOT = [60, 25, 12, 5, 3]
IMPULSE = [.03, .06, .09, 0.17, 0.27]


def draw_gaussian_noise(g, x, severity):
    return {"noise": torch.randn(x.shape, generator=g, device=x.device, dtype=x.dtype)}


def gaussian_noise(x, severity, draws):
    """x/255 + N(0, c^2), clipped to [0, 1], times 255."""
    noise = torch.stack([d["noise"] for d in draws])
    return (x / 255. + noise * GAUSSIAN[severity - 1]).clamp(0, 1) * 255


def draw_shot_noise(g, x, severity):
    c = SHOT[severity - 1]
    return {"counts": torch.poisson(x / 255. * c, generator=g)}


def shot_noise(x, severity, draws):
    """Poisson(x/255 * c) / c, clipped to [0, 1], times 255."""
    counts = torch.stack([d["counts"] for d in draws])
    return (counts / float(SHOT[severity - 1])).clamp(0, 1) * 255


def draw_impulse_noise(g, x, severity):
    """Per value (pixel and channel, as scikit-image's s&p): hit with probability c, then salt or pepper 50:50."""
    hit = torch.rand(x.shape, generator=g, device=x.device) < IMPULSE[severity - 1]
    salt = torch.rand(x.shape, generator=g, device=x.device) < 0.5
    return {"hit": hit, "salt": salt}


def impulse_noise(x, severity, draws):
    """Salt-and-pepper: a hit value becomes 1 (salt) or 0 (pepper), the rest is x/255; times 255."""
    hit = torch.stack([d["hit"] for d in draws])
    salt = torch.stack([d["salt"] for d in draws])
    return torch.where(hit, salt.to(x.dtype), x / 255.) * 255
