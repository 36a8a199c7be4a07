"""Causes found from outside in the trackers (issue 44), each with the behaviour that protects against it: a
TensorBoard project name cannot write outside the TensorBoard folder, report() on a folder without a run is an
error (not a traceback), a tracker's failure is one line (not a Python warning with a source line), --quiet
silences a tracker's banners but keeps the one line saying where the run went, and the trackers' start-up runs
in a background thread while the run computes."""

from __future__ import annotations

import threading
import time

import pytest
from support.synthetic_runs import synth_run

from vlbench import registry
from vlbench.errors import VlbenchError
from vlbench.trackers import Payload, TrackerError, report, start


@pytest.fixture
def run(tmp_path):
    return synth_run(tmp_path / "run", perturb=("char-swap",))


@pytest.mark.parametrize("project", ["..", "../outside", "a/../../b", "/tmp/abs", "a/b", "a\\b", ""])
def test_tensorboard_project_cannot_write_outside_the_tensorboard_folder(tmp_path, project):
    tracker = registry.trackers.get("tensorboard")
    tb = tmp_path / "tb"
    with pytest.raises(TrackerError, match="not one folder name"):
        tracker.send(Payload("r1", {}, {"clean/t2i/recall@1": 1.0}), project, log_dir=str(tb))
    assert not tb.exists() or not any(tb.rglob("*"))
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["tb"])  # nothing written beside it


def test_tensorboard_project_refusal_via_report_is_one_line_and_the_run_is_kept(run, tmp_path, capsys):
    assert report(run, "tensorboard", project="../../escape", settings={"tensorboard": {"log_dir": str(tmp_path /
                                                                                          "tb")}})["tensorboard"]
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "not one folder name" in err
    assert not (tmp_path.parent / "escape").exists()


def test_report_on_a_folder_without_a_run_is_a_clear_error(tmp_path):
    with pytest.raises(VlbenchError, match="holds no finished run"):
        report(tmp_path, "tensorboard")
    with pytest.raises(VlbenchError, match="not a folder"):
        report(tmp_path / "missing", "tensorboard")
    (tmp_path / "results.json").write_text("{not json")
    with pytest.raises(VlbenchError, match="cannot be read"):
        report(tmp_path, "tensorboard")


class _Fake:
    """A tracker registered in-process: records where its calls ran, prints a banner as wandb and trackio do."""

    description = "a fake tracker of the tests"

    def __init__(self, fail: Exception | None = None, slow: float = 0.0):
        self.fail, self.slow, self.threads, self.sent = fail, slow, [], []

    def prepare(self, **settings) -> None:
        self.threads.append(threading.current_thread().name)
        time.sleep(self.slow)

    def send(self, payload, project, **settings) -> str:
        for i in range(40):
            print(f"fake: banner line {i}")
        if self.fail is not None:
            raise self.fail
        self.sent.append(payload.name)
        return f"/somewhere/{project}/{payload.name}"


@pytest.fixture
def fake(monkeypatch):
    made = {}

    def register(name: str, tracker: _Fake) -> _Fake:
        monkeypatch.setitem(registry.trackers._entries, name, registry.Entry(name, tracker, source="plugin:test"))
        made[name] = tracker
        return tracker

    return register


def test_tracker_failure_is_one_line_not_a_python_warning(run, fake, capsys, recwarn):
    fake("fake-broken", _Fake(fail=ConnectionError("tracking server unreachable")))
    got = report(run, "fake-broken", quiet=True)
    assert "unreachable" in got["fake-broken"]
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "could not report run" in err and "unreachable" in err
    assert "vlbench.trackers.report(" in err  # how to send it again
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_quiet_silences_tracker_banners_and_keeps_the_line_saying_where(run, fake, capsys):
    fake("fake-ok", _Fake())
    lines = []
    assert report(run, "fake-ok", quiet=True, log=lines.append) == {"fake-ok": "ok"}
    out = capsys.readouterr()
    assert "banner" not in out.out + out.err
    assert len(lines) == 1 and lines[0].startswith("reported to fake-ok in ") and "/somewhere/vlbench/" in lines[0]
    report(run, "fake-ok", quiet=False)
    assert capsys.readouterr().out.count("banner line") == 40  # not quiet: the tracker speaks as it would


def test_tracker_start_up_runs_in_a_background_thread_and_report_waits_for_it(run, fake):
    slow = fake("fake-slow", _Fake(slow=0.3))
    t0 = time.perf_counter()
    started = start("fake-slow")
    assert time.perf_counter() - t0 < 0.2  # start() returns at once: the run computes meanwhile
    lines = []
    assert report(run, "fake-slow", started=started, log=lines.append) == {"fake-slow": "ok"}
    assert slow.threads == ["vlbench-tracker-start"] and slow.sent
    assert started.seconds["fake-slow"] >= 0.3
    assert "start-up 0.3 s while the run computed" in lines[0] or "start-up 0.4 s while" in lines[0], lines
    assert float(lines[0].split(" in ")[1].split(" s")[0]) < 0.3  # the send alone: the start-up was done


def test_a_failed_start_up_is_tried_again_by_send(run, fake):
    class FlakyStart(_Fake):
        def prepare(self, **settings):
            raise ImportError("half-imported in the background")

    flaky = fake("fake-flaky", FlakyStart())
    started = start("fake-flaky")
    assert report(run, "fake-flaky", started=started) == {"fake-flaky": "ok"} and flaky.sent
    assert "half-imported" in started.problems["fake-flaky"]


@pytest.mark.slow  # a whole run
def test_run_with_report_to_starts_the_tracker_before_its_work_and_sends_after(counting_plugin, fake, tmp_path,
                                                                            capsys):
    from support.runs import counting_run

    tracker = fake("fake-run", _Fake())
    run_dir = counting_run(tmp_path / "r", report_to="fake-run")
    assert tracker.threads == ["vlbench-tracker-start"] and tracker.sent
    assert "reported to fake-run in" in capsys.readouterr().err and (run_dir / "results.json").is_file()
