"""A warm run (every embedding from the cache, no model loaded) computes its similarities on the device the
cold run used. Found on the H100 machine: a cold run scored on the GPU (block products in CUDA) and its warm
rerun on NumPy, and DCG differed in the 8th digit (0.5198309766 vs 0.5198309850) although every embedding was
the same; rankings of near-ties could differ too."""

from __future__ import annotations

from types import SimpleNamespace

import pytest


def _not_loaded(device):
    """A LazyModel as a warm run holds it: its identity remembered, the model itself never loaded."""
    from vlbench.models.lazy import LazyModel

    lazy = LazyModel.__new__(LazyModel)
    lazy.spec, lazy._kw, lazy._real = "clip:/nowhere", {"device": device}, None
    return lazy


def test_a_model_not_loaded_scores_where_it_would_have_run(monkeypatch, tmp_path):
    import torch

    from vlbench.pipeline.scoring import similarity_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    lazy = _not_loaded(None)
    assert lazy.device == "cuda"  # what results record for a warm run: the device it ran on, not "not loaded"
    assert similarity_device(lazy) == "cuda"  # and where its scores are computed
    assert similarity_device(_not_loaded("cuda:1")) == "cuda:1"
    assert similarity_device(_not_loaded("cpu")) is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert similarity_device(_not_loaded("auto")) is None


@pytest.mark.parametrize("device, expected", [("cuda:0", "cuda:0"), ("cpu", None), ("mps", None)])
def test_a_loaded_or_plugin_adapter_scores_on_its_device(device, expected):
    from vlbench.pipeline.scoring import similarity_device

    assert similarity_device(SimpleNamespace(device=device)) == expected
