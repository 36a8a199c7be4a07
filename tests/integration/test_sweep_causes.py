"""Causes found from outside in a sweep (issue 44, item 7), each with the regression test named after what it
protects: a sweep never writes through a link in its study folder; the study's leaderboard never shows an earlier
plan's runs; the first line and the summary say exactly how many runs are finished and how many in conflict.
(The Ray executor's bounded wait for a dead address: tests/unit/sweep/test_ray_executor_options.py.)"""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest
from support.data import write_manifest

from vlbench.cli import main
from vlbench.execution import RunStatus
from vlbench.sweep.plan import expand, read_plan
from vlbench.sweep.study import sweep
from vlbench.sweep.worker import Task, run_task

OPTIONS = '[options]\nn-boot = 20\nvalidity = "off"\nnum-workers = 0\n'


def _plan(tmp_path: Path, name: str, models: dict, conditions: str = "") -> Path:
    data = tmp_path / "data" / "manifest.jsonl"
    if not data.is_file():
        write_manifest(tmp_path / "data", 6)
    lines = [OPTIONS, f'cache-dir = "{tmp_path / "cache"}"', "[models]"]
    lines += [f'{k} = "{v}"' for k, v in models.items()]
    lines += ["[datasets]", f'six = "custom:{data}"', conditions]
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.fixture
def one_run(tmp_path, counting_plugin):
    plan = _plan(tmp_path, "plan.toml", {"count": "counting:dim=8"})
    study = tmp_path / "study"
    [task] = expand(read_plan(plan), study)
    return plan, study, task


def test_a_run_log_that_is_a_link_to_a_users_file_is_refused_and_the_file_untouched(one_run, tmp_path, capsys):
    plan, study, task = one_run
    mine = tmp_path / "my-notes.txt"
    mine.write_text("my own notes\n")
    Path(task.log).parent.mkdir(parents=True)
    os.symlink(mine, task.log)
    assert main(["sweep", str(plan), "--out", str(study), "--executor", "inline"]) == 2
    err = capsys.readouterr().err
    assert f"run {task.run_id}: the run's log {task.log} is a symbolic link" in err and "fix: remove the link" in err
    assert mine.read_text() == "my own notes\n" and "Traceback" not in err
    assert not Path(task.folder).exists()  # nothing ran


def test_a_run_folder_that_is_a_link_to_an_outside_folder_gets_no_file(one_run, tmp_path, capsys):
    plan, study, task = one_run
    outside = tmp_path / "outside"
    outside.mkdir()
    Path(task.folder).parent.mkdir(parents=True)
    os.symlink(outside, task.folder)
    assert main(["sweep", str(plan), "--out", str(study), "--executor", "inline"]) == 2
    err = capsys.readouterr().err
    assert f"the run's folder {task.folder} is a symbolic link (to {outside})" in err
    assert list(outside.iterdir()) == []


def test_a_study_runs_folder_that_is_a_link_is_refused(one_run, tmp_path, capsys):
    plan, study, task = one_run
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    study.mkdir()
    os.symlink(outside, study / "runs")
    assert main(["sweep", str(plan), "--out", str(study), "--executor", "inline"]) == 2
    assert "runs" in capsys.readouterr().err and list(outside.iterdir()) == []


def test_run_task_never_appends_through_a_link_put_in_place_of_its_log(tmp_path):
    """An executor that calls run_task directly (no sweep check first) still writes nothing through a link."""
    mine = tmp_path / "mine.txt"
    mine.write_text("mine\n")
    task = Task(run_id="r", folder=str(tmp_path / "runs" / "r"), kwargs={"model": "x", "dataset": "y"},
                log=str(tmp_path / "runs" / "r.log"))
    (tmp_path / "runs").mkdir()
    os.symlink(mine, task.log)
    out = run_task(task.as_dict())
    assert out.status is RunStatus.FAILED and "symbolic link" in out.error and out.attempts == 0
    assert mine.read_text() == "mine\n" and not Path(task.folder).exists()


def _board_runs(study: Path) -> set[str]:
    manifest = json.loads((study / "leaderboard" / "build_manifest.json").read_text())
    return {Path(r["path"]).parent.name for r in manifest["runs"] + manifest["superseded"]}


def test_after_a_plan_changes_the_study_leaderboard_never_shows_the_earlier_plans_runs(tmp_path, counting_plugin):
    study = tmp_path / "study"
    v1 = _plan(tmp_path, "v1.toml", {"a": "counting:dim=8", "b": "counting:dim=12"})
    first = sweep(v1, study, executor="inline", stream=io.StringIO())
    assert first.ok and _board_runs(study) == {t.run_id for t in first.tasks} and len(first.tasks) == 2

    v2 = _plan(tmp_path, "v2.toml", {"a": "counting:dim=8", "b": "counting:dim=12"},
               '[conditions]\nclean = {}\ntypos = { perturb = ["char-swap"] }')
    out = io.StringIO()
    second = sweep(v2, study, executor="inline", stream=out, leaderboard=False)
    assert second.ok and len(second.tasks) == 4
    assert not (study / "leaderboard").exists()  # the earlier plan's board is not left as this plan's
    assert "leaderboard of an earlier plan was removed" in out.getvalue()

    out = io.StringIO()
    third = sweep(v2, study, executor="inline", stream=out)
    assert third.ok and _board_runs(study) == {t.run_id for t in third.tasks}  # all 4 of the plan's runs
    assert "4 of the plan's 4 run(s) finished and are on it" in out.getvalue()
    assert "the values of 2 of them come from later runs of the plan" in out.getvalue()  # the clean-only runs


def test_the_summary_says_exactly_how_many_runs_are_finished_and_how_many_in_conflict(tmp_path, counting_plugin):
    study = tmp_path / "study"
    plan = _plan(tmp_path, "plan.toml", {"a": "counting:dim=8", "b": "counting:dim=12"})
    assert sweep(plan, study, executor="inline", stream=io.StringIO()).ok
    out = io.StringIO()
    again = sweep(plan, study, executor="inline", stream=out)
    assert again.ok and "2 run(s): 2 already finished, 0 to run with --executor inline" in out.getvalue()
    assert "conflict" not in out.getvalue()  # none is in conflict: no word of it

    other = _plan(tmp_path, "other.toml", {"a": "counting:dim=8", "c": "counting:dim=16"})
    a, c = expand(read_plan(other), study)
    assert a.run_id in {t.run_id for t in again.tasks}
    shutil.copytree(next(t.folder for t in again.tasks if t.run_id.startswith("b--")), c.folder)  # another run there
    out = io.StringIO()
    mixed = sweep(other, study, executor="inline", stream=out)
    text = out.getvalue()
    assert not mixed.ok and mixed.outcomes[c.run_id].status is RunStatus.CONFLICT
    assert "2 run(s): 1 already finished, 1 in conflict (not run: their folders hold other finished runs), 0 to run" \
        in text
    assert "1 already finished (skipped), 0 failed, 1 in conflict (not run)" in text
    assert f"CONFLICT {c.run_id} after 0 attempt(s)" in text and f"remove {c.folder}" in text
