"""``--executor local``: the runs of a sweep in N worker processes on this machine.

A process pool with the ``spawn`` start method (a fresh interpreter per worker: no torch or CUDA state inherited
from the sweep's process), each worker calling :func:`vlbench.sweep.worker.run_task`. Workers: ``workers`` when
given, else one per visible GPU (``CUDA_VISIBLE_DEVICES``, else ``nvidia-smi -L``), else a few CPU processes
(one per 4 cores, at most 4, at least 1). A GPU worker is pinned to its GPU through ``CUDA_VISIBLE_DEVICES``
before anything imports torch. CPU workers share the cores, but each run still encodes with its own ``threads``
(by default the cores this machine gives the process, as for the run made alone: the numbers of a CPU forward
depend on its thread count, so a sweep's run equals the run made alone), so the workers' threads may outnumber
the cores (``OMP_WAIT_POLICY=PASSIVE`` unless set: waiting threads yield the core). ``OMP_NUM_THREADS`` (cores /
workers unless set) caps only the other libraries' pools (NumPy's BLAS), which change no number (the scoring
does not depend on threads: vlbench/metrics/tiles.py).

A worker that dies (killed, out of memory, a crash in native code) fails only the runs it was running: each is
tried again in a fresh pool while its ``retries`` last (resuming), else reported ``killed`` with the cause (its
attempts and seconds read from its log, as every executor reports a death: vlbench.execution.lost); the runs
not yet started go to the fresh pool. Progress: "started", "stage" (the stage a run entered, from the run's
clock), "done" and "failed" come from the workers through one queue, in the order each worker met them.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as _queue
import shutil
import signal
import subprocess
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from ...errors import OptionError
from ...execution import OnEvent, RunOutcome, RunStatus, log_mark, lost
from ..worker import Task, run_task

OPTIONS = ("workers",)
_STATE: dict = {}  # in a worker process: its event queue


def visible_gpus() -> list[str]:
    """The GPUs this process may use, without importing torch: ``CUDA_VISIBLE_DEVICES`` when set, else the ones
    ``nvidia-smi -L`` lists, else none."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [x.strip() for x in env.split(",") if x.strip() and x.strip() != "-1"]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(x for x in out.splitlines() if x.startswith("GPU "))]


def default_workers(gpus: list[str]) -> int:
    return len(gpus) if gpus else max(1, min(4, (os.cpu_count() or 1) // 4))


def _init(slots, events, threads: int | None) -> None:
    """A worker's start: take a GPU slot (pinning the process to it), set the CPU threads, keep the queue."""
    gpu = slots.get()
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    elif threads:
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    _STATE["events"] = events


def _work(task: dict) -> RunOutcome:
    """One task in a worker: its progress to the sweep's queue, then :func:`run_task`."""
    from ...pipeline import timing  # lazy: the worker imports the pipeline anyway, the sweep's process need not

    events, run_id = _STATE.get("events"), task["run_id"]

    def stage(name: str) -> None:
        if events is not None:
            events.put(("stage", run_id, {"stage": name}))

    if events is not None:
        events.put(("started", run_id, {"pid": os.getpid(), "gpu": os.environ.get("CUDA_VISIBLE_DEVICES")}))
    timing.STAGE_LISTENERS.append(stage)
    try:
        out = run_task(task)
    finally:
        timing.STAGE_LISTENERS.remove(stage)
    if events is not None:  # through the same queue as its "started": the display never counts a run twice
        events.put(("done" if out.ok else "failed", run_id, out.as_dict()))
    return out


def check_options(options: dict) -> dict:
    """The local executor's options (``workers``), checked."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise OptionError(unknown[0], f"{{opt}} is not an option of the local executor (it takes {', '.join(OPTIONS)})",
                          "leave it out, or choose the executor it belongs to (--executor slurm / ray)",
                          flag=unknown[0])
    workers = options.get("workers")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise OptionError("workers", f"{{opt}} must be a positive number of processes, got {workers!r}", example=2,
                          flag="--workers")
    return dict(options)


class LocalExecutor:
    """Worker processes on this machine (module docstring)."""

    def check_options(self, options: dict) -> dict:
        return check_options(options)

    def execute(self, tasks: list[Task], options: dict, on_event: OnEvent) -> list[RunOutcome]:
        return execute(tasks, options, on_event)


def execute(tasks: list[Task], options: dict, on_event: OnEvent) -> list[RunOutcome]:
    """Run every task in a spawn process pool; outcomes in the order of ``tasks``."""
    workers = check_options(options).get("workers")
    if not tasks:
        return []
    gpus = visible_gpus()
    n = min(len(tasks), workers or default_workers(gpus))
    threads = max(1, (os.cpu_count() or 1) // n) if not gpus else None
    ctx = multiprocessing.get_context("spawn")
    # a manager's queue, not a multiprocessing.Queue: a worker killed while writing to a shared pipe would take
    # that pipe's lock with it and stall every later writer; a manager gives each process its own connection
    manager = ctx.Manager()
    events = manager.Queue()
    stop = threading.Event()
    started: dict[str, int | None] = {}  # run id -> the pid of the worker running it

    def pump() -> None:  # the workers' events to on_event, in this process (what is queued when told to stop too)
        while True:
            try:
                kind, rid, info = events.get(timeout=0.2)
            except _queue.Empty:
                if stop.is_set():
                    return
                continue
            except (EOFError, OSError, BrokenPipeError):  # the manager is gone: nothing more will come
                return
            if kind == "started":
                started[rid] = info.get("pid")
            on_event(kind, rid, info)

    reader = threading.Thread(target=pump, name="vlbench-sweep-events", daemon=True)
    reader.start()
    outcomes: dict[str, RunOutcome] = {}
    deaths: dict[str, int] = {}  # run id -> attempts its worker died in
    marks = {t.run_id: log_mark(t) for t in tasks}  # where each log ended before this sweep (its attempts follow)
    todo = list(tasks)
    try:
        while todo:
            todo = _one_pool(ctx, todo, n, gpus, threads, events, outcomes, started, on_event, deaths, marks)
    finally:
        stop.set()
        reader.join(timeout=5)
        manager.shutdown()
    return [outcomes[t.run_id] for t in tasks]


def _dead_pids(pool) -> set | None:
    """The pids of the pool's workers that died by themselves (not the pool's own SIGTERM of the others after a
    death); None when the pool does not say (its process table is private to concurrent.futures)."""
    procs = getattr(pool, "_processes", None)
    if not isinstance(procs, dict):
        return None
    return {p.pid for p in procs.values() if p.exitcode not in (None, 0, -signal.SIGTERM)}


def _one_pool(ctx, todo: list[Task], n: int, gpus: list[str], threads, events, outcomes: dict, started: dict,
              on_event, deaths: dict, marks: dict) -> list[Task]:
    """Run ``todo`` in one pool; the tasks still to run when a worker died (none when the pool ends well)."""
    slots = ctx.Queue()
    for i in range(n):
        slots.put(gpus[i % len(gpus)] if gpus else None)
    pool = ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_init, initargs=(slots, events, threads))
    futures = {pool.submit(_work, t.as_dict()): t for t in todo}
    broken, dead = False, None
    try:
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
            for fut in finished:
                t = futures[fut]
                try:
                    out = fut.result()
                except BrokenProcessPool:
                    if not broken:
                        dead = _dead_pids(pool)
                    broken = True
                    continue
                except Exception as exc:  # noqa: BLE001 -- a task that could not even be sent is one failed run
                    out = lost(t, f"it could not be handed to a worker process ({type(exc).__name__}: {exc})",
                               since=marks[t.run_id], status=RunStatus.FAILED)
                    on_event("failed", t.run_id, out.as_dict())  # (a run's own outcome comes through the events queue)
                outcomes[t.run_id] = out
            if broken:
                break
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        slots.close()
    if not broken:
        return []
    time.sleep(0.5)  # the dead worker's last "started" events, still in the queue's pipe
    return _after_break(todo, outcomes, started, deaths, dead, on_event, marks)


def _after_break(todo: list[Task], outcomes: dict, started: dict, deaths: dict, dead: set | None,
                 on_event, marks: dict) -> list[Task]:
    """After a worker died: each run it was running failed an attempt (retried while its retries last), each run
    the pool stopped because of it runs again, the others were not started; returns the runs for a fresh pool."""
    rest, progressed = [], False
    for t in todo:
        if t.run_id in outcomes:
            progressed = True
            continue
        if t.run_id in started:  # it was running when the pool broke
            progressed = True
            pid = started.pop(t.run_id)
            if dead and pid not in dead and deaths.get(f"{t.run_id} (stopped)", 0) < 3:
                # another worker died and the pool stopped this one: not this run's fault, it runs again
                deaths[f"{t.run_id} (stopped)"] = deaths.get(f"{t.run_id} (stopped)", 0) + 1
                on_event("retry", t.run_id, {"attempt": deaths.get(t.run_id, 0) + 1,
                                             "error": "stopped when another worker process died"})
                rest.append(t)
                continue
            deaths[t.run_id] = deaths.get(t.run_id, 0) + 1
            if deaths[t.run_id] <= t.retries:  # tried again in the fresh pool (run_task resumes it)
                on_event("retry", t.run_id, {"attempt": deaths[t.run_id] + 1, "error": "its worker process died"})
                rest.append(t)
                continue
            out = lost(t, "its worker process died (killed, out of memory, or a crash in native code)",
                       since=marks[t.run_id])
            outcomes[t.run_id] = out
            on_event("failed", t.run_id, out.as_dict())
        else:
            rest.append(t)
    if not progressed:  # no worker could start any run (its start fails): each run failed, no new pool
        for t in rest:
            outcomes[t.run_id] = out = lost(t, "no worker process could start a run (the pool broke at once)",
                                            since=marks[t.run_id])
            on_event("failed", t.run_id, out.as_dict())
        return []
    return rest
