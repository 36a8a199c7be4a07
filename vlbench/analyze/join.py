"""Join a finished run's per-query changes to its captions' granularity features.

One row per (condition, query) of a run: the query's values under the condition and under clean (from
``per_query.csv.gz``, paired by the query key), their change, and the granularity features of the query's
caption (t2i: the caption that is the query; i2t: the mean over the image's captions), computed from the
run's dataset, loaded again and checked against the run's content hash. The outcome columns:

* ``rsum_change``: the query's RSUM under the condition minus under clean (the per-query sum of R@k over
  the run's cut-offs; negative = the condition hurt);
* ``rank_change``: the first positive's rank under the condition minus under clean (positive = worse);
* ``log_rank_ratio``: log2 of the same ranks' ratio (1 = the rank doubled), less dominated by a few
  queries that fall far;
* ``flip@k``: 1 when the query found a positive in its top k under clean and not under the condition, 0 when
  it found one under both, empty when it found none under clean (a miss cannot flip to a miss);
* ``probe_miss`` (a meaning-changing probe scored pairwise, ``--probes``): 1 when the caption's probe scored at
  or above the caption itself with its image (the model did not notice the change of meaning; a tie is a miss), 0
  when the original won, empty where the probe did not apply.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import VlbenchError
from ..granularity.features import FEATURES, caption_features
from ..runfolder import RESULTS, read_results
from ..runread import load_run, load_run_dataset
from ..util.sentences import count_sentences

OUTCOMES = ("rsum_change", "rank_change", "log_rank_ratio", "probe_miss")
#: a pairwise probe's per-query column (vlbench/pipeline/sensitivity: 100 = the original scored above its probe)
PROBE_COLUMN = "probe_accuracy"


def caption_table(ds, profile: str | None):
    """Per caption of the dataset: its Table 5.1 features (the granularity profile's readings) and sentences."""
    feats = caption_features(ds.captions, profile=profile)
    out = feats[list(FEATURES)].copy()
    out["sentences"] = [count_sentences(t) for t in ds.captions]
    return out


def _query_maps(ds) -> tuple[dict, dict]:
    """query id -> caption index (t2i) and -> image index (i2t)."""
    return ({cid: j for j, cid in enumerate(ds.caption_ids)}, {name: i for i, name in enumerate(ds.images)})


def _changes(clean, cond, ks: list[int]) -> dict:
    """Per-query outcome columns of a condition against clean, both in the same query order."""
    out = {"clean_rsum": clean.columns["rsum"], "rsum": cond.columns["rsum"],
           "clean_rank": clean.columns["best_rank"], "rank": cond.columns["best_rank"]}
    out["rsum_change"] = out["rsum"] - out["clean_rsum"]
    out["rank_change"] = out["rank"] - out["clean_rank"]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["log_rank_ratio"] = np.log2(out["rank"] / out["clean_rank"])
    for k in ks:
        col = f"recall@{k}"
        if col in clean.columns and col in cond.columns:
            hit0, hit1 = clean.columns[col] > 0, cond.columns[col] > 0
            out[f"flip@{k}"] = np.where(hit0, (~hit1).astype(np.float64), np.nan)
    if PROBE_COLUMN in cond.columns:  # a meaning-changing probe scored pairwise: 1 = the model did not notice it
        out["probe_miss"] = 1.0 - cond.columns[PROBE_COLUMN] / 100.0
    return out


def _aligned(clean, cond, run: str, condition: str):
    if cond.keys == clean.keys:
        return cond
    index = {key: i for i, key in enumerate(cond.keys)}
    missing = [key for key in clean.keys if key not in index]
    if missing:
        raise VlbenchError(f"run {run}: condition {condition!r} lacks {len(missing)} of the clean queries "
                           f"(first {missing[0]})", "re-run the model with 'vlbench run'")
    order = np.array([index[key] for key in clean.keys])
    return type(cond)(list(clean.keys), {c: v[order] for c, v in cond.columns.items()})


def join_run(path, *, directions=("t2i",), conditions: set[str] | None = None, profile: str | None = None,
             data_dir=None, dataset: str | None = None):
    """The joined per-query table of one run (a pandas DataFrame) and a short description of the run."""
    import pandas as pd  # lazy: vlbench's command line starts without pandas

    folder = Path(path)
    folder = folder.parent if folder.name == RESULTS else folder
    data = load_run(folder)
    unknown = sorted(conditions - set(data.conditions)) if conditions is not None else []
    if unknown:
        raise VlbenchError(f"run {folder} has no condition {', '.join(map(repr, unknown))} (--conditions); its "
                           f"conditions: {', '.join(data.conditions)}",
                           "pass --conditions with names from that list (clean is the baseline, not a condition)")
    results = read_results(folder)  # bounded: a regular file of at most runfolder.MAX_RESULTS_BYTES
    ds = load_run_dataset(results, dataset=dataset, data_dir=data_dir)
    feats = caption_table(ds, profile)
    cap_of, img_of = _query_maps(ds)
    ks = [int(k) for k in (results.get("settings") or {}).get("k") or (1, 5, 10)]
    metas = results.get("conditions") or {}
    model, dataset_info = results.get("model") or {}, results.get("dataset") or {}
    # the model as the run names it: --model-name, else the full spec (two models of one family differ)
    info = {"folder": str(folder), "run_id": results.get("run_id"), "model": data.record.model.label,
            "model_hash": model.get("hash"), "dataset": dataset_info.get("name"),
            "dataset_hash": dataset_info.get("hash"),
            "images": list(ds.images), "k": ks, "mean_words": float(feats["words_per_caption"].mean())}
    frames = []
    for direction in directions:
        clean = data.tables.get(("clean", direction))
        if clean is None:
            raise VlbenchError(f"run {folder} has no clean {direction} queries", "analyze runs with a clean condition")
        for condition in data.conditions:
            if condition == "clean" or (conditions is not None and condition not in conditions):
                continue
            table = data.tables.get((condition, direction))
            if table is None:
                continue
            cond = _aligned(clean, table, str(folder), condition)
            frame = pd.DataFrame(_changes(clean, cond, ks))
            frame.insert(0, "query_id", [key[2] for key in clean.keys])
            frame.insert(0, "direction", direction)
            frame.insert(0, "family", (metas.get(condition) or {}).get("family") or _kind(metas.get(condition)))
            frame.insert(0, "condition", condition)
            frames.append(_with_features(frame, feats, ds, cap_of, img_of, direction, str(folder)))
    if not frames:
        raise VlbenchError(f"run {folder} has no condition besides clean to analyse",
                           "run with --perturb (or --perturb-images) and analyse that run")
    table = pd.concat(frames, ignore_index=True)
    table.insert(0, "dataset", info["dataset"])
    table.insert(0, "model", info["model"])
    table.insert(0, "run", info["run_id"])
    return table, info


def _kind(meta) -> str:
    meta = meta or {}
    return str(meta.get("kind") or ("caption" if meta.get("perturbation") else "other"))


def _with_features(frame, feats, ds, cap_of, img_of, direction: str, run: str):
    ids = frame["query_id"].tolist()
    if direction == "t2i":
        idx = [cap_of.get(q) for q in ids]
        if any(i is None for i in idx):
            bad = next(q for q, i in zip(ids, idx) if i is None)
            raise VlbenchError(f"run {run}: query {bad!r} is not a caption of its dataset",
                               "pass --dataset/--data-dir naming the run's own captions")
        rows = feats.iloc[idx].reset_index(drop=True)
        frame["image"] = [ds.images[int(ds.caption_to_image[i])] for i in idx]
        frame["text"] = [ds.captions[i] for i in idx]
    else:
        idx = [img_of.get(q) for q in ids]
        means = feats.groupby(np.asarray(ds.caption_to_image)).mean(numeric_only=True)
        rows = means.reindex([i if i is not None else -1 for i in idx]).reset_index(drop=True)
        frame["image"] = ids
        frame["text"] = ""
    for col in rows.columns:
        frame[col] = rows[col].to_numpy()
    return frame


def feature_names(table) -> list[str]:
    return [f for f in (*FEATURES, "sentences") if f in table.columns]
