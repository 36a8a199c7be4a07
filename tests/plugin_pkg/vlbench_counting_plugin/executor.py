"""A worked example of a third-party sweep executor (``vlbench sweep PLAN --executor process-per-run``): each run
in a Python process of its own, one after another. It stands where a lab's own executor would submit a job to its
batch system (LSF's bsub, a Kubernetes Job): here the "job" is a local process. Declared in pyproject.toml::

    [project.entry-points."vlbench.executors"]
    process-per-run = "vlbench_counting_plugin.executor:ProcessPerRun"

It follows vlbench.execution.Executor and passes vlbench.testing.check_executor: options checked before any run
(an OptionError naming a bad one), every run through vlbench.sweep.worker.run_task, one RunOutcome per task in
order, and a process that dies without an outcome reported with vlbench.execution.lost, as vlbench's own
executors report it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from vlbench.errors import OptionError
from vlbench.execution import RunOutcome, log_mark, lost

#: the job: run one task (a JSON file) and write its outcome (a JSON file)
JOB = ("import json, sys\n"
       "from vlbench.sweep.worker import run_task\n"
       "task = json.load(open(sys.argv[1]))\n"
       "json.dump(run_task(task).as_dict(), open(sys.argv[2], 'w'))\n")


class ProcessPerRun:
    """Each run in its own process: options ``python`` (the interpreter; default: this one) and ``timeout_s``."""

    OPTIONS = ("python", "timeout_s")

    def check_options(self, options: dict) -> dict:
        unknown = sorted(set(options) - set(self.OPTIONS))
        if unknown:
            raise OptionError(unknown[0], f"the process-per-run executor has no option {{opt}}; its options: "
                              f"{', '.join(self.OPTIONS)}", flag=unknown[0])
        out = {"python": sys.executable, "timeout_s": None, **options}
        t = out["timeout_s"]
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or t <= 0):
            raise OptionError("timeout_s", f"{{opt}} must be a number of seconds > 0, not {t!r}", flag="timeout_s")
        return out

    def execute(self, tasks, options, on_event):
        opts = self.check_options(options)
        outcomes = []
        for t in tasks:
            mark = log_mark(t)
            with tempfile.TemporaryDirectory(prefix="process-per-run-") as tmp:
                task_file, result_file = os.path.join(tmp, "task.json"), os.path.join(tmp, "outcome.json")
                with open(task_file, "w") as fh:
                    json.dump(t.as_dict(), fh)
                proc = subprocess.Popen([opts["python"], "-c", JOB, task_file, result_file],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                on_event("started", t.run_id, {"pid": proc.pid})
                try:
                    _, err = proc.communicate(timeout=opts["timeout_s"])
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.communicate()
                    err = f"killed after timeout_s={opts['timeout_s']}"
                if os.path.isfile(result_file):
                    with open(result_file) as fh:
                        outcome = RunOutcome.from_dict(json.load(fh))
                else:  # the process ended without an outcome (killed, crashed)
                    last = (err or "").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
                    outcome = lost(t, f"its process ended without an outcome ({last[0][:300]})", since=mark)
            on_event("done" if outcome.ok else "failed", t.run_id, outcome.as_dict())
            outcomes.append(outcome)
        return outcomes
