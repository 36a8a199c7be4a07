"""The sweep's progress display: counts of runs done / running / failed, the running runs' stages (from the run's
own clock, through timing.STAGE_LISTENERS), one line per event in a log and one rewritten line on a terminal."""

from __future__ import annotations

import io

from vlbench.pipeline import timing
from vlbench.sweep.progress import Progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_one_line_per_run_event_with_the_counts():
    out = io.StringIO()
    p = Progress(4, skipped=1, stream=out)
    p.on_event("started", "a", {})
    p.on_event("stage", "a", {"stage": "image_forward"})  # a log shows no stage lines
    p.on_event("started", "b", {})
    p.on_event("done", "a", {})
    p.on_event("failed", "b", {"error": "ModelError: broken", "log": "runs/b.log"})
    lines = out.getvalue().splitlines()
    assert len(lines) == 4
    assert lines[-2].endswith("2/4 done (1 already finished), 1 running, 0 failed")
    assert "b: FAILED (ModelError: broken; log: runs/b.log)" in lines[-1]
    assert lines[-1].endswith("2/4 done (1 already finished), 0 running, 1 failed")


def test_a_terminal_line_shows_each_running_runs_stage():
    out = _Tty()
    p = Progress(2, stream=out)
    p.on_event("started", "a", {})
    p.on_event("stage", "a", {"stage": "text_forward"})
    last = out.getvalue().split("\r")[-1]
    assert "0/2 done" in last and "1 running" in last and "a: text_forward" in last


def test_a_clock_tells_its_listeners_each_stage_it_enters():
    seen: list[str] = []
    timing.STAGE_LISTENERS.append(seen.append)
    try:
        clock = timing.Clock("startup")
        clock.enter("image_forward")
        with clock.stage("scoring"):
            pass
        clock.enter("writing")
    finally:
        timing.STAGE_LISTENERS.remove(seen.append)
    assert seen == ["image_forward", "scoring", "image_forward", "writing"]
