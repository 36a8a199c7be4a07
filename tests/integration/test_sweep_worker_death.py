"""The local executor when a worker process is killed in the middle of a run (SIGKILL, as the out-of-memory killer
does): the run is tried again while its retries last, else reported failed with the cause; the other runs
finish in a fresh pool."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from support.data import write_manifest

from vlbench.sweep.executors.local import execute
from vlbench.sweep.worker import Task


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

    out = {o["run_id"]: o for o in execute(tasks, {"workers": 1}, on_event)}
    assert out["no-retry"]["status"] == "failed" and "worker process died" in out["no-retry"]["error"]
    assert not (tmp_path / "no-retry" / "results.json").exists()
    assert out["one-retry"]["status"] == "done" and ("retry", "one-retry") in events
    assert out["untouched"]["status"] == "done"
    for name in ("one-retry", "untouched"):
        assert (tmp_path / name / "results.json").is_file()
    assert Path(out["one-retry"]["log"]).read_text().count("== one-retry:") == 2  # killed once, then finished
    assert killed == {"no-retry", "one-retry"}
