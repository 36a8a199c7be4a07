"""Experiment trackers: a finished run's options, metric records, timings and main files sent to W&B, MLflow,
TensorBoard or trackio (``vlbench run --report-to wandb,mlflow``; ``vlbench.run(..., report_to=[...])``;
:func:`report` for a run folder or record, e.g. from a sweep; the training Evaluator at each checkpoint).

One tracker run per vlbench run, named by the run id. Metric names are ``<condition>/<direction>/<metric>@<k>``
(``clean/t2i/recall@1``, ``char-swap/both/rsum``), so the trackers group them by condition; a bootstrap interval
adds ``<condition>/<direction>/<metric>_change`` and its ``_ci_low`` and ``_ci_high`` (no name is a
folder of another: MLflow's file store keeps each as a file); timings are
``timings/<stage>_s``. MLflow allows no ``@`` (nor a few other characters) in a name: there ``@`` reads ``_at_``
and any other character it refuses ``_`` (:func:`mlflow_name`). Each tracker is an optional extra, imported
only when asked for (backends.py); docs/training.md says where each writes.
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import OptionError, VlbenchError
from ..results import RunRecord
from ..runfolder import RESULTS, TABLE, results_path

#: tracker name -> the extra that installs it (``pip install 'vlbench[NAME]'``)
TRACKERS = {"wandb": "wandb", "mlflow": "mlflow", "tensorboard": "tensorboard", "trackio": "trackio"}
#: the project (W&B project, MLflow experiment, trackio project) when neither the caller nor the environment
#: (``VLBENCH_TRACKER_PROJECT``) names one
DEFAULT_PROJECT = "vlbench"
#: the run's files a tracker receives, when the run folder has them
ARTEFACTS = (TABLE, RESULTS)


class TrackerError(VlbenchError):
    """A tracker could not be used (its extra is missing, or it refused what it was sent)."""


def parse_report_to(value, option: str = "report_to") -> tuple[str, ...]:
    """``"wandb,mlflow"``, a list of names, ``"none"`` or None -> the tracker names, in order, each once;
    an unknown name raises :class:`~vlbench.errors.OptionError` listing the known ones."""
    if value is None:
        return ()
    if isinstance(value, str):
        names = [x.strip().lower() for x in value.split(",") if x.strip()]
    elif isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value):
        names = [x.strip().lower() for x in value if x.strip()]
    else:
        raise OptionError(option, f"{{opt}} takes tracker names, got {type(value).__name__}",
                          example="wandb,tensorboard")
    if names in (["none"], ["all"]):
        return () if names == ["none"] else tuple(TRACKERS)
    for name in names:
        if name not in TRACKERS:
            raise OptionError(option, f"unknown tracker {name!r} in {{opt}}",
                              f"use one or more of {', '.join(TRACKERS)} (comma-separated), or none",
                              example="wandb,tensorboard")
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True)
class Payload:
    """What one tracker run receives: ``name`` (the run id), ``config`` (flat: option -> value), ``metrics``
    (name -> value), ``step`` (None for a plain run; the training step for the Evaluator), ``files`` (the run's
    main files: table.md, results.json, leaderboard PNGs), ``text`` (name -> Markdown, e.g. the table)."""

    name: str
    config: dict
    metrics: dict
    step: int | None = None
    files: tuple = ()
    text: dict = field(default_factory=dict)


def metric_name(condition: str, direction: str, metric: str, k: int | None = None) -> str:
    """``clean/t2i/recall@1``: the name every tracker shows a metric record under (MLflow: :func:`mlflow_name`)."""
    return f"{condition}/{direction}/{metric}" + ("" if k is None else f"@{k}")


def mlflow_name(name: str) -> str:
    """A metric name MLflow accepts (letters, digits, ``_ - . / :`` and spaces): ``@`` -> ``_at_``, any other
    refused character -> ``_``."""
    return re.sub(r"[^\w\-./: ]", "_", name.replace("@", "_at_"))


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


def payload(run, *, step: int | None = None) -> Payload:
    """The Payload of a run folder (its results.json), a RunRecord or a RunResult."""
    folder = None
    if isinstance(run, (str, os.PathLike)):
        folder = Path(run)
        rec = RunRecord.load(results_path(folder))
    elif isinstance(run, RunRecord):
        rec = run
    elif isinstance(getattr(run, "record", None), RunRecord) or isinstance(getattr(run, "results", None), dict):
        rec = run.record or RunRecord.from_json(run.results)
        folder = Path(run.out_dir) if getattr(run, "out_dir", None) else None
    else:
        raise TypeError(f"report() takes a run folder, a RunRecord or a RunResult, not {type(run).__name__}")
    files = files_of(folder)
    table = next((p for p in files if p.name == TABLE), None)
    return Payload(rec.run_id, config_of(rec), metrics_of(rec), step, files,
                   {"table": table.read_text(encoding="utf-8")} if table else {})


def report(run, report_to, *, project: str | None = None, step: int | None = None, strict: bool = False,
           settings: dict | None = None, log=None) -> dict:
    """Send one finished run (a run folder, a RunRecord or a RunResult) to each tracker of ``report_to``
    (``"wandb,mlflow"`` or a list). Returns tracker -> ``"ok"`` or the error text. A tracker that fails is
    reported as a warning with its cause and the others still run (``strict``: raise instead); the run's own
    files are never touched. ``project``: W&B project / MLflow experiment / trackio project (default
    ``$VLBENCH_TRACKER_PROJECT`` or "vlbench"); ``settings``: per tracker keyword arguments, e.g.
    ``{"tensorboard": {"log_dir": "tb"}, "mlflow": {"tracking_uri": "file:./mlruns"}}``; ``log``: a function
    that receives one line per tracker (``reported to wandb``)."""
    from . import backends  # lazy: each backend imports its tracker package only when asked for

    names = parse_report_to(report_to)
    if not names:
        return {}
    data = payload(run, step=step)
    project = project or os.environ.get("VLBENCH_TRACKER_PROJECT") or DEFAULT_PROJECT
    out = {}
    for name in names:
        try:
            backends.send(name, data, project, **(settings or {}).get(name, {}))
            out[name] = "ok"
            if log is not None:
                log(f"reported to {name}")
        except Exception as exc:  # noqa: BLE001 -- a tracker's failure never loses the run's results
            if strict:
                raise
            out[name] = f"{type(exc).__name__}: {exc}"
            warnings.warn(f"could not report run {data.name} to {name}: {out[name]} (the run's files are "
                          "complete; send them again with vlbench.trackers.report(RUN_FOLDER, "
                          f"{name!r}))", RuntimeWarning, stacklevel=2)
    return out

