"""--report-to's names and checks, the metric names trackers show, and the error when a tracker's extra is
missing (no tracker library is needed here)."""

from __future__ import annotations

import sys

import pytest

from vlbench.errors import OptionError
from vlbench.results import Interval, MetricKey, MetricValue
from vlbench.trackers import TrackerError, metric_name, metrics_of, mlflow_name, parse_report_to


def test_report_to_accepts_names_lists_none_and_all():
    assert parse_report_to("wandb, MLflow,wandb") == ("wandb", "mlflow")
    assert parse_report_to(["tensorboard"]) == ("tensorboard",)
    assert parse_report_to("none") == () and parse_report_to(None) == ()
    assert set(parse_report_to("all")) >= {"wandb", "mlflow", "tensorboard", "trackio"}  # every registered one


def test_unknown_tracker_is_named_with_the_known_ones():
    with pytest.raises(OptionError) as e:
        parse_report_to("wandb,comet")
    assert e.value.option == "report_to" and "'comet'" in e.value.message
    assert "trackio" in e.value.hint


def test_misspelt_tracker_gets_did_you_mean():
    with pytest.raises(OptionError) as e:
        parse_report_to("tensorbord")
    assert "did you mean 'tensorboard'" in e.value.hint
    assert "--report-to" in e.value.cli_text()


def test_run_config_refuses_unknown_tracker_before_any_work():
    from vlbench.pipeline.run_config import RunConfig, validate

    cfg = RunConfig(model="a", dataset="b", report_to="tensorbord")
    assert cfg.report_to == ("tensorbord",)
    with pytest.raises(OptionError) as e:
        validate(cfg)
    assert e.value.option == "report_to"


def test_metric_names_group_by_condition_and_mlflow_gets_legal_names():
    assert metric_name("clean", "t2i", "recall", 1) == "clean/t2i/recall@1"
    assert metric_name("char-swap", "both", "rsum") == "char-swap/both/rsum"
    assert mlflow_name("budget:16/t2i/recall@5") == "budget:16/t2i/recall_at_5"
    assert mlflow_name("bits=2/i2t/recall@1") == "bits_2/i2t/recall_at_1"


class _Rec:  # the fields metrics_of reads
    values = [MetricValue("clean", MetricKey("t2i", "recall", 1), 50.0),
              MetricValue("clean", MetricKey("t2i", "medr"), None)]
    intervals = [Interval("typos", {"direction": "both", "metric": "rsum", "delta": -3.5, "ci_low": -5.0,
                                    "ci_high": -2.0})]
    timings = {"wall_seconds": 2.5, "stages": {"encoding": {"seconds": 1.25}}}


def test_metrics_of_every_record_with_a_value_its_interval_and_timings():
    assert metrics_of(_Rec()) == {"clean/t2i/recall@1": 50.0, "typos/both/rsum_change": -3.5,
                                  "typos/both/rsum_change_ci_low": -5.0, "typos/both/rsum_change_ci_high": -2.0,
                                  "timings/wall_s": 2.5, "timings/encoding_s": 1.25}


@pytest.mark.parametrize("name", ["wandb", "mlflow", "tensorboard", "trackio"])
def test_missing_tracker_names_the_install_command_that_works_from_a_clone(name, monkeypatch):
    from vlbench import registry
    from vlbench.trackers import Payload

    monkeypatch.setitem(sys.modules, name, None)  # import fails as when the package is absent
    tracker = registry.trackers.get(name)
    for call in (lambda: tracker.prepare(), lambda: tracker.send(Payload("r", {}, {"clean/t2i/recall@1": 1.0}), "p",
                                                                 **({"log_dir": "unused"} if name == "tensorboard"
                                                                    else {}))):
        with pytest.raises(TrackerError) as e:
            call()
        assert f"pip install -e '.[{name}]'" in str(e.value) and "clone" in str(e.value)
