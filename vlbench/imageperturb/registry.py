"""Registry of image perturbations; plug-ins use the entry-point group ``vlbench.image_perturbations``.

A plug-in entry resolves to a function ``f(rgb_uint8_array, severity, rng) -> array`` (H x W x 3), where
``rng`` is a ``numpy.random.Generator`` seeded per (seed, name, severity, image id).
Names are snake_case, as in ImageNet-C (the spec parser also accepts kebab-case).
"""

from __future__ import annotations

from ..registry import Registry

FAMILIES = {
    "noise": ("gaussian_noise", "shot_noise", "impulse_noise"),
    "blur": ("defocus_blur", "glass_blur", "motion_blur", "zoom_blur"),
    "weather": ("snow", "frost", "fog", "brightness"),
    "digital": ("contrast", "elastic_transform", "pixelate", "jpeg_compression"),
}
NAMES = tuple(n for names in FAMILIES.values() for n in names)

image_perturbations = Registry("image_perturbations")

for _family, _names in FAMILIES.items():
    for _name in _names:
        image_perturbations.register(_name, f"vlbench.imageperturb.backend:{_name}",
                                     description=f"ImageNet-C {_name.replace('_', ' ')} ({_family})",
                                     family=_family)
