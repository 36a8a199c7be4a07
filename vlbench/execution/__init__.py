"""The contract between a sweep and an executor (where the sweep's runs execute: local processes, Slurm, Ray, a
lab's own LSF or Kubernetes executor): what an executor is handed, what it returns, and how it is registered.

* a :class:`Task` is one planned run, plain data (``Task.as_dict()`` travels to any node);
* an :class:`Executor` (a typed protocol) checks its options (:meth:`Executor.check_options`, before the first run
  of a sweep) and runs tasks (:meth:`Executor.execute`), each through :func:`vlbench.sweep.worker.run_task`,
  reporting progress through ``on_event(kind, run_id, info)`` and returning one :class:`RunOutcome` per task, in
  the order of the tasks;
* a :class:`RunOutcome` is the one typed outcome of a run, whichever executor ran it: a :class:`RunStatus`, the
  seconds it ran, the attempts it made, the error and the log. A run whose worker, node or job died without an
  outcome is :data:`RunStatus.KILLED` (:func:`lost`), with its seconds and attempts read from its log, so every
  executor reports a death the same way.

Executors are registered in ``vlbench.registry.executors`` (entry-point group ``vlbench.executors``), the built-ins
the same way as a third party's. This package sits in the foundation (it imports nothing else of vlbench) so that the
conformance check (``vlbench.testing.check_executor``) and the sweep share it.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .outcome import OK_STATUSES, RunOutcome, RunStatus, attempt_header, attempt_starts, log_mark, lost
from .task import OnEvent, Task


@runtime_checkable
class Executor(Protocol):
    """Where a sweep's runs execute. Registered by name in ``vlbench.registry.executors`` (a third party: the
    entry-point group ``vlbench.executors``, the value an object or a class of this protocol); checked by
    ``vlbench.testing.check_executor``."""

    def check_options(self, options: dict) -> dict:
        """The executor's own options (``--option KEY=VALUE``, ``[study.executor.<name>]``) checked, with their
        defaults: an unknown or bad option raises a ``vlbench.errors.OptionError`` naming it. Called before the
        first run of a sweep; nothing runs."""
        ...

    def execute(self, tasks: list[Task], options: dict, on_event: OnEvent) -> list[RunOutcome]:
        """Run every task (``vlbench.sweep.worker.run_task(task.as_dict())`` where it executes) and return their
        outcomes in the order of ``tasks``; a run that fails or dies is an outcome, never an exception (bad
        options are: before anything runs)."""
        ...

__all__ = ["OK_STATUSES", "Executor", "OnEvent", "RunOutcome", "RunStatus", "Task", "attempt_header",
           "attempt_starts", "log_mark", "lost"]
