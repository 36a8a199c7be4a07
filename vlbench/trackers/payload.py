"""What a tracker receives of a finished run: its metric records, its options (flat), its main files."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from ..errors import VlbenchError
from ..results import RunRecord, SchemaTooNew, UnreadableResults
from ..runfolder import RESULTS, TABLE, results_path
from .names import metric_name
from .protocol import Payload

#: the run's files a tracker receives, when the run folder has them
ARTEFACTS = (TABLE, RESULTS)


def metrics_of(rec: RunRecord) -> dict:
    """name -> value of every metric record that has a value (a null in results.json is left out), of every
    bootstrap interval (``..._change``, ``..._change_ci_low``, ``..._change_ci_high``) and of the run's timings."""
    out: dict = {}
    for v in rec.values:
        if v.value is not None and math.isfinite(v.value):
            out[metric_name(v.condition, v.key.direction, v.key.metric, v.key.k)] = float(v.value)
    for iv in rec.intervals:
        base = metric_name(iv.condition, str(iv.get("direction", "both")), f"{iv.get('metric', 'rsum')}_change")
        for part, key in (("", "delta"), ("_ci_low", "ci_low"), ("_ci_high", "ci_high")):
            value = iv.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                out[base + part] = float(value)
    timings = rec.timings or {}
    if isinstance(timings.get("wall_seconds"), (int, float)):
        out["timings/wall_s"] = float(timings["wall_seconds"])
    for stage, t in (timings.get("stages") or {}).items():
        if isinstance(t.get("seconds"), (int, float)):
            out[f"timings/{stage}_s"] = float(t["seconds"])
    return out


def _flat(prefix: str, value, out: dict) -> None:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flat(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(value, (str, int, float, bool)) or value is None:
        out[prefix] = value
    else:
        out[prefix] = json.dumps(value, sort_keys=True, default=str)


def config_of(rec: RunRecord) -> dict:
    """The run's options and settings, flat (``settings.protocol``, ``settings.options.batch_size``): the
    model spec and hash, the dataset name and hash, the run id, the vlbench and metric versions, the
    conditions and every setting of results.json."""
    out: dict = {"run_id": rec.run_id, "model": rec.model.spec, "model_hash": rec.model.hash,
                 "model_label": rec.model.label, "dataset": rec.dataset.name, "dataset_hash": rec.dataset.hash,
                 "vlbench_version": rec.vlbench_version, "metric_version": rec.metric_version,
                 "conditions": ",".join(rec.condition_names())}
    _flat("settings", rec.settings, out)
    return out


def files_of(folder: Path | None) -> tuple:
    """The run's main files (table.md, results.json) and every PNG in it or its ``leaderboard`` folder."""
    if folder is None or not Path(folder).is_dir():
        return ()
    folder = Path(folder)
    found = [folder / n for n in ARTEFACTS if (folder / n).is_file()]
    for sub in (folder, folder / "leaderboard"):
        if sub.is_dir():
            found += sorted(p for p in sub.glob("*.png") if p.is_file())
    return tuple(found)


def _load(folder: Path) -> RunRecord:
    """The record of run folder ``folder``; a folder without a (readable) run is a VlbenchError naming it."""
    if not folder.is_dir():
        raise VlbenchError(f"cannot report {folder}: it is not a folder", "pass a run folder written by 'vlbench "
                           "run' (the folder of --out)")
    if not results_path(folder).is_file():
        raise VlbenchError(f"cannot report {folder}: it holds no finished run (no {RESULTS})",
                           "pass the folder of a finished run (its --out); an unfinished run is reported when it "
                           "finishes")
    try:
        return RunRecord.load(results_path(folder))
    except (UnreadableResults, SchemaTooNew) as exc:
        raise VlbenchError(f"cannot report {folder}: its {RESULTS} cannot be read ({exc})",
                           "pass a run folder written by 'vlbench run'") from None


def payload(run, *, step: int | None = None) -> Payload:
    """The Payload of a run folder (its results.json), a RunRecord or a RunResult."""
    folder = None
    if isinstance(run, (str, os.PathLike)):
        folder = Path(run)
        rec = _load(folder)
    elif isinstance(run, RunRecord):
        rec = run
    elif isinstance(getattr(run, "record", None), RunRecord) or isinstance(getattr(run, "results", None), dict):
        rec = run.record or RunRecord.from_json(run.results)
        folder = Path(run.out_dir) if getattr(run, "out_dir", None) else None
    else:
        raise VlbenchError(f"report() takes a run folder, a RunRecord or a RunResult, not {type(run).__name__}",
                           "pass the folder of a finished run (its --out)")
    files = files_of(folder)
    table = next((p for p in files if p.name == TABLE), None)
    return Payload(rec.run_id, config_of(rec), metrics_of(rec), step, files,
                   {"table": table.read_text(encoding="utf-8")} if table else {})
