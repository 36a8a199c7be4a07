"""Worked example of a vlbench exporter plug-in (``vlbench export RUN --format counting-csv --out DIR``): the run's
metric records as one CSV file, ``<run id>.csv`` (condition, direction, metric, k, value).

It needs nothing of vlbench to be defined: an object with ``description``, ``run_kinds`` and ``export(request)``
(vlbench.plugins.exporter.Exporter); ``request.record`` is the run's typed record.
"""

from __future__ import annotations

import csv
import re


class CountingCsv:
    description = "the run's metric records as one CSV file (example plug-in)"
    run_kinds = ("retrieval",)

    def export(self, request) -> list:
        rec = request.record
        path = request.out / (re.sub(r"[^0-9A-Za-z._-]+", "-", rec.run_id) + ".csv")
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["model", "condition", "direction", "metric", "k", "value"])
            for v in rec.values:
                if v.value is not None:
                    w.writerow([request.model_name, v.condition, v.key.direction, v.key.metric,
                                "" if v.key.k is None else v.key.k, repr(float(v.value))])
        request.note(f"note: {len(rec.values)} metric records")
        return [str(path)]


EXPORTER = CountingCsv()
