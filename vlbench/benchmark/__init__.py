"""Old import paths, kept for plug-ins and scripts written before this flat package was split into
layers (docs/architecture.md). ``vlbench.benchmark.<old>`` is the same module object as its new home, with a
DeprecationWarning naming the new path. Import from the new path, or from ``vlbench`` itself
(``vlbench.ModelAdapter``, ``vlbench.Metric``, ``vlbench.run``, ...), which stays stable."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: old module name under vlbench.benchmark -> the module it now is
MOVED = {
    "builtin_datasets": "vlbench.datasets.builtin",
    "cache": "vlbench.encoding.cache",
    "dataset_specs": "vlbench.datasets.specs",
    "datasets": "vlbench.datasets.core",
    "distributed": "vlbench.encoding.distributed",
    "download": "vlbench.datasets.download",
    "eccv": "vlbench.metrics.official",  # the metric functions (its ground-truth reader is vlbench.datasets.eccv)
    "encode": "vlbench.encoding.encode",
    "graded": "vlbench.metrics.graded",
    "graded_sources": "vlbench.metrics.graded_sources",
    "hf_models": "vlbench.models.hf",
    "identity": "vlbench.models.identity",
    "lazy": "vlbench.models.lazy",
    "metric_specs": "vlbench.metrics.specs",
    "metrics": "vlbench.metrics.compute",
    "models": "vlbench.models.adapter",
    "multilingual": "vlbench.datasets.multilingual",
    "official_positives": "vlbench.datasets.official",
    "openclip_model": "vlbench.models.openclip",
    "positives": "vlbench.datasets.positives",
    "preflight": "vlbench.pipeline.preflight",
    "protocol_settings": "vlbench.pipeline.presets",
    "protocols": "vlbench.datasets.folders",
    "ranking": "vlbench.metrics.ranking",
    "report": "vlbench.pipeline.report",
    "rouge": "vlbench.metrics.rouge",
    "run_config": "vlbench.pipeline.run_config",
    "run_options": "vlbench.pipeline.run_options",
    "runner": "vlbench.pipeline.runner",
    "stats": "vlbench.metrics.stats",
    "validity": "vlbench.perturbations.validity",
    "variant_types": "vlbench.conditions",
    "variants": "vlbench.pipeline.variants",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``vlbench.benchmark.<old>`` and hands out the moved module itself (not a copy)."""

    def find_spec(self, fullname, path=None, target=None):
        head, _, leaf = fullname.rpartition(".")
        if head == __name__ and leaf in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        new = MOVED[spec.name.rpartition(".")[2]]
        warnings.warn(f"{spec.name} moved to {new}; the old path will be removed in a later release",
                      DeprecationWarning, stacklevel=4)
        module = importlib.import_module(new)
        self.real_spec = module.__spec__
        return module

    def exec_module(self, module):  # the import system set the alias's spec on it: give back its own
        module.__spec__ = self.real_spec


if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.insert(0, _Alias())
