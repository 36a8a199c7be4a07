"""vlbench: evaluation and robustness benchmark for image-text retrieval.

Importing vlbench is cheap: every name below is imported on first use (torch, transformers and spaCy
only when something that needs them runs), so ``vlbench --help`` and ``vlbench ls`` stay fast.

>>> import vlbench
>>> vlbench.score(similarity, caption_to_image)          # doctest: +SKIP  (a NumPy (images, captions) array)
>>> vlbench.run(model="clip", dataset="flickr30k", perturb="all", out="runs/x")   # doctest: +SKIP
>>> vlbench.granularity.granularity_table(["coco", "coco-fg"])                   # doctest: +SKIP
>>> vlbench.sweep.sweep("plan.toml", "studies/x")   # a grid of runs (docs/scale.md)  # doctest: +SKIP
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "score": "metrics.compute", "evaluate": "metrics.compute", "Evaluation": "metrics.compute",
    "SimilaritySource": "metrics.ranking", "ArraySource": "metrics.ranking", "EmbeddingSource": "metrics.ranking",
    "Metric": "metrics.specs",
    "run": "pipeline.runner", "RunConfig": "pipeline.run_config", "RunResult": "pipeline.runner",
    "load_dataset": "datasets.core", "Dataset": "datasets.core",
    "ModelAdapter": "models.adapter", "ModelFamily": "models.families", "RunCondition": "conditions",
    "RunRecord": "results", "MetricKey": "results",
    "BasePerturbation": "perturbations.base", "PerturbedSet": "perturbations.base",
    "perturb_captions": "perturbations",
    "load_results": "leaderboards", "build_leaderboard": "leaderboards",
    "granularity_table": "granularity", "caption_features": "granularity",
    "VlbenchError": "errors",
}
_SUBPACKAGES = ("models", "datasets", "metrics", "encoding", "pipeline", "granularity", "leaderboards", "perturbations",
                "imageperturb", "shortcuts", "tasks", "registry", "config", "errors", "results", "testing",
                "trackers", "training", "sweep")

__all__ = sorted([*_EXPORTS, *_SUBPACKAGES, "__version__"])


def __getattr__(name):  # lazy public API (PEP 562)
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module 'vlbench' has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
