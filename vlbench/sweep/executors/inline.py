"""``--executor inline``: the runs one after another in this process (a notebook, a debugger, plug-ins
registered in this process only, ``vlbench reproduce``'s default). The same unit of work as every executor,
:func:`vlbench.sweep.worker.run_task`, so a failed run is an outcome and the next one still runs."""

from __future__ import annotations

from ...errors import OptionError
from ..worker import Task, run_task


def execute(tasks: list[Task], options: dict, on_event) -> list[dict]:
    if options:
        name = sorted(options)[0]
        raise OptionError(name, "{opt} is not an option of the inline executor (it takes none)",
                          "leave it out, or choose the executor it belongs to (local, slurm, ray)")
    outcomes = []
    for t in tasks:
        on_event("started", t.run_id, {})
        out = run_task(t.as_dict())
        on_event(out["status"], t.run_id, out)
        outcomes.append(out)
    return outcomes
