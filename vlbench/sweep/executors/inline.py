"""``--executor inline``: the runs one after another in this process (a notebook, a debugger, plug-ins
registered in this process only, ``vlbench reproduce``'s default). The same unit of work as every executor,
:func:`vlbench.sweep.worker.run_task`, so a failed run is an outcome and the next one still runs. (A death of this
process is the sweep's own: there is no worker to lose.)"""

from __future__ import annotations

from ...errors import OptionError
from ...execution import OnEvent, RunOutcome
from ..worker import Task, run_task


class InlineExecutor:
    """The runs in this process, in order."""

    def check_options(self, options: dict) -> dict:
        if options:
            name = sorted(options)[0]
            raise OptionError(name, "{opt} is not an option of the inline executor (it takes none)",
                              "leave it out, or choose the executor it belongs to (local, slurm, ray)", flag=name)
        return {}

    def execute(self, tasks: list[Task], options: dict, on_event: OnEvent) -> list[RunOutcome]:
        self.check_options(options)
        outcomes = []
        for t in tasks:
            on_event("started", t.run_id, {})
            out = run_task(t.as_dict())
            on_event("done" if out.ok else "failed", t.run_id, out.as_dict())
            outcomes.append(out)
        return outcomes
