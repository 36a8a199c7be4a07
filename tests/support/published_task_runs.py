"""Stand-in choice-task runs for the published task-score check: a valid, sealed results.json of one model on one
task whose per-set scores are set to given numbers (e.g. a shipped entry's, or those minus 3 points), with the
item files' sha256 and the facts (adapter, precision, rule) a real task run records."""

from __future__ import annotations

import json
from pathlib import Path

from vlbench.results import Condition, DatasetInfo, MetricKey, MetricValue, ModelInfo, RunRecord, records_hash, seal

#: the rule a vlbench choice task records (strict comparisons)
STRICT_RULE = ("correct only when the right caption scores strictly above every other candidate (cosine "
               "similarity); a tie is a miss")


def task_run(folder: Path, *, task: str, spec: str, scores: dict, files: dict | str, n_items: dict | None = None,
             adapter: str = "vlbench.openclip", precision: str = "fp32", rule: str = STRICT_RULE) -> Path:
    """Write ``folder/results.json``: ``scores[condition][metric]`` percent values (direction i2t), item files
    ``files`` (subset -> sha256, or one sha256 for a one-file task), ``n_items[condition]`` items per set."""
    values = []
    for cond, by_metric in scores.items():
        for metric, v in by_metric.items():
            extra = {"n": (n_items or {}).get(cond, 100)} if metric == "accuracy" else {}
            values.append(MetricValue(cond, MetricKey("i2t", metric), v, extra))
    ident = {"adapter": adapter, "checkpoint": spec.partition(":")[2], "precision": precision}
    model = {"spec": spec, "name": spec.split(":")[0], "hash": "a" * 64, "identity": ident}
    ds = {"name": task, "hash": "d" * 64, "n_images": 10, "n_items": 10,
          "source": {"annotations": "/data/" + task, "sha256": files, "images": "/images"}}
    conditions = {c: Condition(c, {"task": task, "kind": "choice"}) for c in scores}
    rec = RunRecord(run_id=f"run-{folder.name}", created="2026-11-26T10:00:00", metric_version="1.1",
                    model=ModelInfo(spec, "a" * 64, model), dataset=DatasetInfo(task, ds["hash"], ds),
                    conditions=conditions, values=values,
                    settings={"seed": 0, "precision": precision, "device": "cpu", "batch_size": 8},
                    vlbench_version="0.1.0", other={"task": {"name": task, "kind": "choice", "rule": rule}})
    rec.other["results_hash"] = records_hash([v.to_json() for v in values])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(seal(rec.to_json()), indent=1))
    return folder
