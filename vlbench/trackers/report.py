"""Sending a finished run to the trackers of ``--report-to``: their start-up off the run's critical path, one
line per tracker, a tracker's failure never a loss of the run.

* :func:`start` (the runner calls it when a run with ``--report-to`` starts) calls every tracker's ``prepare`` in
  one background thread, so importing the tracker libraries and starting their services overlaps the run's own
  work; :func:`report` joins it before sending (docs/training.md has the measured start-up times);
* :func:`report` sends the run to each tracker in turn, in the calling thread. A tracker that fails is one line on
  stderr (its cause and how to send the run again), the others still run and the run's files are never touched;
  ``strict`` raises instead. With ``quiet`` a tracker's own console output (wandb's and trackio's banners) is
  silenced; the one line that says where each tracker put the run is printed either way.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping

from .. import registry
from ..errors import VlbenchError
from .names import parse_report_to
from .payload import payload
from .protocol import DEFAULT_PROJECT, settings_for


class Started:
    """Trackers whose ``prepare`` runs in a background thread; :meth:`wait` joins it (seconds per tracker, and
    what a failed ``prepare`` raised: ``send`` is tried all the same)."""

    def __init__(self, names: tuple[str, ...], settings: Mapping | None = None):
        self.names = names
        self.seconds: dict[str, float] = {}
        self.problems: dict[str, str] = {}
        self._settings = settings
        self._thread = threading.Thread(target=self._prepare, name="vlbench-tracker-start", daemon=True)
        self._thread.start()

    def _prepare(self) -> None:
        for name in self.names:
            t0 = time.perf_counter()
            try:
                registry.trackers.get(name).prepare(**settings_for(self._settings, name))
            except BaseException as exc:  # noqa: BLE001 -- send() tries again and reports what it raises
                self.problems[name] = f"{type(exc).__name__}: {exc}"
            self.seconds[name] = time.perf_counter() - t0

    def wait(self) -> None:
        self._thread.join()


def start(report_to, *, settings: Mapping | None = None) -> Started | None:
    """Start the trackers of ``report_to`` (their ``prepare``) in a background thread; None when there are none."""
    names = parse_report_to(report_to)
    return Started(names, settings) if names else None


def _problem(exc: BaseException) -> str:
    """An exception as one line: a VlbenchError's message and fix, anything else its type and first line."""
    if isinstance(exc, VlbenchError):
        text = exc.message + (f" (fix: {exc.hint})" if exc.hint else "")
    else:
        text = f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def _silenced(quiet: bool):
    """The tracker's own console output, when quiet: Python-level stdout and stderr go to a buffer."""
    if not quiet:
        yield
        return
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        yield


def report(run, report_to, *, project: str | None = None, step: int | None = None, strict: bool = False,
           settings: dict | None = None, log: Callable[[str], None] | None = None, quiet: bool = False,
           started: Started | None = None) -> dict:
    """Send one finished run (a run folder, a RunRecord or a RunResult) to each tracker of ``report_to``
    (``"wandb,mlflow"`` or a list). Returns tracker -> ``"ok"`` or the error text. A tracker that fails is one
    line on stderr with its cause (``strict``: raise instead) and the others still run; the run's own files are
    never touched. ``project``: W&B project / MLflow experiment / trackio project / TensorBoard sub-folder
    (default ``$VLBENCH_TRACKER_PROJECT`` or "vlbench"); ``settings``: per tracker keyword arguments, e.g.
    ``{"tensorboard": {"log_dir": "tb"}, "mlflow": {"tracking_uri": "file:./mlruns"}}``; ``log``: a function
    that receives one line per tracker saying where the run went (``reported to tensorboard in 0.4 s:
    runs/tensorboard/vlbench/RUN``); ``quiet``: silence the trackers' own console output; ``started``: what
    :func:`start` returned when the run began."""
    names = parse_report_to(report_to)
    if not names:
        return {}
    data = payload(run, step=step)
    project = project or os.environ.get("VLBENCH_TRACKER_PROJECT") or DEFAULT_PROJECT
    if started is not None:
        started.wait()
    folder = getattr(run, "out_dir", None) or (run if isinstance(run, (str, os.PathLike)) else None)
    out = {}
    for name in names:
        t0 = time.perf_counter()
        try:
            tracker = registry.trackers.get(name)
            with _silenced(quiet):
                where = tracker.send(data, project, **settings_for(settings, name))
            seconds = time.perf_counter() - t0
            out[name] = "ok"
            if log is not None:
                ahead = f", start-up {started.seconds[name]:.1f} s while the run computed" \
                    if started is not None and name in started.seconds else ""
                log(f"reported to {name} in {seconds:.1f} s{ahead}: "
                    f"{' '.join(str(where).split()) or '(no location)'}")
        except Exception as exc:  # noqa: BLE001 -- a tracker's failure never loses the run's results
            if strict:
                raise
            out[name] = _problem(exc)
            again = f"vlbench.trackers.report({str(folder)!r}, {name!r})" if folder else \
                f"vlbench.trackers.report(RUN_FOLDER, {name!r})"
            _say(f"vlbench: could not report run {data.name} to {name}: {out[name]} -- the run's files are "
                 f"complete; send them again with {again}")
    return out
