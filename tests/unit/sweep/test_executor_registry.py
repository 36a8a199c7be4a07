"""Executors are a registry kind like models and datasets (built-ins registered lazily, as a third party's
entries are; listed by `vlbench ls`; a misspelt name answered with "did you mean"), and the one typed outcome
every executor returns (vlbench.execution.RunOutcome) refuses an outcome that does not add up."""

from __future__ import annotations

import pytest

from vlbench import registry
from vlbench.cli import main
from vlbench.execution import RunOutcome, RunStatus, Task, attempt_header, log_mark, lost


def test_the_builtin_executors_are_registered_as_lazy_entries_and_listed(capsys):
    entries = {e.name: e for e in registry.executors.entries()}
    assert {"local", "inline", "slurm", "ray"} <= set(entries)
    for name in ("local", "inline", "slurm", "ray"):  # "module:attr", imported only when chosen
        assert entries[name].source == "builtin" and isinstance(entries[name].target, str)
    assert main(["ls", "executors"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("executors:") and all(f"  {n} " in out for n in ("local", "inline", "slurm", "ray"))
    assert "Slurm job array" in out


def test_an_unknown_executor_gets_did_you_mean_before_anything_runs(tmp_path, capsys):
    plan = tmp_path / "plan.toml"
    plan.write_text('[models]\nm = "clip:/nowhere"\n[datasets]\nd = "custom:/nowhere.jsonl"\n')
    assert main(["sweep", str(plan), "--out", str(tmp_path / "s"), "--executor", "slrum"]) == 2
    err = capsys.readouterr().err
    assert "unknown --executor 'slrum'" in err and "did you mean slurm?" in err and "vlbench ls executors" in err
    assert not (tmp_path / "s").exists()


def test_a_bad_executor_option_is_refused_before_the_study_folder_is_written(tmp_path, capsys):
    plan = tmp_path / "plan.toml"
    plan.write_text('[models]\nm = "clip:/nowhere"\n[datasets]\nd = "custom:/nowhere.jsonl"\n')
    assert main(["sweep", str(plan), "--out", str(tmp_path / "s"), "--executor", "inline", "--option", "x=1"]) == 2
    assert "not an option of the inline executor" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("kwargs, problem", [
    (dict(status="finished"), "is not one of"),
    (dict(status="failed"), "needs its error"),
    (dict(status="done", error="boom"), "has no error"),
    (dict(status="failed", error="  "), "non-empty text"),
    (dict(status="done", seconds=None), "seconds must be a number"),
    (dict(status="done", attempts=None), "attempts must be a whole number"),
    (dict(status="done", attempts=-1), "attempts must be a whole number"),
])
def test_an_outcome_that_does_not_add_up_is_refused(kwargs, problem):
    with pytest.raises(TypeError, match=problem):
        RunOutcome(**{"run_id": "r", "folder": "f", "log": "l", **kwargs})


def test_an_outcome_reads_back_from_its_json_with_the_executors_facts():
    o = RunOutcome("r", RunStatus.KILLED, "runs/r", "runs/r.log", 3.25, 2, "its job died", {"job_id": "42_1"})
    d = o.as_dict()
    assert d == {"run_id": "r", "status": "killed", "error": "its job died", "log": "runs/r.log", "seconds": 3.25,
                 "attempts": 2, "folder": "runs/r", "job_id": "42_1"}
    assert RunOutcome.from_dict(d) == o and not o.ok and RunOutcome("r", "skipped", "f", "l").ok


def test_a_lost_run_counts_only_the_attempts_logged_since_the_executor_started_it(tmp_path):
    task = Task(run_id="r", folder=str(tmp_path / "r"), kwargs={}, log=str(tmp_path / "r.log"))
    (tmp_path / "r.log").write_text(attempt_header("r", 1) + "an earlier sweep\n")
    mark = log_mark(task)
    with open(task.log, "a") as fh:
        fh.write(attempt_header("r", 1) + "...\n" + attempt_header("other-run", 1) + attempt_header("r", 2))
    o = lost(task, "its worker died", since=mark)
    assert (o.status, o.attempts, o.log, o.folder) == (RunStatus.KILLED, 2, task.log, task.folder)
    assert 0 <= o.seconds < 60 and o.error == f"its worker died; see its log {task.log}"
    never = lost(Task(run_id="n", folder=str(tmp_path / "n"), kwargs={}), "no worker could start it",
                 status=RunStatus.FAILED)
    assert (never.attempts, never.seconds, never.log) == (0, 0.0, str(tmp_path / "n.log"))
