"""``check_tracker``: a tracker (``--report-to NAME``; vlbench/trackers/protocol.py) against its contract.

``prepare`` is called twice without a run and must print nothing; ``send`` gets a sample payload (the metric
records of a small synthetic run, its options, its results.json as a file, its table as text) and must return one
line saying where the run went, leave the payload as it was, and take a second run (another name, step 1). The
check runs with the working directory in a scratch folder (a tracker that writes relative to it writes there);
``settings`` are the tracker's own keyword arguments (e.g. ``{"log_dir": ...}``), given to both calls.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import tempfile
from pathlib import Path

from .. import registry
from ..results import RunRecord
from ..runfolder import RESULTS
from ..trackers.payload import config_of, metrics_of
from ..trackers.protocol import Payload
from .common import Checker, Report, short
from .exporter import sample_run

PROJECT = "vlbench-check"


def _resolve(tracker) -> tuple[str, object]:
    if isinstance(tracker, str):
        return tracker, registry.trackers.get(tracker)
    return type(tracker).__name__, tracker


def check_tracker(tracker, settings: dict | None = None) -> Report:
    """Check a tracker (a registered name or the object). Returns a Report; raises ConformanceError naming the
    first broken clause."""
    name, obj = _resolve(tracker)
    kw = dict(settings or {})
    c = Checker("tracker", name)
    with c.check("protocol"):
        desc = getattr(obj, "description", None)
        c.expect(isinstance(desc, str) and bool(desc.strip()) and "\n" not in desc,
                 "description: one non-empty line", short(desc))
        for method in ("prepare", "send"):
            c.expect(callable(getattr(obj, method, None)), f"{method}: a method", short(getattr(obj, method, None)))
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="vlbench-check-tracker-") as tmp:
        os.chdir(tmp)
        try:
            _calls(c, obj, kw, Path(tmp))
        finally:
            os.chdir(here)
    return c.report


def _calls(c: Checker, obj, kw: dict, tmp: Path) -> None:
    with c.check("prepare"):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            obj.prepare(**kw)
            obj.prepare(**kw)  # safe to call again
        c.expect(not printed.getvalue(), "nothing printed (it runs in a background thread while a run computes)",
                 short(printed.getvalue()))
    folder = sample_run(tmp / "run")
    rec = RunRecord.load(folder / RESULTS)
    data = Payload("check-sample", config_of(rec), metrics_of(rec), None, (folder / RESULTS,),
                   {"table": "| metric | value |\n|---|---|\n| clean/t2i/recall@1 | 41.0 |"})
    kept = copy.deepcopy(data)
    for label, payload in (("send", data), ("send again", Payload("check-sample-2", dict(data.config),
                                                                   dict(data.metrics), 1, data.files,
                                                                   dict(data.text)))):
        with c.check(label):
            where = obj.send(payload, PROJECT, **kw)
            c.expect(isinstance(where, str) and bool(where.strip()) and "\n" not in where.strip(),
                     "one line saying where the run went", short(where))
        if label == "send":
            with c.check("payload unchanged"):
                c.expect(data == kept, "the payload as it was sent", "a payload changed by send")
