"""Typed run records with chosen metric values, for the export tests (MTEB files, model cards)."""

from __future__ import annotations

from vlbench.results import Condition, DatasetInfo, MetricKey, MetricValue, ModelInfo, RunRecord


def record(values: dict, *, dataset: str = "custom:mini.jsonl", fields: dict | None = None, settings=None,
           conditions=("clean",)) -> RunRecord:
    """A record with ``values`` {(condition, direction, metric, k): value} (12 images, 60 captions)."""
    info = {"name": dataset, "hash": "d" * 64, "n_images": 12, "n_captions": 60, "gallery": "test", **(fields or {})}
    vals = [MetricValue(c, MetricKey(d, m, k), v) for (c, d, m, k), v in values.items()]
    return RunRecord(run_id="r1", created="2026-11-20T10:00:00+00:00", metric_version="1.2",
                     model=ModelInfo("clip:x", "a" * 64, {"spec": "clip:x", "hash": "a" * 64}),
                     dataset=DatasetInfo(dataset, "d" * 64, info),
                     conditions={c: Condition(c, {"perturbation": None if c == "clean" else c,
                                                  **({} if c == "clean" else {"family": "typos", "seed": 0})})
                                 for c in conditions},
                     values=vals, settings=settings or {"k": [1, 5, 10]}, vlbench_version="0.1.0")
