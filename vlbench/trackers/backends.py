"""The four built-in trackers (registered in :mod:`vlbench.trackers.builtin`, as a third party's are): each an
object with ``description``, ``prepare`` and ``send`` (:class:`~vlbench.trackers.protocol.Tracker`).

Each imports its library only in ``prepare``/``send``; a missing library is a
:class:`~vlbench.trackers.TrackerError` naming the extra to install from the clone. Where each writes follows the
tracker's own settings (environment variables first), so a user's existing set-up applies:

* wandb: ``WANDB_MODE`` (``offline`` writes files under ``WANDB_DIR``), ``WANDB_PROJECT``, ``WANDB_ENTITY``;
* mlflow: ``MLFLOW_TRACKING_URI`` (or ``tracking_uri=``); a ``file:`` store is allowed for this call even where
  MLflow keeps its file store in maintenance mode;
* tensorboard: event files under ``log_dir=`` or ``$VLBENCH_TENSORBOARD_DIR`` (default ``runs/tensorboard``),
  in ``<project>/<run id>``: the project is one folder name (no separator, no ``..``), so nothing is written
  outside that folder;
* trackio: its local store (``TRACKIO_DIR``, default under ``HF_HOME``).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import time
from pathlib import Path

from .names import mlflow_name
from .protocol import Payload, TrackerError


def _import(tracker: str, module: str, extra: str):
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise TrackerError(f"--report-to {tracker} needs the {module} package ({exc.msg})",
                           f"from the vlbench clone: pip install -e '.[{extra}]'") from None


class WandbTracker:
    description = "Weights & Biases: one W&B run (WANDB_MODE=offline writes files under WANDB_DIR)"

    def prepare(self, **settings) -> None:
        wandb = _import("wandb", "wandb", "wandb")
        wandb.setup()  # starts wandb's service process, which wandb.init otherwise starts

    def send(self, data: Payload, project: str, *, dir: str | None = None, **init_kw) -> str:
        wandb = _import("wandb", "wandb", "wandb")
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
            where = getattr(run, "url", None) or getattr(getattr(run, "settings", None), "sync_dir", None) \
                or f"run {run.id}"
        finally:
            run.finish()
        return f"W&B run {run.id} ({where})"


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


class MlflowTracker:
    description = "MLflow: one run in the experiment named by the project (MLFLOW_TRACKING_URI or tracking_uri=)"

    def prepare(self, **settings) -> None:
        _import("mlflow", "mlflow", "mlflow")
        importlib.import_module("mlflow.entities")

    def send(self, data: Payload, project: str, *, tracking_uri: str | None = None) -> str:
        mlflow = _import("mlflow", "mlflow", "mlflow")
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
            store = client.tracking_uri
        return f"MLflow run {rid} in experiment {project!r} at {store}"


def folder_name(value: str, what: str) -> str:
    """``value`` as one folder name under the TensorBoard folder: a name with a path separator, ``..``, or that is
    empty or absolute would write elsewhere, so it is refused (TrackerError naming it)."""
    bad = (not value or value in (".", "..") or ".." in value or "/" in value or "\\" in value
           or os.sep in value or (os.altsep or "/") in value or os.path.isabs(value) or "\0" in value)
    if bad:
        raise TrackerError(f"--report-to tensorboard: the {what} {value!r} is not one folder name (a path "
                           "separator, '..' or an absolute path would write outside the TensorBoard folder)",
                           "name the project with letters, digits, '-', '_' and '.' (VLBENCH_TRACKER_PROJECT or "
                           "project=); choose the TensorBoard folder with log_dir= or VLBENCH_TENSORBOARD_DIR")
    return value


class TensorBoardTracker:
    description = "TensorBoard: event files under VLBENCH_TENSORBOARD_DIR (default runs/tensorboard)/PROJECT/RUN"

    def prepare(self, **settings) -> None:
        _import("tensorboard", "tensorboard", "tensorboard")
        importlib.import_module("torch.utils.tensorboard")

    def send(self, data: Payload, project: str, *, log_dir: str | None = None) -> str:
        _import("tensorboard", "tensorboard", "tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        root = Path(log_dir or os.environ.get("VLBENCH_TENSORBOARD_DIR") or Path("runs") / "tensorboard")
        run = re.sub(r"[:/\\]", "-", data.name)
        target = root / folder_name(project, "project") / folder_name(run, "run name")
        if not target.resolve().is_relative_to(root.resolve()):  # a link inside the TensorBoard folder
            raise TrackerError(f"--report-to tensorboard: {target} leads outside the TensorBoard folder {root}",
                               "remove the link, or choose another folder with VLBENCH_TENSORBOARD_DIR")
        writer = SummaryWriter(log_dir=str(target))
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
                        writer.add_image(f"files/{f.stem}", np.asarray(im.convert("RGB")), step,
                                         dataformats="HWC")
        finally:
            writer.close()
        return f"TensorBoard events in {target} (tensorboard --logdir {root})"


class TrackioTracker:
    description = "trackio: one run in its local store (TRACKIO_DIR, default under HF_HOME)"

    def prepare(self, **settings) -> None:
        _import("trackio", "trackio", "trackio")

    def send(self, data: Payload, project: str, **init_kw) -> str:
        trackio = _import("trackio", "trackio", "trackio")
        trackio.init(project=project, name=data.name, config=data.config, embed=False, **init_kw)
        try:
            trackio.log(dict(data.metrics), step=data.step)
        finally:
            trackio.finish()  # the module's finish: run.finish() leaves the run current, finished again at exit
        store = os.environ.get("TRACKIO_DIR") or "trackio's store under HF_HOME"
        return f"trackio run {data.name} in project {project!r} ({store}; trackio show --project {project!r})"


WANDB = WandbTracker()
MLFLOW = MlflowTracker()
TENSORBOARD = TensorBoardTracker()
TRACKIO = TrackioTracker()
