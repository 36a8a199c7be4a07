"""The Ray executor: each run of a sweep a Ray task on a cluster that already runs (``ray start --head`` on one
node, ``ray start --address HEAD:6379`` on the others; or a KubeRay cluster), with the run's GPU, CPU and memory
needs as the task's resources (the optional extra ``vlbench[ray]``).

Options (all optional):

``address``
    the cluster: ``auto`` (default: the cluster this node belongs to, or the one ``RAY_ADDRESS`` names),
    ``HOST:PORT`` of the head, or ``ray://HOST:10001`` (Ray Client); ``local`` starts a private one-node
    Ray on this machine for the sweep alone.
``num_gpus``, ``num_cpus``, ``memory_gb``
    what ONE run asks of a node; by default what the task's ``needs`` says, else 1 CPU, no GPU and no memory
    reservation. Ray places a run only on a node with that much free.
``max_retries``
    how many times a run is started again when its worker process or its node dies (default 3; Ray's own
    retry of system failures). A run whose own code fails is not retried by Ray: the task's ``retries`` decide.
``runtime_env``
    Ray's runtime environment for the tasks (e.g. ``{"env_vars": {"HF_HOME": "/shared/hf"}}``).
``poll_s``
    how often finished runs are collected (default 1 s).
``connect_timeout_s``
    how long the sweep waits to reach the cluster (default 60 s): a ``HOST:PORT`` (or ``ray://HOST:PORT``) that
    does not answer, or a cluster that does not accept the connection in that time, is an error naming the
    address and what to do, never a silent wait.

A run that a dead node interrupted is started again on another node (``max_retries``); one Ray gives up on is
``killed``, its attempts and seconds read from its log as every executor reports a death
(vlbench.execution.lost); it resumes from what it had written (its
results are written with atomic renames, so a half-written run is never taken for a finished one). The study
folder and the cache must be on storage every node sees (docs/setup.md, "Shared storage and many processes").
Ctrl-C while the sweep waits cancels the runs still on the cluster.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from vlbench.errors import OptionError, VlbenchError, install_extra
from vlbench.execution import RunOutcome, log_mark, lost
from vlbench.sweep.executors.options import bad_option, number_option
from vlbench.sweep.worker import Task, run_task

OPTIONS = ("address", "num_gpus", "num_cpus", "memory_gb", "max_retries", "runtime_env", "poll_s",
           "connect_timeout_s")
DEFAULT_RETRIES = 3
DEFAULT_CONNECT_TIMEOUT_S = 60.0


def _need_ray():
    try:
        import ray
    except ImportError:
        raise VlbenchError("the ray executor needs Ray, which is not installed",
                           f"{install_extra('ray')} (or pip install 'ray[default]')") from None
    return ray


def _bad(name: str, message: str, example: Any = None):
    return bad_option("ray", name, message, example)


def _number(options: dict, name: str, **kw) -> Any:
    return number_option("ray", options, name, **kw)


def check_options(options: dict | None) -> dict:
    """The options, checked (an :class:`OptionError` naming the first bad one) and with their defaults."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise OptionError(unknown[0], f"the ray executor has no option {{opt}}; its options: {', '.join(OPTIONS)}",
                          flag=unknown[0])
    out: dict[str, Any] = {"address": "auto", "max_retries": DEFAULT_RETRIES, "poll_s": 1.0,
                           "connect_timeout_s": DEFAULT_CONNECT_TIMEOUT_S}
    if "address" in options:
        a = options["address"]
        if not isinstance(a, str) or not a.strip():
            raise _bad("address", "the ray executor's option {opt} must be auto, local, HOST:PORT or "
                       f"ray://HOST:PORT, not {a!r}", "auto")
        out["address"] = a.strip()
    for name, kind, low, example in (("num_gpus", float, 0, 1), ("num_cpus", float, 0, 4),
                                     ("memory_gb", float, 0, 16), ("max_retries", int, 0, 3),
                                     ("poll_s", float, 0.01, 1), ("connect_timeout_s", float, 0.1, 60)):
        if name in options:
            out[name] = _number(options, name, kind=kind, low=low, example=example)
    if "runtime_env" in options:
        if not isinstance(options["runtime_env"], dict):
            raise _bad("runtime_env", "the ray executor's option {opt} must be a table (Ray's runtime "
                       f"environment), not {options['runtime_env']!r}", {"env_vars": {"HF_HOME": "/shared/hf"}})
        out["runtime_env"] = dict(options["runtime_env"])
    return out


def task_resources(task: Task, opts: dict) -> dict:
    """The Ray resources of one run: the options, else the task's needs, else 1 CPU."""
    needs = task.needs or {}
    res: dict[str, Any] = {"num_cpus": opts.get("num_cpus", needs.get("cpus", 1)),
                           "num_gpus": opts.get("num_gpus", needs.get("gpus", 0))}
    mem = opts.get("memory_gb", needs.get("mem_gb"))
    if mem:
        res["memory"] = int(float(mem) * 1024**3)
    return res


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a ``HOST:PORT`` or ``ray://HOST:PORT`` address; None for ``auto``, ``local`` and others."""
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        port = parts.port
    except ValueError:
        return None
    return (parts.hostname, port) if parts.hostname and port else None


def _cannot_reach(address: str, why: str) -> VlbenchError:
    return VlbenchError(f"the ray executor could not reach a Ray cluster at address {address!r} ({why})",
                        "start one (`ray start --head` on the head node, `ray start --address HEAD:6379` on the "
                        "others) and pass address=auto on a node of it, or address=HEAD:6379 of a head that runs; "
                        "address=local runs on this machine alone; connect_timeout_s=N waits longer")


def _connect(ray, opts: dict) -> bool:
    """Connect to the cluster within ``connect_timeout_s``; True when this call connected (and so disconnects at
    the end)."""
    if ray.is_initialized():
        return False
    address, wait = opts["address"], opts["connect_timeout_s"]
    kwargs: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False}
    if opts.get("runtime_env"):
        kwargs["runtime_env"] = opts["runtime_env"]
    target: str | None = address
    if address == "local":
        target = None
        kwargs["include_dashboard"] = False
    elif address == "auto" and os.environ.get("RAY_ADDRESS"):
        target = os.environ["RAY_ADDRESS"]
    shown = address if target in (None, address) else f"{address} (RAY_ADDRESS={target})"
    where = _host_port(target) if target else None
    if where is not None:  # a head that does not answer is said at once, not after Ray's own long retries
        try:
            socket.create_connection(where, timeout=min(wait, 10.0)).close()
        except OSError as exc:
            raise _cannot_reach(shown, f"{where[0]}:{where[1]} does not answer: {exc.strerror or exc}") from None
    if target is None:  # a private Ray started here: in this thread (the processes Ray starts end with the thread
        # that started them), and nothing to wait for
        try:
            ray.init(address=None, **kwargs)
        except Exception as exc:  # noqa: BLE001 -- whatever Ray raises, the user gets what to do
            raise _cannot_reach(shown, f"{type(exc).__name__}: {str(exc).strip()[:300]}") from None
        return True
    got: dict[str, BaseException] = {}

    def init() -> None:  # connects to a cluster that runs: starts no process
        try:
            ray.init(address=target, **kwargs)
        except BaseException as exc:  # noqa: BLE001 -- whatever Ray raises, the user gets what to do
            got["error"] = exc

    thread = threading.Thread(target=init, name="vlbench-ray-connect", daemon=True)
    thread.start()
    thread.join(wait)
    if thread.is_alive():  # still waiting on the cluster: say so and stop (the daemon thread ends with the process)
        raise _cannot_reach(shown, f"no connection within connect_timeout_s={wait:g} s")
    if "error" in got:
        failure = got["error"]
        first = str(failure).strip().splitlines()[0][:300] if str(failure).strip() else ""
        raise _cannot_reach(shown, f"{type(failure).__name__}: {first}") from None
    return True


def _lost(task: Task, exc: BaseException, opts: dict, mark: int) -> RunOutcome:
    """The outcome of a run Ray gave up on (its node or worker died more often than max_retries)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return lost(task, f"Ray lost the run ({type(exc).__name__}: {first[:300]}) after {opts['max_retries']} retries "
                      "(its worker or node died); rerun the sweep to resume it", since=mark)


class RayExecutor:
    """Ray tasks on a running cluster (module docstring)."""

    def check_options(self, options: dict) -> dict:
        return check_options(options)

    def execute(self, tasks: list[Task], options: dict, on_event) -> list[RunOutcome]:
        return execute(tasks, options, on_event)


def execute(tasks: list[Task], options: dict | None, on_event: Callable[[str, str, dict], Any] | None = None
            ) -> list[RunOutcome]:
    """Run every task as a Ray task on the cluster; the outcomes in the order of ``tasks``."""
    opts = check_options(options)
    tasks = [t if isinstance(t, Task) else Task.from_dict(t) for t in tasks]
    emit = on_event or (lambda kind, run_id, info: None)
    if not tasks:
        return []
    marks = [log_mark(t) for t in tasks]
    ray = _need_ray()
    connected = _connect(ray, opts)
    try:
        remote = ray.remote(run_task)
        refs = []
        for t in tasks:
            ref = remote.options(name=f"vlbench:{t.run_id}", max_retries=opts["max_retries"],
                                 retry_exceptions=False, **task_resources(t, opts)).remote(t.as_dict())
            refs.append(ref)
            emit("started", t.run_id, {"resources": task_resources(t, opts)})
        index = {ref: i for i, ref in enumerate(refs)}
        outcomes: list[RunOutcome | None] = [None] * len(tasks)
        pending = list(refs)
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1, timeout=opts["poll_s"])
                for ref in ready:
                    i = index[ref]
                    try:
                        outcome = ray.get(ref)
                    except Exception as exc:  # noqa: BLE001 -- a lost run is one failed outcome, not the end
                        outcome = _lost(tasks[i], exc, opts, marks[i])
                    outcomes[i] = outcome
                    emit("done" if outcome.ok else "failed", tasks[i].run_id, outcome.as_dict())
        except KeyboardInterrupt:  # Ctrl-C: the runs still on the cluster stop too
            for ref in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            raise
        return [o for o in outcomes if o is not None]
    finally:
        if connected:
            ray.shutdown()
