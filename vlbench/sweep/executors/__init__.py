"""Where a sweep's runs execute: executors, a registry kind like models and datasets
(``vlbench.registry.executors``, entry-point group ``vlbench.executors``, listed by ``vlbench ls executors``).

An executor follows the protocol :class:`vlbench.execution.Executor`: ``check_options(options) -> dict`` (its own
options checked, with an :class:`~vlbench.errors.OptionError` naming a bad one, before the first run) and
``execute(tasks, options, on_event) -> list[RunOutcome]`` (every task run through
:func:`vlbench.sweep.worker.run_task`, the outcomes in the order of ``tasks``; a run that fails or dies is an
outcome). ``on_event(kind, run_id, info)`` reports progress ("started", "stage", "done", "failed", "retry") and may
be called from another thread. ``vlbench.testing.check_executor`` checks one.

The built-ins below are registered the same way as a third party's: by name and ``"module:attr"``, imported only
when chosen (submitit and Ray are optional extras). A registered value is an executor object or a class of one
(made with no arguments).

The study folder and the cache must be on storage every node sees; every write two nodes could make at once is
an atomic rename in one folder (docs/setup.md, "Shared storage and many processes").
"""

from __future__ import annotations

from ... import registry
from ...errors import OptionError, UnknownNameError, VlbenchError
from ...execution import Executor

BUILTINS = (
    ("local", "vlbench.sweep.executors.local:LocalExecutor",
     "worker processes on this machine (one per GPU, else one per 4 cores); the default"),
    ("inline", "vlbench.sweep.executors.inline:InlineExecutor",
     "in this process, one run after another (a notebook, a debugger, in-process plug-ins)"),
    ("slurm", "vlbench.sweep.executors.slurm:SlurmExecutor",
     "one Slurm job array through submitit (vlbench[slurm])"),
    ("ray", "vlbench.sweep.executors.ray:RayExecutor", "Ray tasks on a running Ray cluster (vlbench[ray])"),
)
for _name, _target, _description in BUILTINS:
    registry.executors.register(_name, _target, description=_description)


def names() -> list[str]:
    """Every registered executor's name (built-ins and plug-ins)."""
    return registry.executors.names()


def get_executor(name: str) -> Executor:
    """The executor registered as ``name``: an :class:`OptionError` for ``executor`` with "did you mean" when no
    executor has that name, or naming what is missing when it cannot be loaded."""
    try:
        entry = registry.executors.entry(name)
    except UnknownNameError:
        near = registry.close_matches(str(name), names())
        raise OptionError("executor", f"unknown {{opt}} {name!r}",
                          (f"did you mean {' or '.join(near)}? " if near else "")
                          + f"The executors: {', '.join(names())} (vlbench ls executors)", flag="--executor") from None
    try:
        obj = entry.load()
    except ImportError as exc:  # an optional engine that is not installed, or a plug-in's missing module
        raise OptionError("executor", f"{{opt}} {name} is unavailable here: {exc}",
                          "install the package it runs on (submitit for slurm, ray for ray; docs/scale.md), or use "
                          "--executor local", flag="--executor") from None
    except VlbenchError:
        raise
    except Exception as exc:  # noqa: BLE001 -- a broken plug-in fails only the sweep that selects it
        raise OptionError("executor", f"{{opt}} {name} ({entry.source}) failed to load: {type(exc).__name__}: {exc}",
                          "reinstall or fix the package that provides it, or use --executor local",
                          flag="--executor") from None
    if isinstance(obj, type):
        obj = obj()
    if not isinstance(obj, Executor):
        missing = [m for m in ("check_options", "execute") if not callable(getattr(obj, m, None))]
        raise OptionError("executor", f"{{opt}} {name} ({entry.source}) is not an executor: "
                          f"{type(obj).__name__} has no {' and no '.join(missing)} method",
                          "an executor has check_options(options) and execute(tasks, options, on_event) "
                          "(vlbench.execution.Executor; docs/extending.md)", flag="--executor")
    return obj


__all__ = ["BUILTINS", "Executor", "get_executor", "names"]
