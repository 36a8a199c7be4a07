"""Caption granularity statistics: how fine-grained the captions of a test set are (eight features per caption).

>>> from vlbench.granularity import granularity_table, caption_features
>>> granularity_table(["coco", "coco-fg"], data_dir="/path/to/captions")   # doctest: +SKIP
>>> caption_features(["A black and white dog runs in a grassy garden."])    # doctest: +SKIP

The readings of the eight features and their options: docs/granularity.md. Importing this package
is cheap (pandas, numpy and spaCy load on first use), so ``vlbench --help`` stays fast.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "FEATURES": "features", "FeatureOptions": "features", "analyse_doc": "features",
    "caption_features": "features", "PROFILES": "features", "DEFAULT_PROFILE": "features", "normalize_text": "features",
    "text_problem": "features",
    "FG_PAIRS": "table", "GranularityReport": "table", "bootstrap_differences": "table",
    "dataset_features": "table", "granularity_report": "table", "granularity_table": "table",
    "table_from_captions": "table", "per_caption_frame": "table",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
