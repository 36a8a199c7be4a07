"""Vectors made on an accelerator are another model identity than the CPU's (they agree only within a tolerance,
docs/metrics.md): a GPU run never reuses or resumes from vectors a CPU run cached, nor the other way round, while
the CPU's own keys stay what they were (existing caches stay valid)."""

from __future__ import annotations

import pytest

from vlbench.models import lazy as lazy_mod
from vlbench.models.lazy import LazyModel, fingerprint


def test_a_cuda_fingerprint_is_not_the_cpus_and_the_cpus_is_unchanged(tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    kw = dict(precision="fp32", trust_remote_code=False, revision=None)
    spec = f"clip:{tmp_path / 'ckpt'}"
    cpu = fingerprint(spec, **kw)
    assert cpu is not None
    assert fingerprint(spec, device_kind="cpu", **kw) == cpu  # the default: a CPU cache keeps its key
    assert fingerprint(spec, device_kind="cuda", **kw) not in (None, cpu)
    assert fingerprint(spec, device_kind="mps", **kw) not in (None, cpu, fingerprint(spec, device_kind="cuda", **kw))


@pytest.mark.slow  # loads a tiny CLIP three times
@pytest.mark.parametrize("kind", ["cuda", "mps"])
def test_vectors_made_on_an_accelerator_never_share_the_cpus_cache_entries(tiny_models, tmp_path, monkeypatch, kind):
    spec = f"clip:{tiny_models('clip')}"
    on_cpu = LazyModel(spec, tmp_path / "cache", device="cpu")
    assert on_cpu.device_kind == "cpu"
    cpu_hash, cpu_identity = on_cpu.model_hash(), on_cpu.identity()
    assert "device" not in cpu_identity  # the adapter's own identity: caches made before stay valid
    assert cpu_hash == on_cpu.real.model_hash()

    # the device a model would be loaded on, as loading resolves it; the load itself stays on the CPU here (no GPU)
    real_pick = lazy_mod.pick_device
    real_load = lazy_mod.load_model
    monkeypatch.setattr(lazy_mod, "pick_device", lambda d=None: kind if d == kind else real_pick(d))
    monkeypatch.setattr(lazy_mod, "load_model", lambda s, **kw: real_load(s, **{**kw, "device": "cpu"}))
    on_accel = LazyModel(spec, tmp_path / "cache", device=kind)
    assert on_accel.device_kind == kind
    assert on_accel.identity()["device"] == kind
    assert on_accel.model_hash() != cpu_hash  # the encoding cache is keyed by the model hash
    again = LazyModel(spec, tmp_path / "cache", device="cpu")  # the CPU's remembered identity is untouched
    assert again.model_hash() == cpu_hash
