"""A sweep through the local executor (spawned worker processes) against the same runs made one by one with
vlbench.run: equal results files (apart from ids, times and hardware); a finished sweep run again runs nothing
and takes seconds; --plan-only tells finished (hashes verified), partial, conflicting and to-do runs apart, with
a cost from the stage times of the runs before; the study's leaderboard holds exactly the plan's runs."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from support.data import write_manifest

from vlbench.cli import main
from vlbench.pipeline.runner import run

#: what differs between two runs of the same options by construction: ids, clocks, the machine, what the cache
#: held (``encoding``: vectors encoded or found, seconds, the cache folder), and the hashes that seal those (the
#: file hashes cover files that name the run id)
NOT_COMPARED = ("run_id", "created", "wall_time_s", "timings", "hardware", "environment", "encoding", "record_hash",
                "files")


@pytest.fixture(scope="module")
def study(tmp_path_factory, tiny_models):
    root = tmp_path_factory.mktemp("sweep")
    d1 = write_manifest(root / "d1", 6)
    d2 = write_manifest(root / "d2", 6, start=6, seed=1)
    plan = root / "plan.toml"
    plan.write_text(f"""
[study]
out = "{root / 'study'}"

[options]
n-boot = 20
validity = "off"
num-workers = 0
cache-dir = "{root / 'cache-sweep'}"

[models]
m0 = "clip:{tiny_models('clip', 0)}"
m1 = "clip:{tiny_models('clip', 1)}"

[datasets]
d1 = "custom:{d1}"
d2 = "custom:{d2}"

[conditions]
clean = {{}}
typos = {{ perturb = ["char-swap"] }}
""")
    t0 = time.monotonic()
    rc = main(["sweep", str(plan), "--workers", "2"])
    seconds = time.monotonic() - t0
    return {"root": root, "plan": plan, "study": root / "study", "rc": rc, "seconds": seconds}


def _plan_runs(study: Path) -> list[dict]:
    return json.loads((study / "plan.json").read_text())["runs"]


def _compared(folder) -> dict:
    doc = json.loads((Path(folder) / "results.json").read_text())
    return {k: v for k, v in doc.items() if k not in NOT_COMPARED}


def test_a_sweep_finishes_every_run_of_the_grid(study):
    assert study["rc"] == 0
    runs = _plan_runs(study["study"])
    assert len(runs) == 2 * 2 * 2
    outcomes = json.loads((study["study"] / "sweep.json").read_text())["outcomes"]
    assert [o["status"] for o in outcomes] == ["done"] * 8
    assert all((Path(r["folder"]) / "results.json").is_file() for r in runs)


def test_sweep_results_equal_the_same_runs_made_one_by_one(study):
    for task in _plan_runs(study["study"]):
        single = study["root"] / "single" / task["run_id"]
        kwargs = {**task["kwargs"], "cache_dir": str(study["root"] / "cache-single")}  # nothing shared with the sweep
        run(out=str(single), **kwargs)
        got, want = _compared(task["folder"]), _compared(single)
        assert got == want, task["run_id"]
        assert got["results_hash"] == want["results_hash"]


def test_rerunning_a_finished_sweep_runs_nothing_and_takes_seconds(study):
    runs = _plan_runs(study["study"])
    before = {r["run_id"]: ((Path(r["folder"]) / "results.json").read_bytes(), Path(r["log"]).read_text())
              for r in runs}
    vectors = sorted(p.stat().st_mtime_ns for p in (study["root"] / "cache-sweep").rglob("*.npz"))
    t0 = time.monotonic()
    assert main(["sweep", str(study["plan"]), "--workers", "2"]) == 0
    seconds = time.monotonic() - t0
    outcomes = json.loads((study["study"] / "sweep.json").read_text())["outcomes"]
    assert [(o["status"], o["attempts"]) for o in outcomes] == [("skipped", 0)] * 8
    for r in runs:  # no run started: no attempt in any log, every record as it was
        assert ((Path(r["folder"]) / "results.json").read_bytes(), Path(r["log"]).read_text()) == before[r["run_id"]]
    assert sorted(p.stat().st_mtime_ns for p in (study["root"] / "cache-sweep").rglob("*.npz")) == vectors
    assert seconds < 30 and seconds < study["seconds"], (seconds, study["seconds"])


def test_the_study_leaderboard_holds_exactly_the_plans_runs(study):
    runs = study["study"] / "runs"
    first = _plan_runs(study["study"])[0]["run_id"]
    shutil.copytree(runs / first, runs / "stray-copy", ignore=shutil.ignore_patterns(".vlbench.lock"))
    try:  # a finished run that is not the plan's, in the study's runs/ folder: never on the study's board
        assert main(["sweep", str(study["plan"])]) == 0
    finally:
        shutil.rmtree(runs / "stray-copy")
    manifest = json.loads((study["study"] / "leaderboard" / "build_manifest.json").read_text())
    taken = {Path(r["path"]).parent.name for r in manifest["runs"]} | {
        Path(r["path"]).parent.name for r in manifest["superseded"]}
    assert taken == {r["run_id"] for r in _plan_runs(study["study"])}
    assert "stray-copy" not in json.dumps(manifest["runs"]) + json.dumps(manifest["superseded"])
    assert any("stray-copy" in x["folder"] for x in manifest["left_out"])  # and the board says why
    listed = [x for x in (study["study"] / "run_set.txt").read_text().splitlines() if x and not x.startswith("#")]
    assert len(listed) == 8


def test_plan_only_tells_finished_partial_conflict_and_todo_apart(study, tmp_path, capsys):
    copy = tmp_path / "copy"
    shutil.copytree(study["study"], copy, ignore=shutil.ignore_patterns(".vlbench.lock"))
    runs = sorted(r["run_id"] for r in _plan_runs(study["study"]))
    partial, conflict, todo = runs[0], runs[1], runs[2]
    (copy / "runs" / partial / "results.json").unlink()  # stopped before its record: it resumes
    (copy / "runs" / conflict / "flips.csv").write_text("edited\n")  # no longer the file its record hashed
    shutil.rmtree(copy / "runs" / todo)
    (copy / "runs" / f"{todo}.log").unlink()
    capsys.readouterr()
    assert main(["sweep", str(study["plan"]), "--plan-only", "--out", str(copy)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.split() and line.split()[0] in runs}
    assert set(rows) == set(runs)
    assert "partial (resumes)" in rows[partial] and "conflict" in rows[conflict] and "flips.csv" in rows[conflict]
    assert " to do " in rows[todo] and "ready" in rows[todo]
    assert sum("finished (hashes verified)" in line for line in rows.values()) == 5
    cost = rows[todo].split()[6:8]  # est. cost: seconds from the sweep's own runs of this model on this machine
    assert cost[1] == "s" and float(cost[0]) >= 0, rows[todo]
    assert "8 run(s): 5 finished, 1 partial, 1 to do, 1 in conflict" in out
    assert not (copy / "runs" / todo).exists()  # --plan-only runs nothing
