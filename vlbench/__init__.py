"""vlbench: evaluation and robustness benchmark for image-text retrieval.

Importing vlbench is cheap: torch, transformers and spaCy are imported only when used.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["score", "evaluate", "run", "RunConfig", "load_dataset", "load_results", "ModelAdapter", "Dataset",
           "granularity_table", "benchmark", "perturbations", "granularity", "leaderboards", "__version__"]

#: public name -> "module:attribute", imported on first use (importing vlbench stays cheap)
_LAZY = {
    "score": "vlbench.benchmark.metrics:score",
    "evaluate": "vlbench.benchmark.metrics:evaluate",
    "load_dataset": "vlbench.benchmark.datasets:load_dataset",
    "Dataset": "vlbench.benchmark.datasets:Dataset",
    "run": "vlbench.benchmark.runner:run",
    "RunConfig": "vlbench.benchmark.runner:RunConfig",
    "ModelAdapter": "vlbench.benchmark.models:ModelAdapter",
    "load_results": "vlbench.leaderboards:load_results",
    "granularity_table": "vlbench.granularity:granularity_table",
}
_SUBPACKAGES = ("benchmark", "perturbations", "granularity", "leaderboards")


def __getattr__(name):  # lazy public API: vlbench.score, vlbench.granularity.granularity_table, ...
    import importlib

    if name in _SUBPACKAGES:
        return importlib.import_module(f"vlbench.{name}")
    if name in _LAZY:
        module, _, attr = _LAZY[name].partition(":")
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'vlbench' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
