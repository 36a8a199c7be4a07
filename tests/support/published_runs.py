"""Stand-in runs for the published-numbers check: a valid results.json of one model on a built-in dataset whose
clean Recall@k are set to given numbers (e.g. a published row's, or that row's minus 3 points), with the protocol
facts (recall convention, precision, truncation, preprocessing, lower-casing) a real run records."""

from __future__ import annotations

import json
from pathlib import Path

from vlbench.datasets.specs import SPECS
from vlbench.results import Condition, DatasetInfo, MetricKey, MetricValue, ModelInfo, RunRecord, records_hash, seal


def standin_run(folder: Path, *, spec: str, dataset: str, recall: dict, i2t_recall: str = "hit",
                precision: str = "fp32", truncate_chars: int | None = None, identity: dict | None = None,
                dataset_name: str | None = None, folds: int | None = None, gallery_size: int | None = None,
                label: str | None = None) -> Path:
    """Write ``folder/results.json``: clean only, ``recall[(direction, k)]`` percent values (RSUM follows),
    dataset ``dataset`` identified as the built-in one by its caption file's pinned sha256."""
    spec_rec = next(s for s in SPECS if s.name == dataset)
    n = spec_rec.n_images
    values = []
    for d in ("i2t", "t2i"):
        for k in (1, 5, 10):
            values.append(MetricValue("clean", MetricKey(d, "recall", k), recall[(d, k)]))
        values.append(MetricValue("clean", MetricKey(d, "rsum"), sum(recall[(d, k)] for k in (1, 5, 10))))
    values.append(MetricValue("clean", MetricKey("both", "rsum"), sum(v.value for v in values
                                                                      if v.key.metric == "rsum")))
    ident = identity if identity is not None else {"adapter": "vlbench.openclip", "checkpoint": spec.split(":", 1)[1],
                                                   "context_length": 77, "precision": precision}
    model = {"spec": spec, "name": spec.split(":")[0], "hash": "a" * 64, "identity": ident,
             **({"label": label} if label else {})}
    ds = {"name": dataset_name or dataset, "hash": "d" * 64, "n_images": n, "n_captions": 5 * n, "gallery": "test",
          "gallery_size": gallery_size or n, "folds": folds, "extra_positives": None,
          "source": {"caption_file": spec_rec.captions, "caption_sha256": spec_rec.sha256}}
    protocol = {"name": "standard", "gallery": "test", "i2t_recall": i2t_recall, "truncate_chars": truncate_chars}
    rec = RunRecord(run_id=f"run-{folder.name}", created="2026-11-26T10:00:00", metric_version="1.1",
                    model=ModelInfo(spec, "a" * 64, model), dataset=DatasetInfo(ds["name"], ds["hash"], ds),
                    conditions={"clean": Condition("clean", {"perturbation": None})}, values=values,
                    settings={"k": [1, 5, 10], "p": 10, "protocol": protocol, "precision": precision},
                    vlbench_version="0.1.0",
                    other={"hardware": {"device": "cpu", "precision": precision}})
    rec.other["results_hash"] = records_hash([v.to_json() for v in values])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(seal(rec.to_json()), indent=1))  # sealed as vlbench writes
    return folder


def edit_run(folder: Path, edit, *, reseal: bool = True) -> Path:
    """Edit ``folder/results.json`` with ``edit(doc)``; ``reseal``: recompute its record_hash afterwards (the
    edit is then one only the content checks can see; False: the seal is left as it was)."""
    path = folder / "results.json"
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(seal(doc) if reseal and "record_hash" in doc else doc, indent=1))
    return folder
