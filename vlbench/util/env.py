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


def library_versions() -> dict:
    """Python, platform, vlbench, the RECORDED libraries and the plug-ins in use."""

    out: dict[str, object] = {"python": platform.python_version(), "platform": platform.platform(),
                              "vlbench": __version__}
    out.update({dist: dist_version(dist) for dist in RECORDED})
    out["plugins"] = plugin_versions()
    return out
