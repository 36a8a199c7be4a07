"""Worked example of a vlbench tracker plug-in (``vlbench run ... --report-to counting-jsonl``): each run appended
as one JSON line to ``$COUNTING_TRACKER_FILE`` (default ``counting-tracker.jsonl`` in the working directory).

It needs nothing of vlbench to be defined: an object with ``description``, ``prepare`` and ``send``
(vlbench.trackers.protocol.Tracker).
"""

from __future__ import annotations

import json
import os


class CountingJsonl:
    description = "each run as one JSON line in $COUNTING_TRACKER_FILE (example plug-in)"

    def prepare(self, **settings) -> None:
        return None  # nothing to start: a file is opened when a run is sent

    def send(self, payload, project: str, *, path: str | None = None) -> str:
        target = os.path.abspath(path or os.environ.get("COUNTING_TRACKER_FILE") or "counting-tracker.jsonl")
        line = {"project": project, "name": payload.name, "step": payload.step, "config": payload.config,
                "metrics": payload.metrics}
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, sort_keys=True, default=str) + "\n")
        return f"{target} (run {payload.name})"


TRACKER = CountingJsonl()
