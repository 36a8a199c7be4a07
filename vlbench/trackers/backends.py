"""One function per tracker: send a :class:`~vlbench.trackers.Payload` as one tracker run.

Each imports its library only when called; a missing library is a :class:`~vlbench.trackers.TrackerError`
naming the extra to install. Where each writes follows the tracker's own settings (environment variables
first), so a user's existing set-up applies:

* wandb: ``WANDB_MODE`` (``offline`` writes files under ``WANDB_DIR``), ``WANDB_PROJECT``, ``WANDB_ENTITY``;
* mlflow: ``MLFLOW_TRACKING_URI`` (or ``tracking_uri=``); a ``file:`` store is allowed for this call even where
  MLflow keeps its file store in maintenance mode;
* tensorboard: event files under ``log_dir=`` or ``$VLBENCH_TENSORBOARD_DIR`` (default ``runs/tensorboard``),
  one sub-folder per run;
* trackio: its local store (``TRACKIO_DIR``, default under ``HF_HOME``).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import time
from collections.abc import Callable
from pathlib import Path

from . import TRACKERS, Payload, TrackerError, mlflow_name


def _import(tracker: str, module: str):
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise TrackerError(f"--report-to {tracker} needs the {module} package ({exc.msg})",
                           f"pip install 'vlbench[{TRACKERS[tracker]}]'") from None


def send(name: str, data: Payload, project: str, **kw) -> None:
    senders: dict[str, Callable[..., None]] = {"wandb": to_wandb, "mlflow": to_mlflow,
                                               "tensorboard": to_tensorboard, "trackio": to_trackio}
    senders[name](data, project, **kw)


def to_wandb(data: Payload, project: str, *, dir: str | None = None, **init_kw) -> None:
    wandb = _import("wandb", "wandb")
    run = wandb.init(project=os.environ.get("WANDB_PROJECT") or project, name=data.name, config=data.config,
                     dir=dir, reinit="create_new", job_type="evaluation", **init_kw)
    try:
        run.log(dict(data.metrics), step=data.step)
        run.summary.update(dict(data.metrics))
        if data.files:
            art = wandb.Artifact(f"vlbench-{data.name}".replace(":", "-")[:128], type="vlbench-run")
            for f in data.files:
                art.add_file(str(f))
            run.log_artifact(art)
    finally:
        run.finish()


@contextlib.contextmanager
def _file_store_allowed(uri: str | None):
    """MLflow refuses a new file store unless MLFLOW_ALLOW_FILE_STORE is set; a user who names one wants it."""
    if not uri or not (uri.startswith("file:") or "://" not in uri) or "MLFLOW_ALLOW_FILE_STORE" in os.environ:
        yield
        return
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    try:
        yield
    finally:
        os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)


def to_mlflow(data: Payload, project: str, *, tracking_uri: str | None = None) -> None:
    mlflow = _import("mlflow", "mlflow")
    from mlflow.entities import Metric, Param

    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    with _file_store_allowed(uri):
        client = mlflow.MlflowClient(uri)
        exp = client.get_experiment_by_name(project)
        exp_id = exp.experiment_id if exp is not None else client.create_experiment(project)
        run = client.create_run(exp_id, run_name=data.name, tags={"vlbench.run_id": data.name})
        rid, status = run.info.run_id, "FAILED"
        try:
            step = data.step or 0
            now = int(time.time() * 1000)
            metrics = [Metric(mlflow_name(k), v, now, step) for k, v in data.metrics.items()]
            params = [Param(mlflow_name(k)[:250], str(v)[:6000]) for k, v in data.config.items()]
            for i in range(0, len(params), 100):  # MLflow takes at most 100 params, 1000 metrics a batch
                client.log_batch(rid, params=params[i:i + 100])
            for i in range(0, len(metrics), 1000):
                client.log_batch(rid, metrics=metrics[i:i + 1000])
            client.set_tag(rid, "vlbench.step", str(step))
            for f in data.files:
                client.log_artifact(rid, str(f))
            status = "FINISHED"
        finally:
            client.set_terminated(rid, status)


def to_tensorboard(data: Payload, project: str, *, log_dir: str | None = None) -> None:
    _import("tensorboard", "tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    root = Path(log_dir or os.environ.get("VLBENCH_TENSORBOARD_DIR") or Path("runs") / "tensorboard")
    writer = SummaryWriter(log_dir=str(root / project / data.name.replace(":", "-")))
    try:
        step = data.step or 0
        for name, value in data.metrics.items():
            writer.add_scalar(name, value, step)
        rows = "\n".join(f"| {k} | {v} |" for k, v in data.config.items())
        writer.add_text("config", "| option | value |\n|---|---|\n" + rows, step)
        for name, text in data.text.items():
            writer.add_text(name, text, step)
        for f in data.files:
            if f.suffix == ".png":
                import numpy as np
                from PIL import Image

                with Image.open(f) as im:
                    writer.add_image(f"files/{f.stem}", np.asarray(im.convert("RGB")), step, dataformats="HWC")
    finally:
        writer.close()


def to_trackio(data: Payload, project: str, **init_kw) -> None:
    trackio = _import("trackio", "trackio")
    run = trackio.init(project=project, name=data.name, config=data.config, embed=False, **init_kw)
    try:
        trackio.log(dict(data.metrics), step=data.step)
    finally:
        run.finish() if hasattr(run, "finish") else trackio.finish()
