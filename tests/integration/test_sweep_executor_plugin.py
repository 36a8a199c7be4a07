"""A third party's executor (tests/plugin_pkg: ``process-per-run``, each run in a process of its own), pip-installed
for real as a package that declares it under the entry-point group ``vlbench.executors``: listed by ``vlbench
ls``, passing ``vlbench.testing.check_executor``, and running ``vlbench sweep PLAN --executor process-per-run`` end
to end with no change to vlbench, with the numbers of the same runs made alone."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.data import write_manifest
from support.executor_runs import numbers

pytestmark = pytest.mark.slow  # pip-installs the plug-in package, runs subprocesses


def _vlbench(env, cwd, *args, timeout=600):
    return subprocess.run([sys.executable, "-m", "vlbench", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=timeout)


def test_a_third_party_executor_runs_a_sweep_end_to_end(plugin_env, tmp_path):
    data = write_manifest(tmp_path / "data", 6)
    plan = tmp_path / "plan.toml"
    plan.write_text(f"""
[options]
n-boot = 20
validity = "off"
num-workers = 0
cache-dir = "{tmp_path / 'cache'}"

[models]
count = "counting:dim=8"

[datasets]
six = "custom:{data}"

[conditions]
clean = {{}}
swap = {{ perturb = ["char-swap"] }}
""")
    ls = _vlbench(plugin_env, tmp_path, "ls", "executors")
    assert ls.returncode == 0, ls.stderr
    line = next(x for x in ls.stdout.splitlines() if "process-per-run" in x)
    assert "[plugin:vlbench-counting-plugin 0.3.0]" in line
    assert all(f" {name} " in ls.stdout for name in ("local", "inline", "slurm", "ray"))  # the built-ins, alike

    typo = _vlbench(plugin_env, tmp_path, "sweep", str(plan), "--out", str(tmp_path / "s"), "--executor",
                    "process-per-rn")
    assert typo.returncode == 2 and "did you mean process-per-run" in typo.stderr, typo.stderr
    assert not (tmp_path / "s").exists()

    study = tmp_path / "study"
    run = _vlbench(plugin_env, tmp_path, "sweep", str(plan), "--out", str(study), "--executor", "process-per-run",
                   "--no-leaderboard")
    assert run.returncode == 0, run.stderr
    outcomes = json.loads((study / "sweep.json").read_text())["outcomes"]
    assert [o["status"] for o in outcomes] == ["done", "done"] and all(o["attempts"] == 1 for o in outcomes)
    pids = {re.search(r"\(pid (\d+),", Path(o["log"]).read_text()).group(1) for o in outcomes}
    assert len(pids) == 2  # each run in a process of its own
    for o in outcomes:  # the numbers of the same run made alone, with the same plug-ins installed
        task = next(t for t in json.loads((study / "plan.json").read_text())["runs"] if t["run_id"] == o["run_id"])
        alone = tmp_path / "alone" / o["run_id"]
        code = "import json, sys, vlbench; vlbench.run(**json.loads(sys.argv[1]))"
        made = subprocess.run([sys.executable, "-c", code, json.dumps({**task["kwargs"], "out": str(alone)})],
                              capture_output=True, text=True, env=plugin_env, cwd=tmp_path, timeout=600)
        assert made.returncode == 0, made.stderr
        assert numbers(o["folder"]) == numbers(alone)

    again = _vlbench(plugin_env, tmp_path, "sweep", str(plan), "--out", str(study), "--executor", "process-per-run",
                     "--no-leaderboard")
    assert again.returncode == 0 and "2 run(s): 2 already finished, 0 to run" in again.stderr, again.stderr

    check = subprocess.run([sys.executable, "-c", "from vlbench.testing import check_executor; "
                            "print(check_executor('process-per-run'))"], capture_output=True, text=True,
                           env=plugin_env, cwd=tmp_path, timeout=600)
    assert check.returncode == 0 and "9 checks passed" in check.stdout, check.stderr
