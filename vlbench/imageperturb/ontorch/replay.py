"""The reference's random draws, replayed for the torch code: what ``imagecorruptions`` draws from NumPy's global
RandomState (seeded with ``legacy_seed``, as vlbench's reference backend seeds it), in its order, shaped as the
torch corruptions' draws. With these, a torch corruption computes the reference's function on the reference's
random numbers, which is how scripts/benchmarks/corruption_agreement.py and the tests measure the arithmetic
apart from the draws (the torch backend itself draws from torch generators: same distributions, other numbers).
"""

from __future__ import annotations

import numpy as np
import torch

from ..glass import PARAMS as GLASS
from . import noise
from .weather import FOG, SNOW, frost_texture, plasma_fractal


def _chw(a: np.ndarray, device) -> torch.Tensor:
    return torch.as_tensor(np.ascontiguousarray(np.moveaxis(a, -1, 0)), device=device)


def reference_draws(name: str, img: np.ndarray, severity: int, legacy_seed: int, device="cpu") -> dict | None:
    """One image's draws (``img``: H x W x 3 uint8) as the reference would make them; None when the corruption
    draws nothing."""
    rs = np.random.RandomState(legacy_seed)
    h, w = img.shape[:2]
    s = severity - 1
    if name == "gaussian_noise":
        return {"noise": _chw(rs.normal(size=img.shape, scale=1.0), device).float()}
    if name == "shot_noise":
        return {"counts": _chw(rs.poisson(img / 255. * noise.SHOT[s]), device).float()}
    if name == "impulse_noise":
        rng = np.random.default_rng(int(rs.randint(0, 2**32, dtype=np.uint64)))
        hit = rng.random(img.shape) <= noise.IMPULSE[s]
        return {"hit": _chw(hit, device), "salt": _chw(rng.random(img.shape) <= 0.5, device)}
    if name == "glass_blur":
        _, delta, iterations = GLASS[s]
        steps = max(0, h - 2 * delta) * max(0, w - 2 * delta)
        return {"offsets": [torch.as_tensor(rs.randint(-delta, delta, size=2 * steps).reshape(steps, 2), device=device)
                            for _ in range(iterations)]}
    if name == "motion_blur":
        return {"angle": float(rs.uniform(-45, 45))}
    if name == "snow":
        layer = rs.normal(size=(h, w), loc=SNOW[s][0], scale=SNOW[s][1])
        return {"layer": torch.as_tensor(layer, device=device), "angle": float(rs.uniform(-135, -45))}
    if name == "frost":
        index = int(rs.randint(5))
        tex = frost_texture(index, h, w, device)
        top = int(rs.randint(0, tex.shape[1] - h))
        return {"index": index, "top": top, "left": int(rs.randint(0, tex.shape[2] - w))}
    if name == "fog":
        size = 2 ** (max(h, w, 3) - 1).bit_length()
        plasma = plasma_fractal(size, FOG[s][1], lambda shape, lo, hi: torch.as_tensor(
            rs.uniform(lo, hi, tuple(shape)), device=device), device)
        return {"plasma": plasma}
    if name == "elastic_transform":
        most = h * 0.005
        dx = rs.uniform(-most, most, size=(h, w))
        dy = rs.uniform(-most, most, size=(h, w))
        return {"dx": torch.as_tensor(dx, device=device), "dy": torch.as_tensor(dy, device=device)}
    return None
