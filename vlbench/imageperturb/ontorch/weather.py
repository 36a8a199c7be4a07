"""The weather corruptions in torch: snow, frost, fog, brightness (conventions: noise.py).

frost blends in one of the reference package's bundled frost photographs (the first five, as the reference's
``randint(5)`` picks), enlarged to the image as the reference does (OpenCV bicubic, done once per photograph,
image size and device and kept), at a random crop.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import torch

from ...errors import VlbenchError
from .common import clipped_zoom, motion_blur_one, motion_shifts, scalar_int, scalar_uniform, uniform

SNOW = [(0.1, 0.3, 3, 0.5, 10, 4, 0.8), (0.2, 0.3, 2, 0.5, 12, 4, 0.7), (0.55, 0.3, 4, 0.9, 12, 8, 0.7),
        (0.55, 0.3, 4.5, 0.85, 12, 8, 0.65), (0.55, 0.3, 2.5, 0.85, 12, 12, 0.55)]
FROST = [(1, 0.4), (0.8, 0.6), (0.7, 0.7), (0.65, 0.7), (0.6, 0.75)]
FROST_FILES = ("frost1.png", "frost2.png", "frost3.png", "frost4.jpg", "frost5.jpg")
FOG = [(1.5, 2), (2., 2), (2.5, 1.7), (2.5, 1.5), (3., 1.4)]
BRIGHTNESS = [.1, .2, .3, .4, .5]
_TEXTURES: dict = {}


def grey(x: torch.Tensor) -> torch.Tensor:
    """OpenCV's RGB -> grey weights, (B, 1, H, W)."""
    return 0.299 * x[:, :1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3]


def draw_snow(g, x, severity):
    c = SNOW[severity - 1]
    layer = torch.randn(x.shape[-2:], generator=g, device=x.device, dtype=torch.float64) * c[1] + c[0]
    return {"layer": layer, "angle": scalar_uniform(g, -135, -45, x.device)}


def _snow_layer(layer: torch.Tensor, c, angle: float, h: int, w: int) -> torch.Tensor:
    flakes = clipped_zoom(layer[None], c[2])
    flakes = torch.where(flakes < c[3], torch.zeros_like(flakes), flakes).clamp(0, 1)
    flakes = motion_blur_one(flakes, motion_shifts(c[4], c[5], angle, tuple(flakes.shape[-2:])))
    flakes = torch.round(flakes * 255).clamp(0, 255).to(torch.uint8).to(layer.dtype) / 255.
    return flakes[:, :h, :w]


def snow(x, severity, draws):
    """Zoomed, thresholded, motion-blurred snow flakes (and their 180-degree turn) over a greyed image."""
    c = SNOW[severity - 1]
    h, w = x.shape[-2:]
    img = x / 255.
    img = c[6] * img + (1 - c[6]) * torch.maximum(img, grey(img) * 1.5 + 0.5)
    flakes = torch.stack([_snow_layer(d["layer"], c, d["angle"], h, w) for d in draws]).to(x.dtype)
    return (img + flakes + flakes.flip(-1, -2)).clamp(0, 1) * 255


def frost_photo(index: int) -> Path:
    spec = importlib.util.find_spec("imagecorruptions")
    if spec is None or not spec.submodule_search_locations:
        raise VlbenchError("the frost corruption needs the frost photographs of the 'imagecorruptions' package",
                           "pip install 'imagecorruptions==1.1.2'")
    return Path(list(spec.submodule_search_locations)[0]) / "frost" / FROST_FILES[index]


def frost_texture(index: int, h: int, w: int, device) -> torch.Tensor:
    """Frost photograph ``index`` enlarged as the reference enlarges it for an h x w image, RGB (3, H', W')."""
    key = (index, h, w, str(device))
    if key not in _TEXTURES:
        import cv2  # lazy: OpenCV only for the frost photographs, once per size

        photo = cv2.imread(str(frost_photo(index)))
        if photo is None:
            raise VlbenchError(f"the frost photograph {frost_photo(index)} could not be read",
                               "reinstall the 'imagecorruptions' package (pip install --force-reinstall "
                               "'imagecorruptions==1.1.2')")
        fh, fw = photo.shape[:2]
        scale = 1.0
        if fh < h and fw >= w:
            scale = h / fh
        elif fh >= h and fw < w:
            scale = w / fw
        elif fh < h and fw < w:
            scale = max(h / fh, w / fw)
        scale *= 1.1
        big = cv2.resize(photo, dsize=(int(np.ceil(fw * scale)), int(np.ceil(fh * scale))),
                         interpolation=cv2.INTER_CUBIC)
        if len(_TEXTURES) > 32:
            _TEXTURES.clear()
        _TEXTURES[key] = torch.as_tensor(np.ascontiguousarray(big[..., ::-1].transpose(2, 0, 1)), device=device)
    return _TEXTURES[key]


def draw_frost(g, x, severity):
    h, w = x.shape[-2:]
    index = scalar_int(g, 5, x.device)
    tex = frost_texture(index, h, w, x.device)
    top = scalar_int(g, tex.shape[1] - h, x.device)
    left = scalar_int(g, tex.shape[2] - w, x.device)
    return {"index": index, "top": top, "left": left}


def frost(x, severity, draws):
    """c0 * x + c1 * (a crop of a frost photograph), clipped to 0-255."""
    c = FROST[severity - 1]
    h, w = x.shape[-2:]
    crops = torch.stack([frost_texture(d["index"], h, w, x.device)[:, d["top"]:d["top"] + h, d["left"]:d["left"] + w]
                         for d in draws]).to(x.dtype)
    return (c[0] * x + c[1] * crops).clamp(0, 255)


def plasma_fractal(mapsize: int, decay: float, draw, device="cpu") -> torch.Tensor:
    """The reference's diamond-square height map (mapsize a power of two), scaled to [0, 1];
    ``draw(shape, low, high)`` gives the uniform draws (float64) in the reference's order."""
    step, wibble = mapsize, 100.0
    grid = torch.zeros((mapsize, mapsize), dtype=torch.float64, device=device)
    while step >= 2:
        half = step // 2
        corner = grid[0:mapsize:step, 0:mapsize:step]
        square = corner + torch.roll(corner, -1, 0)
        square = square + torch.roll(square, -1, 1)
        grid[half:mapsize:step, half:mapsize:step] = square / 4 + wibble * draw(square.shape, -wibble, wibble)
        dr = grid[half:mapsize:step, half:mapsize:step]
        ul = grid[0:mapsize:step, 0:mapsize:step]
        lt = (dr + torch.roll(dr, 1, 0)) + (ul + torch.roll(ul, -1, 1))
        grid[0:mapsize:step, half:mapsize:step] = lt / 4 + wibble * draw(lt.shape, -wibble, wibble)
        tt = (dr + torch.roll(dr, 1, 1)) + (ul + torch.roll(ul, -1, 0))
        grid[half:mapsize:step, 0:mapsize:step] = tt / 4 + wibble * draw(tt.shape, -wibble, wibble)
        step //= 2
        wibble /= decay
    grid = grid - grid.min()
    return grid / grid.max()


def draw_fog(g, x, severity):
    size = 2 ** (max(x.shape[-2:]) - 1).bit_length()
    grid = plasma_fractal(size, FOG[severity - 1][1],
                          lambda shape, lo, hi: uniform(g, tuple(shape), lo, hi, x.device), x.device)
    return {"plasma": grid}


def fog(x, severity, draws):
    """x/255 plus c0 * plasma fractal, times max / (max + c0) (per image), clipped, times 255."""
    c = FOG[severity - 1]
    h, w = x.shape[-2:]
    img = x / 255.
    peak = img.amax(dim=(1, 2, 3), keepdim=True)
    plasma = torch.stack([d["plasma"][:h, :w] for d in draws])[:, None].to(x.dtype)
    return ((img + c[0] * plasma) * peak / (peak + c[0])).clamp(0, 1) * 255


def brightness(x, severity, draws):
    """HSV value + c (clipped to 1) at the same hue and saturation: every channel scaled by V'/V (a black
    pixel becomes grey V'); in float64, as the reference (a float32 ratio flips a pixel's last grey level often)."""
    img = x.double() / 255.
    v = img.amax(dim=1, keepdim=True)
    v_new = (v + BRIGHTNESS[severity - 1]).clamp(0, 1)
    scaled = img * (v_new / torch.where(v > 0, v, torch.ones_like(v)))
    return torch.where(v > 0, scaled, v_new.expand_as(img)).clamp(0, 1) * 255

