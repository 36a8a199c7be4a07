"""A worker process killed in the middle of a run (SIGKILL, as the out-of-memory killer does). The local executor
tries the run again while its retries last, else reports it killed with the cause; the other runs finish in a
fresh pool. And every executor (local, Slurm through submitit, Ray) reports such a death the same way: one
:class:`vlbench.execution.RunOutcome` with status ``killed``, the attempts and seconds read from the run's log,
the error naming the log."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest
from support.data import write_manifest

from vlbench.execution import RunOutcome, RunStatus
from vlbench.sweep.executors import get_executor
from vlbench.sweep.executors.local import execute
from vlbench.sweep.worker import Task

HEADER = re.compile(r"^== (\S+): attempt \d+ \(pid (\d+),", re.M)  # the line that starts each attempt


def test_a_killed_worker_fails_or_retries_only_its_run(tmp_path, tiny_models):
    data = write_manifest(tmp_path / "data", 6)
    kw = {"dataset": f"custom:{data}", "n_boot": 20, "validity": "off", "num_workers": 0, "quiet": True,
          "cache_dir": str(tmp_path / "cache"), "model": f"clip:{tiny_models('clip', 0)}"}
    tasks = [Task(run_id=name, folder=str(tmp_path / name), kwargs={**kw, "seed": i}, retries=retries,
                  log=str(tmp_path / f"{name}.log"))
             for i, (name, retries) in enumerate((("no-retry", 0), ("one-retry", 1), ("untouched", 0)))]
    pids, killed, events = {}, set(), []

    def on_event(kind, run_id, info):
        events.append((kind, run_id))
        if kind == "started":
            pids[run_id] = info["pid"]
        if kind == "stage" and run_id in ("no-retry", "one-retry") and run_id not in killed:  # under way: kill it
            killed.add(run_id)
            os.kill(pids[run_id], signal.SIGKILL)

    out = {o.run_id: o for o in execute(tasks, {"workers": 1}, on_event)}
    assert out["no-retry"].status is RunStatus.KILLED and "worker process died" in out["no-retry"].error
    assert out["no-retry"].attempts == 1 and out["no-retry"].seconds > 0  # from its log, not made up
    assert not (tmp_path / "no-retry" / "results.json").exists()
    assert out["one-retry"].status == "done" and ("retry", "one-retry") in events
    assert out["untouched"].status == "done"
    for name in ("one-retry", "untouched"):
        assert (tmp_path / name / "results.json").is_file()
    assert Path(out["one-retry"].log).read_text().count("== one-retry:") == 2  # killed once, then finished
    assert killed == {"no-retry", "one-retry"}


def _kill_once_started(log: Path, stop: threading.Event, killed: list) -> None:
    """SIGKILL the process that runs the run, named by the first attempt's line in its log, once under way."""
    while not stop.is_set():
        found = next((m for m in HEADER.finditer(log.read_text()) if m.group(2) != "1"), None)  # (pid 1: before)
        if found:
            time.sleep(1.0)  # vlbench.run under way
            os.kill(int(found.group(2)), signal.SIGKILL)
            killed.append(int(found.group(2)))
            return
        time.sleep(0.05)


EXECUTORS = [("local", {"workers": 1}, None), ("slurm", {"cluster": "local", "time": 10, "poll_s": 0.5}, "submitit"),
             ("ray", {"address": "local", "max_retries": 0, "poll_s": 0.2}, "ray")]


@pytest.mark.parametrize("name,options,package", EXECUTORS, ids=[e[0] for e in EXECUTORS])
def test_every_executor_reports_a_worker_death_the_same_way(name, options, package, tmp_path, tiny_models):
    if package and importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} (the extra of the {name} executor) is not installed")
    data = write_manifest(tmp_path / "data", 6)
    kw = {"dataset": f"custom:{data}", "n_boot": 20, "validity": "off", "num_workers": 0, "quiet": True,
          "cache_dir": str(tmp_path / "cache"), "model": f"clip:{tiny_models('clip', 0)}"}
    task = Task(run_id="victim", folder=str(tmp_path / "runs" / "victim"), kwargs=kw,
                log=str(tmp_path / "runs" / "victim.log"))
    Path(task.log).parent.mkdir(parents=True)
    # an earlier sweep's attempt in the log: not one of this sweep's attempts (the outcome counts 1, not 2)
    Path(task.log).write_text("== victim: attempt 1 (pid 1, 2026-01-01T00:00:00, t=1.000)\nan earlier sweep's try\n")
    stop, killed = threading.Event(), []
    watcher = threading.Thread(target=_kill_once_started, args=(Path(task.log), stop, killed), daemon=True)
    watcher.start()
    try:
        [out] = get_executor(name).execute([task], dict(options), lambda kind, run_id, info: None)
    finally:
        stop.set()
        watcher.join(timeout=5)
    assert killed, "the run's process was never seen in its log"
    assert isinstance(out, RunOutcome)
    assert (out.run_id, out.status, out.attempts, out.folder, out.log) == (
        "victim", RunStatus.KILLED, 1, task.folder, task.log), out
    assert isinstance(out.seconds, float) and 0.5 < out.seconds < 600, out
    assert f"see its log {task.log}" in out.error, out.error
    assert not (Path(task.folder) / "results.json").exists()

