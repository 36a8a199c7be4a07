"""Where a sweep's runs execute. An executor is a function

    execute(tasks: list[Task], options: dict, on_event) -> list[dict]

that runs :func:`vlbench.sweep.worker.run_task` on every ``task.as_dict()`` and returns their outcome dicts in the
order of ``tasks`` (a run that could not be placed at all gets an outcome with status ``failed`` and the error).
``options`` are the executor's own (e.g. Slurm's partition, gpus, time, memory; Ray's address), checked by the
executor with a clear error naming the option; ``on_event(kind, run_id, info)`` reports progress
("started", "done", "failed", "retry") and may be called from another thread.

The study folder and the cache must be on storage every node sees; every write two nodes could make at once is
an atomic rename in one folder (docs/setup.md, "Shared storage and many processes").
"""

from __future__ import annotations

#: executor name -> "module:function", imported only when chosen (submitit and ray are optional extras)
EXECUTORS = {
    "local": "vlbench.sweep.executors.local:execute",
    "inline": "vlbench.sweep.executors.inline:execute",  # in this process, one run after another
    "slurm": "vlbench.sweep.executors.slurm:execute",
    "ray": "vlbench.sweep.executors.ray:execute",
}
