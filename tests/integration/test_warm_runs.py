"""Warm runs: nothing encoded, the model not even loaded; both top-k paths give the same ranking."""

from __future__ import annotations

import shutil

import numpy as np
import pytest


def test_warm_run_does_not_load_the_model(tiny_models, manifest, tmp_path):
    from vlbench.pipeline.runner import run

    folder = tmp_path / "clip"
    shutil.copytree(tiny_models("clip"), folder)
    cache = str(tmp_path / "cache")
    kw = dict(dataset=f"custom:{manifest}", quiet=True, num_workers=0, cache_dir=cache, n_boot=50,
              perturb="distraction-true,shuffle-all-words")
    cold = run(model=f"clip:{folder}", out=str(tmp_path / "cold"), **kw)
    warm = run(model=f"clip:{folder}", out=str(tmp_path / "warm"), **kw)
    assert cold.results["encoding"]["model_loaded"] is True
    assert warm.results["encoding"]["model_loaded"] is False
    assert warm.results["encoding"]["images_encoded"] == 0 and warm.results["encoding"]["texts_encoded"] == 0
    assert warm.results["results"] == cold.results["results"]
    assert warm.results["model"] == cold.results["model"]
    # other weights in the same folder: a different fingerprint, so the model is loaded and re-encodes
    from safetensors.torch import load_file, save_file

    wfile = next(folder.glob("*.safetensors"))
    state = load_file(wfile)
    key = next(k for k in state if k.endswith("text_projection.weight"))
    state[key] = state[key] * 2 + 0.01
    save_file(state, wfile, metadata={"format": "pt"})
    changed = run(model=f"clip:{folder}", out=str(tmp_path / "changed"), **kw)
    assert changed.results["encoding"]["model_loaded"] is True
    assert changed.results["model"]["hash"] != cold.results["model"]["hash"]
    assert changed.results["encoding"]["texts_encoded"] > 0


@pytest.mark.parametrize("seed", range(20))
def test_numpy_and_torch_topk_paths_agree(seed, monkeypatch):
    from vlbench.metrics import ranking as M  # the shared ranking step

    rng = np.random.default_rng(seed)
    S = rng.integers(0, 4, size=(int(rng.integers(3, 30)), int(rng.integers(3, 60)))).astype(np.float32)
    K = int(rng.integers(1, S.shape[1] + 1))
    monkeypatch.setattr(M, "_use_torch", lambda block: True)
    a = M._sorted_topk(S, K)
    monkeypatch.setattr(M, "_use_torch", lambda block: False)
    b = M._sorted_topk(S, K)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    ref = np.argsort(-S, axis=1, kind="stable")[:, :K]
    assert np.array_equal(a[0], ref)
