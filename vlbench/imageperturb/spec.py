"""Names, families and the ``--perturb-images`` spec parser (``gaussian_noise:3,motion_blur:1-5,all:3``)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import VlbenchError
from ..registry import close_matches
from .registry import FAMILIES, NAMES, image_perturbations

# Bump when any corruption's output changes (part of every corrupted-image cache key).
IMPLEMENTATION_VERSION = "imagenet-c/2"  # 2: zoom_blur edge row/column as the reference
#: the torch backend's version (vlbench/imageperturb/ontorch): bump when any of its outputs changes
TORCH_VERSION = "imagenet-c-torch/1"
#: --corrupt-backend: the reference code (NumPy/SciPy/OpenCV, imagecorruptions 1.1.2) or the torch code
BACKENDS = ("reference", "torch")
#: where a run's torch corruptions execute in the DataLoader workers: part of their cache key (under --pixels device
#: they run on the model's device instead, whose type is named the same way: ``@cuda``)
TORCH_DEVICE = "cpu"
SEVERITIES = (1, 2, 3, 4, 5)
__all__ = ["FAMILIES", "NAMES", "SEVERITIES", "IMPLEMENTATION_VERSION", "TORCH_VERSION", "BACKENDS", "ImageCondition",
           "family_of", "cache_key", "backend_version", "parse_spec"]


@dataclass(frozen=True, order=True)
class ImageCondition:
    name: str
    severity: int

    @property
    def label(self) -> str:
        return f"{self.name}:{self.severity}"


def family_of(name: str) -> str:
    for family, names in FAMILIES.items():
        if name in names:
            return family
    return image_perturbations.entry(name).meta.get("family", "plugin")


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise VlbenchError(f"unknown corruption backend {backend!r}", "use --corrupt-backend reference or torch")
    return backend


def backend_version(name: str, backend: str = "reference", device: str = TORCH_DEVICE) -> str:
    """What made the corrupted pixels of ``name``: the reference implementation's version, the torch backend's
    version and device type (``imagenet-c-torch/1@cpu``; the same seed draws other numbers on another device), or
    a plug-in's source (plug-ins run their own code under either backend)."""
    entry = image_perturbations.entry(name)
    if entry.source != "builtin":
        return entry.source
    return IMPLEMENTATION_VERSION if check_backend(backend) == "reference" else f"{TORCH_VERSION}@{device}"


def cache_key(name: str, severity: int, seed: int, backend: str = "reference", device: str = TORCH_DEVICE) -> str:
    """Cache-key component of a corrupted image set: (name, severity, seed, implementation version), the
    version naming the backend and, for torch, the device type (:func:`backend_version`), so images made by
    another backend or on another kind of device never share a cache entry."""
    return f"img:{name}:{int(severity)}:seed{int(seed)}:{backend_version(name, backend, device)}"


def _severities(text: str, item: str) -> list[int]:
    lo, dash, hi = text.partition("-")
    try:
        values = list(range(int(lo), int(hi) + 1)) if dash else [int(lo)]
    except ValueError:
        raise VlbenchError(f"--perturb-images item {item!r}: severity {text!r} is not a number or range",
                           "write a severity 1-5 or a range such as 1-5") from None
    if not values or any(v not in SEVERITIES for v in values):
        raise VlbenchError(f"--perturb-images item {item!r}: severity {text!r} is outside 1-5",
                           "use severities 1 to 5, e.g. 'gaussian_noise:3' or 'motion_blur:1-5'")
    return values


def parse_spec(spec: str) -> list[ImageCondition]:
    """Parse ``name:sev[,name:lo-hi][,family:sev][,all:sev]`` into sorted unique conditions.

    A name without ``:severity`` means all five severities. ``all`` expands to the 15 built-ins,
    a family name (noise, blur, weather, digital) to its members; plug-in names are accepted too.
    """
    out: set[ImageCondition] = set()
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        name, colon, sev = item.partition(":")
        name = name.strip().replace("-", "_")
        severities = _severities(sev.strip(), item) if colon else list(SEVERITIES)
        if name == "all":
            names = NAMES
        elif name in FAMILIES:
            names = FAMILIES[name]
        elif name in image_perturbations:
            names = (name,)
        else:
            choices = list(image_perturbations.names()) + list(FAMILIES) + ["all"]
            matches = close_matches(name, choices)
            hint = (f"did you mean {', '.join(repr(m) for m in matches)}?" if matches
                    else "run 'vlbench ls' to see the image perturbations")
            raise VlbenchError(f"--perturb-images: unknown image perturbation {name!r} in {item!r}", hint)
        out.update(ImageCondition(n, s) for n in names for s in severities)
    if not out:
        raise VlbenchError(f"--perturb-images {spec!r} names no corruption",
                           "write e.g. 'gaussian_noise:3,motion_blur:1-5,all:3'")
    return sorted(out)
