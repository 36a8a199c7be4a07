"""A fast glass_blur with the reference's exact output.

In the reference, the "swap" ``x[h, w], x[h2, w2] = x[h2, w2], x[h, w]`` acts on NumPy views, so it copies
``x[h2, w2]`` into ``x[h, w]`` and leaves ``x[h2, w2]`` unchanged (a known quirk, kept here: it is the
definition every published ImageNet-C number used). The sequence of copies only moves pixels, so it is
replayed on a flat array of source indices (plain integers) and the image is gathered once, instead of
copying 3-channel pixels one NumPy call at a time. The random offsets are drawn in one call, which yields
the same values as the reference's per-pixel ``randint(..., size=(2,))`` calls (checked in the tests).
"""

from __future__ import annotations

import numpy as np

PARAMS = [(0.7, 1, 2), (0.9, 2, 1), (1, 2, 3), (1.1, 3, 2), (1.5, 4, 2)]  # sigma, max_delta, iterations


def _replay(src: list, height: int, width: int, delta: int, offsets: list) -> None:
    """Apply the reference's copy sequence to the source-index list ``src`` (row-major, in place)."""
    k = 0
    for h in range(height - delta, delta, -1):
        row = h * width
        for w in range(width - delta, delta, -1):
            dx, dy = offsets[k], offsets[k + 1]
            k += 2
            src[row + w] = src[(h + dy) * width + w + dx]


def glass_blur(x: np.ndarray, severity: int, legacy_seed: int) -> np.ndarray:
    from skimage.filters import gaussian
    sigma, delta, iterations = PARAMS[severity - 1]
    x = np.uint8(gaussian(np.asarray(x) / 255., sigma=sigma, channel_axis=-1) * 255)
    height, width = x.shape[:2]
    steps = max(0, height - 2 * delta) * max(0, width - 2 * delta)
    state = np.random.RandomState(legacy_seed)
    flat = x.reshape(height * width, -1)
    for _ in range(iterations):
        offsets = state.randint(-delta, delta, size=2 * steps).tolist()
        src = list(range(height * width))
        _replay(src, height, width, delta, offsets)
        flat = flat[np.asarray(src)]
    x = flat.reshape(x.shape)
    return np.clip(gaussian(x / 255., sigma=sigma, channel_axis=-1), 0, 1) * 255
