"""Each experiment tracker, in its offline / local mode, receives every metric record of a tiny run: read back with
the tracker's own reader (W&B: the offline run file through wandb's protobuf schema; MLflow: MlflowClient on a
file store; TensorBoard: EventAccumulator; trackio: its SQLite store) and compared value by value with
results.json."""

from __future__ import annotations

import json
import math

import pytest
from support.tools import needs_package, require_package

from vlbench.results import RunRecord
from vlbench.trackers import config_of, metric_name, mlflow_name, report


def _needs(module: str):
    return needs_package(module, f"the {module} tracker, read back in its offline mode")


def _expected(run_dir) -> dict:
    """name -> value of every metric record with a value, straight from results.json (not through trackers)."""
    doc = json.loads((run_dir / "results.json").read_text())
    out = {}
    for r in doc["results"]:
        if r["value"] is not None:
            out[f"{r['condition']}/{r['direction']}/{r['metric']}" + (f"@{r['k']}" if r["k"] is not None else "")] \
                = r["value"]
    for iv in doc["bootstrap"]:
        base = f"{iv['condition']}/{iv['direction']}/{iv['metric']}_change"
        out.update({base: iv["delta"], base + "_ci_low": iv["ci_low"], base + "_ci_high": iv["ci_high"]})
    assert any(n.startswith("char-swap/") for n in out) and any(n.endswith("_ci_low") for n in out)
    return out


def _same(got: dict, want: dict, rel: float = 0.0) -> None:
    missing = sorted(set(want) - set(got))
    assert not missing, f"{len(missing)} metric records not received, e.g. {missing[:3]}"
    for name, value in want.items():
        assert math.isclose(got[name], value, rel_tol=rel, abs_tol=0.0), (name, got[name], value)


@_needs("wandb")
def test_wandb_offline_run_holds_every_metric_record(tiny_run, tmp_path, monkeypatch):
    from support.wandb_files import offline_run

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    (tmp_path / "wb").mkdir()
    assert report(tiny_run, "wandb", settings={"wandb": {"dir": str(tmp_path / "wb")}}, strict=True) == {"wandb": "ok"}
    got = offline_run(tmp_path / "wb")
    rec = RunRecord.load(tiny_run / "results.json")
    assert got["run"].display_name == rec.run_id
    assert len(got["history"]) == 1  # one row: the run's records at one step
    _same(got["history"][0], _expected(tiny_run))
    _same(got["summary"], _expected(tiny_run))
    assert got["config"]["model"] == rec.model.spec and got["config"]["dataset_hash"] == rec.dataset.hash
    assert "timings/wall_s" in got["history"][0]
    assert got["artifacts"]  # table.md and results.json as an artifact


@_needs("mlflow")
def test_mlflow_file_store_holds_every_metric_record(tiny_run, tmp_path):
    import mlflow

    uri = f"file:{tmp_path / 'mlruns'}"
    assert report(tiny_run, ["mlflow"], project="robustness", strict=True,
                  settings={"mlflow": {"tracking_uri": uri}}) == {"mlflow": "ok"}
    import os

    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # reading a file store back needs it too
    try:
        client = mlflow.MlflowClient(uri)
        exp = client.get_experiment_by_name("robustness")
        (run,) = client.search_runs([exp.experiment_id])
        rec = RunRecord.load(tiny_run / "results.json")
        assert run.info.run_name == rec.run_id and run.info.status == "FINISHED"
        want = {mlflow_name(n): v for n, v in _expected(tiny_run).items()}
        _same(run.data.metrics, want)
        params = run.data.params
        assert params["model"] == rec.model.spec and params["settings.seed"] == str(rec.settings["seed"])
        arts = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert {"table.md", "results.json"} <= arts
    finally:
        del os.environ["MLFLOW_ALLOW_FILE_STORE"]


@_needs("tensorboard")
def test_tensorboard_event_files_hold_every_metric_record(tiny_run, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    report(tiny_run, "tensorboard", settings={"tensorboard": {"log_dir": str(tmp_path / "tb")}}, strict=True)
    rec = RunRecord.load(tiny_run / "results.json")
    (folder,) = (tmp_path / "tb" / "vlbench").iterdir()
    assert folder.name == rec.run_id.replace(":", "-")
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    got = {tag: acc.Scalars(tag)[-1].value for tag in acc.Tags()["scalars"]}
    _same(got, _expected(tiny_run), rel=1e-6)  # TensorBoard stores scalars as float32
    assert "config" in " ".join(acc.Tags()["tensors"])  # the options as a text summary


@_needs("trackio")
def test_trackio_local_store_holds_every_metric_record(tiny_run, tmp_path, monkeypatch):
    monkeypatch.setenv("TRACKIO_DIR", str(tmp_path / "trackio"))
    import trackio.sqlite_storage as storage
    import trackio.utils as tu

    for mod in (tu, storage):  # trackio reads TRACKIO_DIR when it is imported
        if hasattr(mod, "TRACKIO_DIR"):
            monkeypatch.setattr(mod, "TRACKIO_DIR", tmp_path / "trackio")
    assert report(tiny_run, "trackio", project="tiny", strict=True) == {"trackio": "ok"}
    rec = RunRecord.load(tiny_run / "results.json")
    (row,) = storage.SQLiteStorage.get_logs("tiny", rec.run_id)
    _same(row, _expected(tiny_run))
    assert storage.SQLiteStorage.get_run_config("tiny", rec.run_id)["model"] == rec.model.spec
    assert list((tmp_path / "trackio").iterdir())  # the store is where TRACKIO_DIR says


@_needs("tensorboard")
def test_report_to_on_run_sends_the_finished_run(counting_plugin, tmp_path, monkeypatch):
    """vlbench.run(report_to=...) reports after the run's files are written."""
    from support.runs import counting_run
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.setenv("VLBENCH_TENSORBOARD_DIR", str(tmp_path / "tb"))
    run_dir = counting_run(tmp_path / "r", report_to="tensorboard")
    (folder,) = (tmp_path / "tb" / "vlbench").iterdir()
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    _same({t: acc.Scalars(t)[-1].value for t in acc.Tags()["scalars"]}, _expected(run_dir), rel=1e-6)


def test_a_failing_tracker_is_one_line_and_the_run_is_kept(counting_plugin, tmp_path, monkeypatch, capsys):
    from support.runs import counting_run

    from vlbench.trackers import backends

    def broken(*a, **k):
        raise ConnectionError("tracking server unreachable")

    monkeypatch.setattr(backends.MlflowTracker, "send", broken)
    run_dir = counting_run(tmp_path / "r", report_to=["mlflow"])
    err = [line for line in capsys.readouterr().err.splitlines() if "mlflow" in line]
    assert len(err) == 1 and "unreachable" in err[0] and "could not report run" in err[0]
    rec = RunRecord.load(run_dir / "results.json")  # complete and readable
    assert config_of(rec)["run_id"] == rec.run_id and (run_dir / "table.md").is_file()
    assert metric_name("clean", "t2i", "recall", 1) in _expected(run_dir)


@pytest.mark.parametrize("name", ["wandb", "mlflow", "tensorboard", "trackio"])
def test_builtin_trackers_pass_check_tracker(name, tmp_path, monkeypatch):
    require_package(name, f"the {name} tracker's conformance check")
    from vlbench.testing import check_tracker

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("TRACKIO_DIR", str(tmp_path / "trackio"))
    if name == "trackio":
        import trackio.sqlite_storage as storage
        import trackio.utils as tu

        for mod in (tu, storage):  # trackio reads TRACKIO_DIR when it is imported
            if hasattr(mod, "TRACKIO_DIR"):
                monkeypatch.setattr(mod, "TRACKIO_DIR", tmp_path / "trackio")
    settings = {"wandb": {"dir": str(tmp_path)}, "mlflow": {"tracking_uri": f"file:{tmp_path / 'mlruns'}"},
                "tensorboard": {"log_dir": str(tmp_path / "tb")}, "trackio": {}}[name]
    report = check_tracker(name, settings)
    assert report.passed == ["protocol", "prepare", "send", "payload unchanged", "send again"]
