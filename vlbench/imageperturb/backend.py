"""The built-in corruptions: the reference ImageNet-C code (``imagecorruptions`` 1.1.2), made to run on
current NumPy 2 / scikit-image 0.26 and driven by a per-call seed instead of the caller's global state.

Compatibility fixes applied to the reference module at load (its code is not changed otherwise):

* it imports ``pkg_resources`` (gone with setuptools >= 81) only for ``resource_filename``, which finds
  the bundled frost images; a stand-in based on ``importlib.resources`` is supplied while it imports;
* ``skimage.filters.gaussian(..., multichannel=True)`` (removed in scikit-image 0.19) is mapped to
  ``channel_axis=-1`` (glass_blur);
* ``np.float_`` (removed in NumPy 2.0) is ``np.float64`` (fog's plasma fractal);
* ``skimage.util.random_noise`` (impulse_noise) stopped using NumPy's global state in scikit-image 0.19
  (it seeds a fresh ``default_rng`` from the OS, so the reference is no longer reproducible); it gets
  ``rng=default_rng(n)`` with ``n`` drawn from the seeded global state.

The reference draws from NumPy's global RandomState. Each call seeds it from the per-image Generator,
runs, and restores the previous global state, under a lock, so results do not depend on call order,
worker count or anything else the process did.
"""

from __future__ import annotations

import importlib.resources
import sys
import threading
import types
import warnings

import numpy as np
from PIL import Image

from ..errors import VlbenchError
from . import glass, zoom

_LOCK = threading.Lock()
_MODULE = None


class _NumpyCompat(types.ModuleType):
    """``numpy`` as the reference module sees it, with the aliases NumPy 2 removed."""
    float_ = np.float64

    def __getattr__(self, name):
        return getattr(np, name)


class _Proxy(types.ModuleType):
    """A module seen through a few replaced attributes."""

    def __init__(self, name, target, **replaced):
        super().__init__(name)
        self._target = target
        self.__dict__.update(replaced)

    def __getattr__(self, name):
        return getattr(self._target, name)


def _gaussian_compat(image, sigma=1, multichannel=None, **kw):
    from skimage.filters import gaussian
    if multichannel:
        kw["channel_axis"] = -1
    return gaussian(image, sigma=sigma, **kw)


def _random_noise_compat(image, **kw):
    from skimage.util import random_noise
    kw.setdefault("rng", np.random.default_rng(int(np.random.randint(0, 2**32, dtype=np.uint64))))
    return random_noise(image, **kw)


def _load():
    global _MODULE
    if _MODULE is not None:
        return _MODULE
    shim = None
    if "pkg_resources" not in sys.modules:
        try:
            import pkg_resources  # noqa: F401 -- only whether it imports
        except ImportError:
            shim = types.ModuleType("pkg_resources")
            shim.resource_filename = lambda pkg, name: str(  # type: ignore[attr-defined]  # a stand-in module
                importlib.resources.files(pkg.split(".")[0]).joinpath(name.lstrip("./")))
            sys.modules["pkg_resources"] = shim
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import imagecorruptions.corruptions as ref
    except ImportError as exc:
        raise VlbenchError(f"image corruptions need the 'imagecorruptions' package ({exc})",
                           "pip install 'imagecorruptions==1.1.2' scikit-image opencv-python-headless") from exc
    finally:
        if shim is not None and sys.modules.get("pkg_resources") is shim:
            del sys.modules["pkg_resources"]
    ref.np = _NumpyCompat("numpy")
    ref.gaussian = _gaussian_compat
    ref.sk = _Proxy("skimage", ref.sk, util=_Proxy("skimage.util", ref.sk.util,
                                                   random_noise=_random_noise_compat))
    _MODULE = ref
    return ref


def run_reference(name: str, x: np.ndarray, severity: int, legacy_seed: int) -> np.ndarray:
    """The reference function ``name`` on ``x`` (uint8 H x W x 3) with global RandomState seeded."""
    ref = _load()
    fn = getattr(ref, name)
    with _LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        saved = np.random.get_state()
        try:
            np.random.seed(legacy_seed)
            out = fn(Image.fromarray(x), severity)  # the reference passes a PIL image
        finally:
            np.random.set_state(saved)
    return np.uint8(np.clip(np.asarray(out, dtype=np.float64), 0, 255))


def _fast_glass():
    return glass.glass_blur


def _fast_zoom():
    return lambda x, severity, legacy_seed: zoom.zoom_blur(x, severity)  # draws no random numbers


_FAST = {"glass_blur": _fast_glass, "zoom_blur": _fast_zoom}


def _builtin(name):
    def corruption(x: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
        legacy_seed = int(rng.integers(0, 2**32))
        if name in _FAST:  # same output as the reference (tests), faster
            return np.uint8(np.clip(_FAST[name]()(x, severity, legacy_seed), 0, 255))
        return run_reference(name, x, severity, legacy_seed)
    corruption.__name__ = corruption.__qualname__ = name
    return corruption


gaussian_noise, shot_noise, impulse_noise = map(_builtin, ("gaussian_noise", "shot_noise", "impulse_noise"))
defocus_blur, glass_blur, motion_blur, zoom_blur = map(
    _builtin, ("defocus_blur", "glass_blur", "motion_blur", "zoom_blur"))
snow, frost, fog, brightness = map(_builtin, ("snow", "frost", "fog", "brightness"))
contrast, elastic_transform, pixelate, jpeg_compression = map(
    _builtin, ("contrast", "elastic_transform", "pixelate", "jpeg_compression"))
