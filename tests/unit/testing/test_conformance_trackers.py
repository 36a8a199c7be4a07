"""vlbench.testing.check_tracker: the example plug-in's tracker passes (the built-ins, which need their libraries:
tests/integration/test_tracker_reports.py); a tracker that breaks one clause fails it, and the error names the
tracker and the clause."""

from __future__ import annotations

import json

import pytest
from support.conformance import fails_clause
from vlbench_counting_plugin.trackers import CountingJsonl

from vlbench.testing import check_tracker

CLAUSES = ["protocol", "prepare", "send", "payload unchanged", "send again"]


def test_the_example_plugin_tracker_passes_and_its_file_holds_both_runs(tmp_path):
    path = tmp_path / "t.jsonl"
    assert check_tracker(CountingJsonl(), {"path": str(path)}).passed == CLAUSES
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [(x["name"], x["step"], x["project"]) for x in lines] == [("check-sample", None, "vlbench-check"),
                                                                       ("check-sample-2", 1, "vlbench-check")]
    assert lines[0]["metrics"]["clean/t2i/recall@1"] == 41.0


def test_tensorboard_passes_check_tracker_where_it_is_installed(tmp_path):
    pytest.importorskip("tensorboard")
    assert check_tracker("tensorboard", {"log_dir": str(tmp_path / "tb")}).passed == CLAUSES


def _with(**members):
    return type("Broken", (CountingJsonl,), members)()


def _mutates(self, payload, project, **kw):
    payload.metrics["clean/t2i/recall@1"] = -1.0
    return "somewhere"


def _first_only(self, payload, project, **kw):
    if payload.step is not None:
        raise RuntimeError("a second run in the same process is not supported")
    return "somewhere"


BROKEN = [  # (the clause it breaks, how, the tracker)
    ("protocol", "no-description", _with(description=None)),
    ("protocol", "no-prepare", _with(prepare="later")),
    ("protocol", "no-send", _with(send=None)),
    ("prepare", "raises", _with(prepare=lambda self, **kw: 1 / 0)),
    ("prepare", "prints-a-banner", _with(prepare=lambda self, **kw: print("Tracker v1.0 ready!"))),
    ("send", "raises", _with(send=lambda self, p, project, **kw: {}["missing"])),
    ("send", "returns-nothing", _with(send=lambda self, p, project, **kw: None)),
    ("send", "returns-many-lines", _with(send=lambda self, p, project, **kw: "run 1\nat /tmp/x\nsynced")),
    ("payload unchanged", "changes-the-metrics", _with(send=_mutates)),
    ("send again", "fails-a-second-run", _with(send=_first_only)),
]


@pytest.mark.parametrize("clause, tracker", [(c, t) for c, _, t in BROKEN], ids=[how for _, how, _ in BROKEN])
def test_a_broken_tracker_fails_the_clause_it_breaks(clause, tracker, tmp_path):
    err = fails_clause(check_tracker, tracker, "tracker", clause, settings={"path": str(tmp_path / "t.jsonl")})
    assert err.plugin == "Broken" and "'Broken'" in str(err)
