"""Synthetic runs: valid results.json files (typed RunRecords with their own results hash) of one model, clean +
caption perturbations + image corruptions, with values that follow a stated formula (see ``synth_run``)."""

from __future__ import annotations

import json
from pathlib import Path

PERTURBATIONS = {"typos": ["char-swap", "missing-char", "extra-char", "nearby-char"],
                 "lexical": ["synonym-noun", "synonym-adjective"],
                 "distraction": ["distraction-true", "distraction-false"],
                 "word-order": ["shuffle-nouns-adjectives", "shuffle-all-words", "shuffle-all-but-nouns-adjectives",
                                "shuffle-within-trigrams", "shuffle-trigrams"]}
CORRUPTIONS = {"noise": ["gaussian_noise", "shot_noise", "impulse_noise"],
               "blur": ["defocus_blur", "glass_blur", "motion_blur", "zoom_blur"],
               "weather": ["snow", "frost", "fog", "brightness"],
               "digital": ["contrast", "elastic_transform", "pixelate", "jpeg_compression"]}


def synth_run(folder: Path, *, model: int = 0, spec: str | None = None, label: str | None = None,
              dataset: str = "custom:mini.jsonl", dataset_hash: str = "d" * 64, perturb=(), corrupt=(),
              severities=(1, 2, 3), geometry=224, protocol: str | None = None, created: str = "2026-11-20T10:00:00",
              run_id: str | None = None, clean_r1: float = 40.0, limit: int | None = None,
              backend: str | None = None) -> Path:
    """Write ``folder/results.json``: clean + caption perturbations + image corruptions of one model.
    Recall@k of a condition = base + 2k (i2t) or base + k (t2i); base = clean_r1 + 2 * model - j / 2 for
    the j-th condition (1-based, clean = 0). Every RSUM and the bootstrap interval (delta +- 1.5) follow.
    ``limit``: written as settings["limit"], as 'vlbench run --limit N' writes it. ``backend``: the image
    corruptions' ``corrupt_backend`` (None: not recorded, as before it was)."""
    from vlbench.results import (Condition, DatasetInfo, Interval, MetricKey, MetricValue, ModelInfo, RunRecord,
                                 records_hash)

    spec = spec or f"clip:model-{model}"
    mhash = f"{model + 1:x}" * 64
    conds = {"clean": Condition("clean", {"perturbation": None})}
    for fam, names in PERTURBATIONS.items():
        for p in perturb:
            if p in names:
                conds[p] = Condition(p, {"perturbation": p, "family": fam, "version": "1", "seed": 0})
    for fam, names in CORRUPTIONS.items():
        for c in corrupt:
            if c in names:
                for s in severities:
                    conds[f"img:{c}:{s}"] = Condition(f"img:{c}:{s}", {
                        "perturbation": f"img:{c}:{s}", "kind": "image", "corruption": c, "severity": s,
                        "family": f"image-{fam}", "corruption_family": fam, "corrupted_at": geometry,
                        **({"corrupt_backend": backend} if backend else {})})
    values, intervals, rsum = [], [], {}
    for j, cond in enumerate(conds):
        base = clean_r1 + 2 * model - j / 2
        for d, step in (("i2t", 2), ("t2i", 1)):
            rs = 0.0
            for k in (1, 5, 10):
                values.append(MetricValue(cond, MetricKey(d, "recall", k), base + step * k))
                rs += base + step * k
            values.append(MetricValue(cond, MetricKey(d, "rsum"), rs))
            rsum[(cond, d)] = rs
        rsum[(cond, "both")] = rsum[(cond, "i2t")] + rsum[(cond, "t2i")]
        values.append(MetricValue(cond, MetricKey("both", "rsum"), rsum[(cond, "both")]))
        if cond != "clean":
            for d in ("i2t", "t2i", "both"):
                delta = rsum[(cond, d)] - rsum[("clean", d)]
                intervals.append(Interval(cond, {"direction": d, "metric": "rsum", "delta": delta,
                                                 "ci_low": delta - 1.5, "ci_high": delta + 1.5, "n_boot": 100}))
    fields = {"spec": spec, "name": spec.split(":")[0], "hash": mhash, **({"label": label} if label else {})}
    settings = {"k": [1, 5, 10], "p": 10, **({"protocol": {"name": protocol}} if protocol else {}),
                **({"limit": limit} if limit is not None else {})}
    rid = run_id or f"run-{folder.name}"
    rec = RunRecord(run_id=rid, created=created, metric_version="1.0", model=ModelInfo(spec, mhash, fields),
                    dataset=DatasetInfo(dataset, dataset_hash, {"name": dataset, "hash": dataset_hash, "n_images": 12,
                                                                "n_captions": 60, "gallery_size": 12}),
                    conditions=conds, values=values, intervals=intervals, settings=settings,
                    vlbench_version="0.1.0")
    rec.other["results_hash"] = records_hash([v.to_json() for v in values])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(rec.to_json(), indent=1))
    return folder


def write_per_query(folder: Path, values: dict, column: str = "rsum") -> Path:
    """``folder/per_query.csv.gz`` as a run writes it: ``values`` {(condition, direction): per-query values};
    query ids are ``<direction><index>`` (the same queries in every condition)."""
    import csv
    import gzip

    path = folder / "per_query.csv.gz"
    with gzip.open(path, "wt", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["condition", "fold", "direction", "query_index", "query_id", column])
        for (cond, d), vals in values.items():
            for i, v in enumerate(vals):
                w.writerow([cond, 0, d, i, f"{d}{i}", v])
    if (folder / "results.json").is_file():  # the run's file hashes cover it, as a run's own would
        import json

        from support.runs import rehash
        from vlbench.util.io import sha256_json

        doc = json.loads((folder / "results.json").read_text())
        for rec in doc["results"]:  # the recorded means are the per-query values' means, as in a real run
            vals = values.get((rec["condition"], rec["direction"]))
            if column == "rsum" and rec["metric"] == "rsum" and vals is not None and len(vals):
                rec["value"] = sum(vals) / len(vals)
        doc["results_hash"] = sha256_json(doc["results"])
        (folder / "results.json").write_text(json.dumps(doc))
        rehash(folder)
    return path
