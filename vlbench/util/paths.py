"""Where vlbench keeps data, caches and runs (all overridable)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The cache root when no ``--cache-dir`` is given; stores under it are declared in :mod:`vlbench.stores`."""
    if os.environ.get("VLBENCH_CACHE_DIR"):
        return Path(os.environ["VLBENCH_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vlbench"


def default_data_dir() -> Path:
    if os.environ.get("VLBENCH_DATA_DIR"):
        return Path(os.environ["VLBENCH_DATA_DIR"]).expanduser()
    return cache_root() / "data"


def offline() -> bool:
    """True when the user (or the environment) asked for no network access."""
    for var in ("VLBENCH_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return True
    return False
