"""``check_image_perturbation``: an image corruption against vlbench/imageperturb (registry.py, apply.py, guard.py).

A corruption is ``f(rgb_uint8_array, severity, rng) -> array``: the input H x W x 3, the output of the same
shape with 0-255 values (uint8 or finite floats), for every severity 1-5; ``rng`` is seeded per (seed, name,
severity, image id), so the output must be the same for the same rng state, and must not write into its input.
A registered name is also run through ``corrupt`` (what a run calls): an RGB image of the input's size back, for
RGB, greyscale and RGBA inputs.
"""

from __future__ import annotations

import numpy as np

from ..errors import DataError
from ..imageperturb.apply import corrupt, derive_seed
from ..imageperturb.guard import checked_output
from ..imageperturb.registry import image_perturbations
from ..imageperturb.spec import SEVERITIES
from ..registry import valid_name
from .common import Checker, Report, short


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)
    ramp = np.broadcast_to(np.linspace(0, 255, 64, dtype=np.uint8)[None, :, None], (36, 64, 3)).copy()
    return [noise, ramp, np.full((32, 32, 3), 128, dtype=np.uint8)]  # noise, a gradient, flat grey


def _call(fn, x: np.ndarray, severity: int, seed: int, name: str):
    rng = np.random.Generator(np.random.PCG64(derive_seed(seed, name, severity, "check")))
    return fn(x, severity, rng)


def _check_function(c: Checker, fn, name: str, seed: int) -> None:
    inputs = _inputs()
    with c.check("output shape and values"):
        for x in inputs:
            for sev in SEVERITIES:
                try:
                    checked_output(_call(fn, x.copy(), sev, seed, name), name, "check", x.shape, "check", True,
                                   float(x.max()))
                except DataError as exc:
                    raise c.error(f"an array of the input's shape {x.shape} with 0-255 values (severity {sev})",
                                  exc.message) from None
    with c.check("deterministic"):
        for x in inputs:
            for sev in SEVERITIES:
                a, b = (np.asarray(_call(fn, x.copy(), sev, seed, name)) for _ in range(2))
                c.expect(np.array_equal(a, b), f"the same output for the same rng (severity {sev})",
                         f"outputs differ by up to {float(np.abs(a.astype(float) - b).max()):.3g}")
    with c.check("input left unchanged"):
        for x in inputs:
            y = x.copy()
            _call(fn, y, max(SEVERITIES), seed, name)
            c.expect(np.array_equal(x, y), "the input array unchanged (it may be read-only)", "it was written to")
    with c.check("severities change the image"):
        x = inputs[0]
        same = [s for s in SEVERITIES if np.array_equal(np.clip(np.asarray(_call(fn, x.copy(), s, seed, name)),
                                                                 0, 255).astype(np.uint8), x)]
        c.expect(not same, f"an image that differs from a noise input at every severity {SEVERITIES}",
                 f"unchanged at severity {short(same)}")


def _check_corrupt(c: Checker, name: str, seed: int) -> None:
    """Through ``corrupt``, as a run applies it: same size, RGB, for other input modes too."""
    from PIL import Image

    with c.check("corrupt(): size and mode"):
        rgb = Image.fromarray(_inputs()[0], "RGB")
        for im in (rgb, rgb.convert("L"), rgb.convert("RGBA"), rgb.resize((20, 24))):
            for sev in (min(SEVERITIES), max(SEVERITIES)):
                out = corrupt(im, name, sev, seed, "check")
                c.expect(out.mode == "RGB" and out.size == im.size, f"an RGB image of {im.size} for a {im.mode} input",
                         f"{out.mode} {out.size}")
        a, b = (np.asarray(corrupt(rgb, name, 3, seed, "check")) for _ in range(2))
        c.expect(np.array_equal(a, b), "the same image for the same (seed, severity, image id)", "two images")


def check_image_perturbation(perturbation, *, name: str | None = None, seed: int = 0) -> Report:
    """Check an image corruption: a registered name (``"gaussian_noise"``) or the function itself (``name``
    defaults to its ``__name__``). Returns the :class:`Report` of the checks passed; raises
    :class:`ConformanceError` at the first failure."""
    registered = isinstance(perturbation, str)
    name = perturbation if isinstance(perturbation, str) else str(name or getattr(perturbation, "__name__",
                                                                                  "image-perturbation"))
    c = Checker("image perturbation", name)
    with c.check("load"):
        fn = image_perturbations.get(name) if registered else perturbation
        c.expect(callable(fn), "a function f(rgb_uint8_array, severity, rng)", type(fn).__name__)
        c.expect(valid_name(name), "a lowercase snake_case name such as 'gaussian_noise'", short(name))
    _check_function(c, fn, name, seed)
    if registered:
        _check_corrupt(c, name, seed)
    else:
        c.skip("corrupt(): size and mode", "not registered (register it to run it through corrupt())")
    return c.report
