"""vlbench: evaluation and robustness benchmark for image-text retrieval.

Importing vlbench is cheap: torch, transformers and spaCy are imported only when used.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["score", "evaluate", "run", "load_dataset", "load_results", "__version__"]


def __getattr__(name):  # lazy public API
    if name == "score":
        from .benchmark.metrics import score
        return score
    if name == "evaluate":
        from .benchmark.metrics import evaluate
        return evaluate
    if name == "load_dataset":
        from .benchmark.datasets import load_dataset
        return load_dataset
    if name == "run":
        from .benchmark.runner import run
        return run
    if name == "load_results":
        from .leaderboards import load_results
        return load_results
    raise AttributeError(f"module 'vlbench' has no attribute {name!r}")
