"""A study as a plan: a grid of runs (models x datasets x conditions x seeds) expanded to runs with deterministic
ids and folders under one study folder, executed by an executor (local processes, Slurm through submitit, Ray).

Every executor runs the same unit of work, :func:`vlbench.sweep.worker.run_task`, on a :class:`~.worker.Task`;
see :mod:`vlbench.sweep.executors` for the contract.
"""

from __future__ import annotations

import importlib

# public name -> module that defines it, imported on first use (importing vlbench.sweep stays cheap)
_EXPORTS = {"sweep": "study", "SweepResult": "study", "read_plan": "plan", "parse_plan": "plan", "Plan": "plan",
            "expand": "plan", "PlanError": "plan", "Suite": "suites", "Task": "worker", "run_task": "worker"}
__all__ = sorted(_EXPORTS)


def __getattr__(name):  # lazy public API (PEP 562), as vlbench's own
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'vlbench.sweep' has no attribute {name!r}")
