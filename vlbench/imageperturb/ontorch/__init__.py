"""The 15 ImageNet-C corruptions in torch (``--corrupt-backend torch``): batched, on the images' device.

:func:`corrupt_batch` corrupts a uint8 batch ``(B, 3, H, W)`` where it lies (CPU or CUDA). Each image has its own
``torch.Generator`` on that device, seeded from (seed, corruption, severity, image id) like the reference backend
(:func:`vlbench.imageperturb.apply.derive_seed`), and draws in a fixed order, so an image's output does not depend
on the batch it is in or the batches before. The same seed draws different numbers on the CPU and on CUDA
(different generators), and float arithmetic differs slightly between devices, so the device is part of what
identifies the output (:data:`VERSION` and the device type go into cache keys).

The definitions and parameters are the reference's (``imagecorruptions`` 1.1.2; vlbench/imageperturb/backend.py).
Where the reference is deterministic the torch code computes the same function in float32; where it draws random
numbers the torch code draws the same distributions from torch's generator and applies them the same way, so an
image's output equals the reference's given the same draws (tests feed NumPy's draws through :data:`CORRUPTIONS`).
docs/image_perturbations.md has the measured agreement per corruption and severity.
"""

from __future__ import annotations

import numpy as np
import torch

from ...errors import VlbenchError
from ..registry import NAMES
from ..spec import TORCH_VERSION as VERSION  # noqa: F401 -- re-exported: the torch code's version
from . import blur, digital, noise, weather
from .common import generators

#: name -> (draw one image's random numbers or None, apply to a float batch): see noise.py
CORRUPTIONS = {
    "gaussian_noise": (noise.draw_gaussian_noise, noise.gaussian_noise),
    "shot_noise": (noise.draw_shot_noise, noise.shot_noise),
    "impulse_noise": (noise.draw_impulse_noise, noise.impulse_noise),
    "defocus_blur": (None, blur.defocus_blur),
    "glass_blur": (blur.draw_glass_blur, blur.glass_blur),
    "motion_blur": (blur.draw_motion_blur, blur.motion_blur),
    "zoom_blur": (None, blur.zoom_blur),
    "snow": (weather.draw_snow, weather.snow),
    "frost": (weather.draw_frost, weather.frost),
    "fog": (weather.draw_fog, weather.fog),
    "brightness": (None, weather.brightness),
    "contrast": (None, digital.contrast),
    "elastic_transform": (digital.draw_elastic_transform, digital.elastic_transform),
    "pixelate": (None, digital.pixelate),
    "jpeg_compression": (None, digital.jpeg_compression),
}
assert tuple(CORRUPTIONS) == NAMES


def is_random(name: str) -> bool:
    """Whether the corruption draws random numbers (the others are functions of the image alone)."""
    return CORRUPTIONS[name][0] is not None


def apply_draws(x: torch.Tensor, name: str, severity: int, draws: list | None) -> torch.Tensor:
    """``name`` at ``severity`` on the uint8 batch ``x`` with the given per-image draws (None for a
    deterministic corruption); uint8, clipped to 0-255 and truncated as the reference's output is."""
    out = CORRUPTIONS[name][1](x.to(torch.float32), int(severity), draws)
    return out.clamp(0, 255).to(torch.uint8)


def corrupt_batch(x: torch.Tensor, name: str, severity: int, seeds) -> torch.Tensor:
    """The uint8 batch ``x`` (B, 3, H, W) corrupted by ``name`` at ``severity`` (1-5) on ``x``'s device, image i
    with random numbers from a generator seeded with ``seeds[i]`` (vlbench.imageperturb.apply.derive_seed)."""
    if name not in CORRUPTIONS:
        raise VlbenchError(f"the torch backend has no corruption {name!r}",
                           f"use one of the 15 ImageNet-C names ({', '.join(NAMES)}) or --corrupt-backend reference")
    if x.dtype != torch.uint8 or x.dim() != 4 or x.shape[1] != 3:
        raise VlbenchError(f"corrupt_batch needs a uint8 (B, 3, H, W) batch, got {x.dtype} {tuple(x.shape)}",
                           "convert the images to RGB uint8 tensors, channels first")
    if int(severity) not in (1, 2, 3, 4, 5):
        raise VlbenchError(f"severity {severity!r} of {name!r} is outside 1-5", "use a severity from 1 to 5")
    if len(seeds) != x.shape[0]:
        raise VlbenchError(f"corrupt_batch got {len(seeds)} seeds for {x.shape[0]} images", "give one seed per image")
    draw = CORRUPTIONS[name][0]
    draws = None
    if draw is not None:
        xf = x.to(torch.float32)
        draws = [draw(g, xf[i], int(severity)) for i, g in enumerate(generators(seeds, x.device))]
    return apply_draws(x, name, severity, draws)


def corrupt_array(x: np.ndarray, name: str, severity: int, seed: int, device="cpu") -> np.ndarray:
    """One H x W x 3 uint8 image corrupted on ``device`` (the run path: a batch of one in a DataLoader worker)."""
    batch = torch.from_numpy(np.ascontiguousarray(np.moveaxis(x, -1, 0)))[None].to(device)
    return corrupt_batch(batch, name, severity, [seed])[0].permute(1, 2, 0).cpu().numpy()
