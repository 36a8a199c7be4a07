"""Versions of the libraries a run depends on, read in one place (recorded in results.json and used in
the perturbation cache key)."""

from __future__ import annotations

import platform
from functools import cache
from importlib.metadata import PackageNotFoundError, version

from .. import __version__
from ..registry import plugin_versions

RECORDED = ("torch", "torchvision", "transformers", "open_clip_torch", "numpy", "pillow", "spacy", "nltk",
            "nlpaug", "pandas")


@cache
def dist_version(dist: str) -> str | None:
    """Installed version of distribution ``dist``, or None when it is not installed."""

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def decoder_versions(path: str = "reference") -> dict:
    """The versions of the libraries that decode image files on pixel path ``path`` (``--pixels``), part of
    the pixel cache's spec (encoding/pixels.py) and of a ``--pixels device`` model identity (models/lazy.py).

    ``reference``: Pillow and the libjpeg(-turbo) it was built with (every format goes through Pillow).
    ``device``: those (a file the device decoder refuses goes through Pillow) and torchvision, whose wheel
    bundles the libjpeg-turbo of ``decode_jpeg`` on the CPU and the nvJPEG it uses on a GPU: its version pins
    both. Read from package metadata and Pillow's feature table (no torch import)."""
    from PIL import features  # lazy: only encoding asks

    found = {"pillow": dist_version("pillow"),
             "pillow_libjpeg": features.version("libjpeg_turbo") or features.version("jpg")}
    if path == "device":
        found["torchvision"] = dist_version("torchvision")
    return found


def library_versions() -> dict:
    """Python, platform, vlbench, the RECORDED libraries and the plug-ins in use."""

    out: dict[str, object] = {"python": platform.python_version(), "platform": platform.platform(),
                              "vlbench": __version__}
    out.update({dist: dist_version(dist) for dist in RECORDED})
    out["plugins"] = plugin_versions()
    return out
