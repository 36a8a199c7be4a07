"""The Slurm executor's options: checked with an error naming the option, and carried into the sbatch script of
the one job array it submits (rendered by submitit's own code, no Slurm needed)."""

from __future__ import annotations

import re

import pytest
from support.tools import needs_package

from vlbench.errors import OptionError
from vlbench.sweep.worker import Task

pytestmark = needs_package("submitit")


def _tasks(root, n=5, needs=None):
    return [Task(run_id=f"r{i}", folder=str(root / "study" / "runs" / f"r{i}"), kwargs={}, needs=needs or {})
            for i in range(n)]


def _flags(script: str) -> dict:
    return dict(re.findall(r"^#SBATCH --([\w-]+)(?:=(.*))?$", script, flags=re.M))


def test_sbatch_script_carries_every_option_the_user_gave(tmp_path):
    from vlbench.sweep.executors.slurm import sbatch_script

    script = sbatch_script(_tasks(tmp_path), {
        "partition": "gpu-a100", "gpus": 2, "cpus": 8, "mem_gb": 40, "time": 90, "array_parallelism": 3,
        "account": "vislab", "qos": "high", "constraint": "a100", "job_name": "clip-grid",
        "sbatch": {"mail-type": "END", "--reservation": "eval"}, "setup": ["source /shared/venv/bin/activate"]})
    flags = _flags(script)
    assert flags["partition"] == "gpu-a100" and flags["gpus-per-node"] == "2" and flags["cpus-per-task"] == "8"
    assert flags["mem"] == "40GB" and flags["time"] == "90" and flags["array"] == "0-4%3"
    assert flags["account"] == "vislab" and flags["qos"] == "high" and flags["constraint"] == "a100"
    assert flags["job-name"] == "clip-grid" and flags["mail-type"] == "END" and flags["reservation"] == "eval"
    logs = tmp_path / "study" / "slurm"
    assert flags["output"] == f"{logs}/%A_%a/%A_%a_0_log.out" and flags["error"] == f"{logs}/%A_%a/%A_%a_0_log.err"
    assert "source /shared/venv/bin/activate" in script.split("# setup", 1)[1]
    assert "-m submitit.core._submit" in script


def test_sbatch_script_asks_for_what_the_tasks_need_when_no_option_says(tmp_path):
    from vlbench.sweep.executors.slurm import sbatch_script

    tasks = _tasks(tmp_path, 3, {"gpus": 1, "cpus": 4, "mem_gb": 16.5})
    tasks[1] = Task(run_id="big", folder=tasks[1].folder, kwargs={}, needs={"gpus": 2, "cpus": 2})
    flags = _flags(sbatch_script(tasks, {"logs": str(tmp_path / "elsewhere")}))
    assert flags["gpus-per-node"] == "2" and flags["cpus-per-task"] == "4" and flags["mem"] == "16896MB"
    assert flags["time"] == "60" and flags["array"] == "0-2%3"  # the default time; every element at once
    assert flags["output"].startswith(str(tmp_path / "elsewhere"))


@pytest.mark.parametrize("options, option", [
    ({"gpus": -1}, "gpus"), ({"gpus": 1.5}, "gpus"), ({"cpus": 0}, "cpus"), ({"mem_gb": 0}, "mem_gb"),
    ({"time": "2h"}, "time"), ({"time": True}, "time"), ({"array_parallelism": 0}, "array_parallelism"),
    ({"partition": ""}, "partition"), ({"partition": 3.5}, "partition"), ({"cluster": "pbs"}, "cluster"),
    ({"sbatch": ["--mail-type=END"]}, "sbatch"), ({"setup": [1]}, "setup"), ({"partitoin": "gpu"}, "partitoin"),
])
def test_slurm_options_are_checked_naming_the_option(options, option):
    from vlbench.sweep.executors.slurm import check_options

    with pytest.raises(OptionError) as info:
        check_options(options)
    assert info.value.option == option
    assert info.value.cli_text().startswith("the slurm executor") and option in info.value.cli_text()


def test_slurm_bad_option_says_how_to_write_it_on_the_command_line_and_in_the_plan():
    from vlbench.sweep.executors.slurm import check_options

    with pytest.raises(OptionError) as info:
        check_options({"time": "2h"})
    assert "--option time=120" in info.value.hint and "time = 120 under [study.executor.slurm]" in info.value.hint
    with pytest.raises(OptionError) as info:
        check_options({"sbatch": "mail-type=END"})
    assert 'sbatch = {"mail-type" = "END"} under [study.executor.slurm]' in info.value.hint


def test_slurm_without_slurm_says_how_to_try_it_locally(tmp_path, monkeypatch):
    from vlbench.errors import VlbenchError
    from vlbench.sweep.executors.slurm import execute

    monkeypatch.setenv("PATH", str(tmp_path))  # no srun, no sbatch
    with pytest.raises(VlbenchError, match="--option cluster=local"):
        execute(_tasks(tmp_path, 1), {}, None)


def test_slurm_partition_named_by_a_number_reaches_sbatch_as_written(tmp_path):
    """--option qos=2 arrives as the integer 2 (the command line reads numbers); sbatch gets --qos=2."""
    from vlbench.sweep.executors.slurm import sbatch_script

    flags = _flags(sbatch_script(_tasks(tmp_path, 2), {"qos": 2, "partition": 7}))
    assert flags["qos"] == "2" and flags["partition"] == "7"


def test_slurm_job_is_requeueable_with_the_same_run():
    """submitit requeues a job at its time limit only when its callable has a checkpoint: the run's."""
    from vlbench.sweep.executors.slurm import ResumableRun

    job, task = ResumableRun(), {"run_id": "r", "folder": "/s/runs/r", "kwargs": {}}
    again = job.checkpoint(task)
    assert again.function is job and again.args == (task,) and again.kwargs == {}
