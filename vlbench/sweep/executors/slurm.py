"""The Slurm executor: a sweep's runs as ONE Slurm job array, submitted and watched through submitit (the Python
interface labs already use for Slurm; the optional extra ``vlbench[slurm]``).

Each array element runs :func:`vlbench.sweep.worker.run_task` on one task. Options (all optional):

``partition``, ``account``, ``qos``, ``constraint``, ``exclude``
    passed to sbatch as they are (``--partition`` ...).
``gpus``, ``cpus``, ``mem_gb``
    what ONE run gets (``--gpus-per-node``, ``--cpus-per-task``, ``--mem``); by default the most any task's
    ``needs`` asks (every element of an array gets the same), else 0 GPUs, 1 CPU and Slurm's default memory.
``time``
    minutes one run may take (``--time``; default 60). A job at its limit is requeued (``requeue``) and resumes.
``requeue``
    how many times a job that reached its time limit is requeued (default 3; 0: never). Slurm signals the job
    before its end, submitit requeues it with the same run, and the run resumes from its folder and the embedding
    cache; past ``requeue`` times it is a failed outcome. A preempted job is requeued too.
``array_parallelism``
    how many elements run at once (``--array=0-N%P``; default: all).
``job_name``, ``setup`` (shell lines run before the run: ``module load ...``, ``source venv/bin/activate``),
``python`` (the interpreter command on the nodes; default: this one), ``sbatch`` (a table of any other sbatch
option, e.g. ``{"mail-type": "END"}``), ``logs`` (the folder of the job files and logs; default
``slurm`` in the study folder, beside ``runs``), ``cluster`` (``slurm``; ``local`` and
``debug`` run the same jobs as subprocesses of this machine through submitit's own executors: for tests and
for a first try without a cluster), ``poll_s`` (how often the jobs are checked; default 10 s).

A job that ended without an outcome (its node failed, Slurm killed it at its time limit, it ran out of memory)
becomes a ``killed`` outcome naming the job id and its stderr file, its attempts and seconds read from the run's
log as every executor reports a death (vlbench.execution.lost). The study folder, the cache and the logs must
be on storage every node sees (docs/setup.md, "Shared storage and many processes"). Ctrl-C while the sweep
waits cancels the jobs not yet finished (``scancel``), so a rerun never races a job of this one.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vlbench.errors import OptionError, VlbenchError, install_extra
from vlbench.execution import RunOutcome, log_mark, lost
from vlbench.sweep.executors.options import bad_option, number_option
from vlbench.sweep.worker import Task, run_task

#: sbatch options passed through as they are (sbatch's own names)
PASSTHROUGH = ("partition", "account", "qos", "constraint", "exclude")
#: every option this executor reads
OPTIONS = (*PASSTHROUGH, "gpus", "cpus", "mem_gb", "time", "array_parallelism", "job_name", "setup", "python",
           "sbatch", "logs", "cluster", "poll_s", "requeue")
CLUSTERS = ("slurm", "local", "debug")
TEXT_EXAMPLES = {"partition": "gpu", "account": "vislab", "qos": "normal", "constraint": "a100",
                 "exclude": "node17", "job_name": "clip-grid", "python": "/shared/venv/bin/python",
                 "logs": "/shared/studies/grid/slurm"}
DEFAULT_TIME_MIN = 60
DEFAULT_REQUEUE = 3


def _need_submitit():
    try:
        import submitit
    except ImportError:
        raise VlbenchError("the slurm executor needs submitit, which is not installed",
                           f"{install_extra('slurm')} (or pip install submitit)") from None
    return submitit


def _bad(name: str, message: str, example: Any = None):
    return bad_option("slurm", name, message, example)


def _number(options: dict, name: str, **kw) -> Any:
    return number_option("slurm", options, name, **kw)


def check_options(options: dict | None) -> dict:
    """The options, checked (an :class:`OptionError` naming the first bad one) and with their defaults."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise OptionError(unknown[0], f"the slurm executor has no option {{opt}}; its options: {', '.join(OPTIONS)}",
                          'pass any other sbatch option in the table sbatch: sbatch = {"mail-type" = "END"} under '
                          "[study.executor.slurm] in the plan", flag=unknown[0])
    out: dict[str, Any] = {"time": DEFAULT_TIME_MIN, "cluster": "slurm", "poll_s": 10.0, "requeue": DEFAULT_REQUEUE}
    for name in PASSTHROUGH + ("job_name", "python", "logs"):
        if name in options:
            if isinstance(options[name], int) and not isinstance(options[name], bool) and name in PASSTHROUGH:
                options[name] = str(options[name])  # a partition or account named by a number (--option qos=2)
            if not isinstance(options[name], str) or not options[name].strip():
                raise _bad(name, f"the slurm executor's option {{opt}} must be a non-empty text, "
                           f"not {options[name]!r}", TEXT_EXAMPLES[name])
            out[name] = options[name]
    for name, kind, low, strict, example in (("gpus", int, 0, False, 1), ("cpus", int, 1, False, 8),
                                             ("mem_gb", float, 0, True, 32), ("time", int, 1, False, 120),
                                             ("array_parallelism", int, 1, False, 16),
                                             ("poll_s", float, 0, True, 10), ("requeue", int, 0, False, 3)):
        if name in options:
            out[name] = _number(options, name, kind=kind, low=low, strict=strict, example=example)
    if "cluster" in options:
        if options["cluster"] not in CLUSTERS:
            raise _bad("cluster", f"the slurm executor's option {{opt}} must be one of {', '.join(CLUSTERS)}, "
                       f"not {options['cluster']!r}", "slurm")
        out["cluster"] = options["cluster"]
    if "setup" in options:
        setup = options["setup"]
        if isinstance(setup, str):
            setup = [setup]
        if not isinstance(setup, (list, tuple)) or not all(isinstance(s, str) for s in setup):
            raise _bad("setup", "the slurm executor's option {opt} must be a list of shell lines, "
                       f"not {options['setup']!r}", ["source /shared/venv/bin/activate"])
        out["setup"] = list(setup)
    if "sbatch" in options:
        extra = options["sbatch"]
        if not isinstance(extra, dict) or not all(isinstance(k, str) and k.strip() for k in extra):
            raise _bad("sbatch", "the slurm executor's option {opt} must be a table of sbatch options "
                       f"(name -> value), not {extra!r}", {"mail-type": "END"})
        out["sbatch"] = {k.lstrip("-"): v for k, v in extra.items()}
    return out


def _needs(tasks: list[Task], opts: dict) -> dict:
    """gpus / cpus / mem_gb of one array element: the option, else the most any task needs."""
    got = {}
    for name in ("gpus", "cpus", "mem_gb"):
        if name in opts:
            got[name] = opts[name]
        else:
            asked = [t.needs[name] for t in tasks if t.needs.get(name) is not None]
            if asked:
                got[name] = max(asked)
    return got


def log_folder(tasks: list[Task], opts: dict) -> Path:
    """Where the job files and logs go: the ``logs`` option, else ``slurm`` in the study folder (the folder
    that holds the run folders, or the one above it when that is the sweep's ``runs`` folder)."""
    if opts.get("logs"):
        return Path(opts["logs"]).absolute()
    parents = [str(Path(t.folder).absolute().parent) for t in tasks] or [os.getcwd()]
    common = Path(os.path.commonpath(parents))
    return (common.parent if common.name == "runs" else common) / "slurm"


def submitit_parameters(tasks: list[Task], opts: dict) -> dict:
    """The parameters of submitit's AutoExecutor for these tasks and (checked) options."""
    needs = _needs(tasks, opts)
    params: dict[str, Any] = {"timeout_min": opts["time"], "name": opts.get("job_name", "vlbench-sweep"),
                              "nodes": 1, "tasks_per_node": 1}
    if needs.get("gpus"):
        params["gpus_per_node"] = int(needs["gpus"])
    if needs.get("cpus"):
        params["cpus_per_task"] = int(needs["cpus"])
    if needs.get("mem_gb"):
        params["mem_gb"] = needs["mem_gb"]
    for name in PASSTHROUGH:
        if name in opts:
            params[f"slurm_{name}"] = opts[name]
    params["slurm_array_parallelism"] = opts.get("array_parallelism", max(1, len(tasks)))
    if opts.get("setup"):
        params["slurm_setup"] = opts["setup"]
    if opts.get("sbatch"):
        params["slurm_additional_parameters"] = dict(opts["sbatch"])
    return params


def sbatch_script(tasks: list[Task], options: dict | None = None) -> str:
    """The sbatch script of the job array that :func:`execute` would submit for these tasks (rendered by
    submitit's own code; no Slurm needed): for ``--plan-only`` and for checking the options reach sbatch."""
    _need_submitit()
    from submitit.slurm import slurm as sl

    opts = check_options(options)
    params = submitit_parameters(tasks, opts)
    native: dict[str, Any] = {}
    renames: dict[str, Any] = dict(sl.SlurmExecutor._equivalence_dict())
    for key, value in params.items():
        if key.startswith("slurm_"):
            native[key[len("slurm_"):]] = value
        elif key in renames:
            native[renames[key]] = sl._convert_mem(value) if key == "mem_gb" else value
    folder = log_folder(tasks, opts) / "%j"
    python = opts.get("python") or shlex.quote(sys.executable)
    command = " ".join([python, "-u -m submitit.core._submit", shlex.quote(str(folder))])
    return sl._make_sbatch_string(command=command, folder=folder, map_count=max(1, len(tasks)), **native)


class ResumableRun:
    """:func:`run_task` as a job submitit can requeue: when Slurm signals the end of the job's time (or preempts
    it), submitit calls :meth:`checkpoint`, and the same task is requeued (at most ``requeue`` times for time
    limits); the run resumes from its folder and the embedding cache, so a run longer than ``time`` still ends."""

    def __call__(self, task: dict) -> RunOutcome:
        return run_task(task)

    def checkpoint(self, task: dict):
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(self, task)


def _executor(tasks: list[Task], opts: dict):
    submitit = _need_submitit()
    folder = log_folder(tasks, opts) / "%j"
    kwargs: dict[str, Any] = {}
    if opts["cluster"] in ("slurm", "local"):
        kwargs[f"{opts['cluster']}_max_num_timeout"] = opts["requeue"]
    if opts.get("python"):
        kwargs[f"{opts['cluster']}_python"] = opts["python"]
    try:
        ex = submitit.AutoExecutor(folder=folder, cluster=opts["cluster"], **kwargs)
    except RuntimeError as exc:  # no srun on this machine
        raise VlbenchError(f"the slurm executor found no Slurm here ({exc})",
                           "run the sweep on a Slurm login node (where sbatch and srun are), or try it on this "
                           "machine with --option cluster=local") from None
    params: Any = submitit_parameters(tasks, opts)  # submitit types these keywords one by one
    ex.update_parameters(**params)
    return ex


def _died(job, exc: BaseException, task: Task, mark: int) -> RunOutcome:
    """The outcome of a job that ended without one (node failure, time limit, memory): ``killed``, its attempts and
    seconds read from the run's log (vlbench.execution.lost), the job id and its stderr file named."""
    stderr = job.paths.stderr
    tail = ""
    try:
        lines = Path(stderr).read_text(errors="replace").strip().splitlines()
        tail = ("; its last line: " + lines[-1][-300:]) if lines else ""
    except OSError:
        pass
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return lost(task, f"Slurm job {job.job_id} ended without an outcome ({type(exc).__name__}: {first[:300]}); "
                      f"its stderr: {stderr}{tail}", since=mark, job_id=str(job.job_id), job_stderr=str(stderr))


class SlurmExecutor:
    """One Slurm job array through submitit (module docstring)."""

    def check_options(self, options: dict) -> dict:
        return check_options(options)

    def execute(self, tasks: list[Task], options: dict, on_event) -> list[RunOutcome]:
        return execute(tasks, options, on_event)


def execute(tasks: list[Task], options: dict | None, on_event: Callable[[str, str, dict], Any] | None = None
            ) -> list[RunOutcome]:
    """Submit the tasks as one job array, wait for every job, and return the outcomes in the order of ``tasks``."""
    opts = check_options(options)
    tasks = [t if isinstance(t, Task) else Task.from_dict(t) for t in tasks]
    emit = on_event or (lambda kind, run_id, info: None)
    if not tasks:
        return []
    marks = [log_mark(t) for t in tasks]
    ex = _executor(tasks, opts)
    jobs = ex.map_array(ResumableRun(), [t.as_dict() for t in tasks])
    index = {id(job): i for i, job in enumerate(jobs)}
    for job, t in zip(jobs, tasks):
        emit("started", t.run_id, {"job_id": str(job.job_id), "stderr": str(job.paths.stderr)})
    from submitit.helpers import as_completed

    outcomes: list[RunOutcome | None] = [None] * len(tasks)
    try:
        for job in as_completed(jobs, poll_frequency=opts["poll_s"]):
            i = index[id(job)]
            t = tasks[i]
            try:
                outcome = job.result().with_extra(job_id=str(job.job_id), job_stderr=str(job.paths.stderr))
            except Exception as exc:  # noqa: BLE001 -- a job that died is one failed run, not the sweep's end
                outcome = _died(job, exc, t, marks[i])
            outcomes[i] = outcome
            emit("done" if outcome.ok else "failed", t.run_id, outcome.as_dict())
    except KeyboardInterrupt:  # Ctrl-C: the jobs go too, so a rerun never races a job of this one
        for job, got in zip(jobs, outcomes):
            if got is None:
                with contextlib.suppress(Exception):
                    job.cancel(check=False)
        raise
    return [o for o in outcomes if o is not None]
