"""The Ray executor's options: checked with an error naming the option (as --option NAME=VALUE or a key of the
plan's [study.executor.ray]), and turned into each run's Ray resources."""

from __future__ import annotations

import pytest
from support.tools import require_package

from vlbench.errors import OptionError, VlbenchError
from vlbench.sweep.worker import Task


@pytest.mark.parametrize("options, option", [
    ({"num_gpus": -1}, "num_gpus"), ({"num_cpus": "four"}, "num_cpus"), ({"memory_gb": True}, "memory_gb"),
    ({"max_retries": 1.5}, "max_retries"), ({"address": ""}, "address"), ({"address": 6379}, "address"),
    ({"runtime_env": "HF_HOME=/x"}, "runtime_env"), ({"num_gpu": 1}, "num_gpu"),
])
def test_ray_options_are_checked_naming_the_option(options, option):
    from vlbench.sweep.executors.ray import check_options

    with pytest.raises(OptionError) as info:
        check_options(options)
    assert info.value.option == option
    assert info.value.cli_text().startswith("the ray executor") and option in info.value.cli_text()


def test_ray_bad_number_says_how_to_write_it_on_the_command_line_and_in_the_plan():
    from vlbench.sweep.executors.ray import check_options

    with pytest.raises(OptionError) as info:
        check_options({"num_gpus": -1})
    assert "--option num_gpus=1" in info.value.hint and "[study.executor.ray]" in info.value.hint


def test_ray_run_resources_come_from_the_options_else_the_task_needs():
    from vlbench.sweep.executors.ray import check_options, task_resources

    t = Task(run_id="r", folder="/s/runs/r", kwargs={}, needs={"gpus": 1, "cpus": 4, "mem_gb": 2})
    assert task_resources(t, check_options({})) == {"num_cpus": 4, "num_gpus": 1, "memory": 2 * 1024**3}
    assert task_resources(t, check_options({"num_gpus": 0.5, "num_cpus": 2, "memory_gb": 1})) == {
        "num_cpus": 2, "num_gpus": 0.5, "memory": 1024**3}
    bare = Task(run_id="r", folder="/s/runs/r", kwargs={})
    assert task_resources(bare, check_options({})) == {"num_cpus": 1, "num_gpus": 0}


def test_ray_without_a_cluster_says_how_to_start_one(tmp_path, monkeypatch):
    require_package("ray")
    from vlbench.sweep.executors.ray import execute

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "ray"))  # where "auto" looks for this machine's cluster: none
    with pytest.raises(VlbenchError, match="ray start --head"):
        execute([Task(run_id="r", folder=str(tmp_path / "r"), kwargs={})], {"address": "auto"}, None)


DEAD_ADDRESS = """
import socket, sys, time
from vlbench.errors import VlbenchError
from vlbench.sweep.executors.ray import execute
from vlbench.sweep.worker import Task
t0 = time.monotonic()
try:
    execute([Task(run_id="r", folder=sys.argv[1], kwargs={})], {"address": sys.argv[2], "connect_timeout_s": 3}, None)
except VlbenchError as exc:
    print(f"{time.monotonic() - t0:.1f}")
    print(exc)
    sys.exit(0)
print("no error")
sys.exit(1)
"""


@pytest.mark.slow  # starts Python processes that import Ray
@pytest.mark.parametrize("kind", ["refused", "silent"])
def test_ray_with_a_dead_address_stops_within_its_bound_naming_the_address_and_the_fix(kind, tmp_path):
    """A head that refuses the connection (nothing listens) or accepts it and never answers (a stopped head):
    an error naming the address, within connect_timeout_s (it waited without limit and without a word)."""
    import importlib.util
    import os
    import socket
    import subprocess
    import sys

    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray (the extra vlbench[ray]) is not installed")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    port = server.getsockname()[1]
    if kind == "silent":
        server.listen(16)  # accepts, never speaks
    else:
        server.close()
    env = dict(os.environ, RAY_TMPDIR=str(tmp_path / "ray"))
    env.pop("RAY_ADDRESS", None)
    try:
        got = subprocess.run([sys.executable, "-c", DEAD_ADDRESS, str(tmp_path / "r"), f"127.0.0.1:{port}"],
                             capture_output=True, text=True, env=env, timeout=120)
    finally:
        server.close()
    assert got.returncode == 0, got.stdout + got.stderr
    seconds, message = got.stdout.split("\n", 1)
    assert float(seconds) < 30
    assert f"could not reach a Ray cluster at address '127.0.0.1:{port}'" in message
    assert "ray start --head" in message and "connect_timeout_s" in message
    assert ("does not answer" if kind == "refused" else "within connect_timeout_s=3 s") in message
