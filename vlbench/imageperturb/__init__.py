"""Image perturbations: the 15 ImageNet-C corruptions (Hendrycks & Dietterich 2019) at severities 1-5.

Light to import (no numpy/scipy/skimage/torch): names, families, the ``--perturb-images`` spec parser,
cache keys and the registry load here; :func:`corrupt` and :class:`CorruptedLoader` import the heavy
reference implementation on first use, :func:`corrupt_batch` the torch implementation (``--corrupt-backend torch``,
vlbench/imageperturb/ontorch: batched, on the images' device).

To add an image perturbation: register it in :data:`image_perturbations` (:mod:`.registry`; a plug-in
through the entry-point group, docs/extending.md). This file holds no logic beyond lazy re-exports.
"""

from __future__ import annotations

from .registry import image_perturbations
from .spec import FAMILIES, IMPLEMENTATION_VERSION, NAMES, SEVERITIES, ImageCondition, cache_key, family_of, parse_spec

__all__ = ["FAMILIES", "IMPLEMENTATION_VERSION", "NAMES", "SEVERITIES", "ImageCondition", "cache_key",
           "family_of", "parse_spec", "image_perturbations", "corrupt", "CorruptedLoader", "fit_to_input",
           "model_input_size", "mean_corruption_error", "corrupt_batch"]


def __getattr__(name):  # lazy: keeps `vlbench ls` free of numpy/scipy/skimage
    if name in ("corrupt", "CorruptedLoader", "derive_seed", "fit_to_input", "model_input_size"):
        from . import apply

        return getattr(apply, name)
    if name == "corrupt_batch":
        from .ontorch import corrupt_batch

        return corrupt_batch
    if name in ("mean_corruption_error", "corruption_errors"):
        from . import mce

        return getattr(mce, name)
    raise AttributeError(name)
