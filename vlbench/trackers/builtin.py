"""The built-in trackers, registered as a third party's are: a lazy ``"module:attr"`` target each (importing this
module imports no tracker library); a third party declares ``[project.entry-points."vlbench.trackers"]``."""

from __future__ import annotations

from ..registry import trackers

trackers.register("wandb", "vlbench.trackers.backends:WANDB",
                  description="Weights & Biases (extra: wandb; WANDB_MODE=offline writes files)")
trackers.register("mlflow", "vlbench.trackers.backends:MLFLOW",
                  description="MLflow, an experiment per project (extra: mlflow; MLFLOW_TRACKING_URI)")
trackers.register("tensorboard", "vlbench.trackers.backends:TENSORBOARD",
                  description="TensorBoard event files (extra: tensorboard; VLBENCH_TENSORBOARD_DIR)")
trackers.register("trackio", "vlbench.trackers.backends:TRACKIO",
                  description="trackio's local store (extra: trackio; TRACKIO_DIR)")
