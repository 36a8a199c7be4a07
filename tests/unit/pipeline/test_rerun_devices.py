"""A finished run is the same run only on the same kind of device and precision (and, on an accelerator, the same
batch sizes): the comparison that `--resume` and a sweep's skip rule make, tested without CUDA through the
comparison itself and through a finished CPU run asked for again with `device="cuda"`."""

from __future__ import annotations

import pytest

from vlbench.errors import OptionError
from vlbench.pipeline import presets
from vlbench.pipeline.rerun import device_kind, finished_run, number_options, option_differences, recorded_options
from vlbench.pipeline.run_config import RunConfig
from vlbench.results import RunRecord


def _cfg(**kw) -> RunConfig:
    return RunConfig(model="counting", dataset="custom:m.jsonl", **kw)


def test_a_cpu_run_and_a_cuda_run_differ_in_the_device_that_changes_numbers():
    cpu, cuda = number_options(_cfg(device="cpu"), "cpu"), number_options(_cfg(device="cuda"), "cuda")
    assert option_differences(cpu, cuda) == ["device 'cpu', not 'cuda'"]
    # cuda:0 and cuda:1 are one kind of device; the device's index is where it runs, not what it computes
    assert option_differences(number_options(_cfg(device="cuda:0"), "cuda:0"),
                              number_options(_cfg(device="cuda:1"), "cuda:1")) == []


def test_a_run_in_another_precision_is_another_run():
    assert option_differences(number_options(_cfg(), "cpu"), number_options(_cfg(precision="bf16"), "cpu")) == [
        "precision 'fp32', not 'bf16'"]


def test_batch_sizes_change_numbers_on_an_accelerator_only():
    assert option_differences(number_options(_cfg(batch_size=8), "cpu"), number_options(_cfg(batch_size=64), "cpu")) \
        == []
    assert option_differences(number_options(_cfg(batch_size=8), "cuda"),
                              number_options(_cfg(batch_size=64), "cuda")) == ["batch_size 8, not 64"]
    assert option_differences(number_options(_cfg(text_batch_size=8), "mps"),
                              number_options(_cfg(), "mps")) == ["text_batch_size 8, not None"]


def test_the_default_device_is_resolved_before_it_is_compared(monkeypatch):
    from vlbench.models import adapter

    monkeypatch.setattr(adapter, "pick_device", lambda device=None: "cuda")  # a machine with a GPU
    assert device_kind(None) == device_kind("auto") == "cuda"
    assert number_options(_cfg())["device"] == "cuda"
    monkeypatch.setattr(adapter, "pick_device", lambda device=None: "cpu")
    assert number_options(_cfg())["device"] == "cpu"
    assert device_kind("not loaded") is None


def test_a_run_recorded_before_the_device_counted_is_compared_by_its_settings():
    rec = type("Rec", (), {"settings": {"options": {"k": [1]}, "device": "cuda:0", "batch_size": 32}})()
    assert recorded_options(rec) == {"k": [1], "device": "cuda", "batch_size": 32}
    warm = type("Rec", (), {"settings": {"options": {"k": [1]}, "device": "not loaded", "batch_size": 32}})()
    assert recorded_options(warm)["device"] is None  # unknown: never taken as equal to this run's


@pytest.mark.slow
def test_a_finished_cpu_run_is_not_resumed_or_skipped_as_the_same_run_on_cuda(counting_plugin, tmp_path):
    """A real finished CPU run: asked for again on cuda (or in another precision) it is refused by resume, naming
    the device, and a sweep's state of it is a conflict (never "finished", so never skipped)."""
    from support.data import write_manifest

    from vlbench.pipeline.runner import run
    from vlbench.sweep.status import CONFLICT, FINISHED, state_of
    from vlbench.sweep.worker import Task

    man = write_manifest(tmp_path / "data", 6)
    kw = dict(model="counting:dim=16", dataset=f"custom:{man}", quiet=True, num_workers=0, n_boot=20,
              validity="off", no_cache=True, device="cpu")
    out = tmp_path / "run"
    run(out=str(out), **kw)
    assert RunRecord.load(out).settings["options"]["device"] == "cpu"
    assert finished_run(presets.resolve(RunConfig(**kw, out=str(out), resume=True)), lambda m: None) is not None
    assert state_of(Task(run_id="r", folder=str(out), kwargs=kw, log=str(out) + ".log"))[0] == FINISHED
    for other, named in (({"device": "cuda"}, "device 'cpu', not 'cuda'"),
                         ({"precision": "fp16"}, "precision 'fp32', not 'fp16'")):
        with pytest.raises(OptionError) as err:
            finished_run(presets.resolve(RunConfig(**{**kw, **other}, out=str(out), resume=True)), lambda m: None)
        assert named in str(err.value)
        state, why = state_of(Task(run_id="r", folder=str(out), kwargs={**kw, **other}, log=str(out) + ".log"))
        assert state == CONFLICT and named in why
