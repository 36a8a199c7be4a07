"""The Slurm executor runs a sweep's tasks as real jobs (submitit's local cluster: one subprocess per job, the
same pickled job files and result collection a Slurm array uses), and its runs equal the same runs made one by
one with vlbench.run."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest
from support import fake_slurm
from support.data import write_manifest
from support.executor_runs import make_tasks, numbers, one_by_one
from support.tools import needs_package

pytestmark = needs_package("submitit", "Slurm through submitit's local cluster")

HEADER = re.compile(r"^== \S+: attempt \d+ \(pid (\d+),", re.M)  # run_task's line at each attempt


def test_slurm_executor_jobs_give_the_numbers_of_runs_made_one_by_one(tiny_models, tmp_path):
    from vlbench.sweep.executors.slurm import execute

    models = {"clip-a": f"clip:{tiny_models('clip', seed=0)}", "clip-b": f"clip:{tiny_models('clip', seed=1)}"}
    tasks = make_tasks(tmp_path / "study", models, {"tiny": write_manifest(tmp_path / "data", 8)},
                       cache=tmp_path / "cache", conditions={"swap": {"perturb": "char-swap"}})
    events = []
    outcomes = execute(tasks, {"cluster": "local", "time": 10, "poll_s": 0.5},
                       lambda kind, run_id, info: events.append((kind, run_id)))
    assert [o.run_id for o in outcomes] == [t.run_id for t in tasks]
    assert all(o.status == "done" for o in outcomes), outcomes
    assert {e for e in events if e[0] == "done"} == {("done", t.run_id) for t in tasks}
    for o in outcomes:  # each job's logs beside the runs, in the study folder
        assert Path(o.extra["job_stderr"]).is_relative_to(tmp_path / "study" / "slurm")
        assert Path(o.extra["job_stderr"]).is_file()
    alone = one_by_one(tasks, tmp_path / "alone")
    for t in tasks:
        assert numbers(t.folder) == alone[t.run_id]


def test_slurm_job_that_fails_is_an_outcome_naming_its_log_and_the_others_finish(tiny_models, tmp_path):
    from vlbench.sweep.executors.slurm import execute

    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    models = {"good": f"clip:{tiny_models('clip', seed=0)}", "broken": f"clip:{broken}"}
    tasks = make_tasks(tmp_path / "study", models, {"tiny": write_manifest(tmp_path / "data", 6)},
                       cache=tmp_path / "cache", conditions={"clean": {}})
    outcomes = execute(tasks, {"cluster": "local", "time": 10, "poll_s": 0.5}, None)
    by_id = {o.run_id: o for o in outcomes}
    assert by_id["good--tiny--clean"].status == "done"
    bad = by_id["broken--tiny--clean"]
    assert bad.status == "failed" and bad.error and Path(bad.log).is_file()
    assert "Traceback" in Path(bad.log).read_text()
    assert json.loads((Path(by_id["good--tiny--clean"].folder) / "results.json").read_text())["results"]


def test_slurm_array_submitted_through_sbatch_runs_and_a_job_whose_node_failed_is_named(tiny_models, tmp_path,
                                                                                        monkeypatch):
    """Slurm's own path (support/fake_slurm.py stands in for sbatch/srun/sacct): ONE array is submitted, its
    script is the one sbatch_script renders, with the user's options; element 1's node fails: its outcome is
    failed, naming the job id and its stderr file, and the other runs finish with the numbers of vlbench.run."""
    from vlbench.sweep.executors.slurm import execute, sbatch_script

    state = fake_slurm.install(tmp_path / "slurm", monkeypatch, node_fail=(1,))
    models = {"clip-a": f"clip:{tiny_models('clip', seed=0)}", "clip-b": f"clip:{tiny_models('clip', seed=1)}",
              "clip-c": f"clip:{tiny_models('clip', seed=2)}"}
    tasks = make_tasks(tmp_path / "study", models, {"tiny": write_manifest(tmp_path / "data", 6)},
                       cache=tmp_path / "cache", conditions={"clean": {}})
    options = {"partition": "gpu", "time": 30, "mem_gb": 8, "array_parallelism": 2, "account": "vislab",
               "poll_s": 0.5}
    outcomes = execute(tasks, options, None)
    scripts = sorted(state.glob("submitted-*.sh"))
    assert len(scripts) == 1  # one job array for the whole sweep
    assert scripts[0].read_text() == sbatch_script(tasks, options)
    assert "#SBATCH --array=0-2%2" in scripts[0].read_text() and "#SBATCH --partition=gpu" in scripts[0].read_text()
    assert [o.run_id for o in outcomes] == [t.run_id for t in tasks]
    lost = outcomes[1]
    assert lost.status == "killed" and lost.extra["job_id"] == "4242_1"
    assert "4242_1" in lost.error and lost.extra["job_stderr"] in lost.error and "NODE FAILURE" in lost.error
    assert Path(lost.extra["job_stderr"]).is_file()
    alone = one_by_one([tasks[0], tasks[2]], tmp_path / "alone")
    for o, t in ((outcomes[0], tasks[0]), (outcomes[2], tasks[2])):
        assert o.status == "done" and o.extra["job_id"].startswith("4242_")
        assert numbers(t.folder) == alone[t.run_id]


@pytest.mark.skipif(importlib.util.find_spec("vlbench.sweep.study") is None,
                    reason="the sweep command (vlbench.sweep.study) is not in this checkout")
def test_slurm_sweep_command_gives_the_numbers_of_runs_made_one_by_one(tiny_models, tmp_path):
    """A plan through `vlbench sweep` (its Python form) with --executor slurm (submitit's local cluster): one
    job per run, the numbers of vlbench.run with the same options; run again, it submits nothing."""
    from vlbench.sweep.study import sweep

    man = write_manifest(tmp_path / "data", 6)
    plan = tmp_path / "plan.toml"
    plan.write_text("\n".join([
        "[options]", "n-boot = 20", "num-workers = 0", 'validity = "off"', "[models]",
        f'a = "clip:{tiny_models("clip", seed=0)}"', "[datasets]", f'six = "custom:{man}"',
        "[conditions]", "clean = {}", 'swap = { perturb = ["char-swap"] }',
        "[study.executor.slurm]", 'cluster = "local"', "poll_s = 0.5"]) + "\n")
    kw = dict(executor="slurm", leaderboard=False, stream=io.StringIO(), cache_dir=str(tmp_path / "cache"))
    first = sweep(plan, tmp_path / "study", **kw)
    assert first.ok and len(first.outcomes) == 2 and all(o.extra["job_id"] for o in first.outcomes.values())
    alone = one_by_one(first.tasks, tmp_path / "alone")
    for t in first.tasks:
        assert numbers(t.folder) == alone[t.run_id]
    jobs = sorted((tmp_path / "study" / "slurm").iterdir())
    again = sweep(plan, tmp_path / "study", **kw)
    assert again.ok and {o.status for o in again.outcomes.values()} == {"skipped"}
    assert sorted((tmp_path / "study" / "slurm").iterdir()) == jobs  # no job submitted


def test_slurm_job_at_its_time_limit_is_requeued_and_its_run_resumes(tiny_models, tmp_path):
    """Slurm signals a job (SIGUSR2) before its time limit ends it; the job is requeued with the same run, which
    resumes and finishes (submitit's local cluster restarts a requeued job as Slurm would). With a 1-minute
    limit every such signal counts as the time limit, the case a plain function is not requeued for."""
    from vlbench.sweep.executors.slurm import execute

    tasks = make_tasks(tmp_path / "study", {"a": f"clip:{tiny_models('clip', seed=0)}"},
                       {"tiny": write_manifest(tmp_path / "data", 6)}, cache=tmp_path / "cache",
                       conditions={"swap": {"perturb": "char-swap"}})
    log, signalled = Path(tasks[0].log), []

    def signal_the_run():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not signalled:
            found = HEADER.findall(log.read_text()) if log.is_file() else []
            if found:
                os.kill(int(found[0]), signal.SIGUSR2)
                signalled.append(int(found[0]))
            time.sleep(0.02)

    watcher = threading.Thread(target=signal_the_run, daemon=True)
    watcher.start()
    [outcome] = execute(tasks, {"cluster": "local", "time": 1, "poll_s": 0.5}, None)
    watcher.join(5)
    assert signalled and outcome.status == "done", outcome
    pids = [int(p) for p in HEADER.findall(log.read_text())]
    assert pids[0] == signalled[0] and len(set(pids)) >= 2  # requeued: the run started again in a new process
    assert numbers(tasks[0].folder) == one_by_one(tasks, tmp_path / "alone")[tasks[0].run_id]
