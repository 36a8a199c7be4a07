"""Experiment trackers: a finished run's options, metric records, timings and main files sent to W&B, MLflow,
TensorBoard, trackio or a third party's tracker (``vlbench run --report-to wandb,mlflow``;
``vlbench.run(..., report_to=[...])``; :func:`report` for a run folder or record, e.g. from a sweep; the training
Evaluator at each checkpoint).

One tracker run per vlbench run, named by the run id. Metric names are ``<condition>/<direction>/<metric>@<k>``
(``clean/t2i/recall@1``, ``char-swap/both/rsum``), so the trackers group them by condition; a bootstrap interval
adds ``<condition>/<direction>/<metric>_change`` and its ``_ci_low`` and ``_ci_high`` (no name is a
folder of another: MLflow's file store keeps each as a file); timings are
``timings/<stage>_s``. MLflow allows no ``@`` (nor a few other characters) in a name: there ``@`` reads ``_at_``
and any other character it refuses ``_`` (:func:`mlflow_name`).

The modules, one job each:

* :mod:`.protocol` -- the plug-in kind: :class:`Tracker` (``description``, ``prepare``, ``send``), the
  :class:`Payload` it receives, :class:`TrackerError`;
* :mod:`.builtin` -- the built-in trackers' registrations in :data:`vlbench.registry.trackers` (lazy targets, as
  a third party's entry points in the group ``vlbench.trackers``);
* :mod:`.backends` -- the four built-in trackers, each importing its library only when used;
* :mod:`.names` -- ``--report-to``'s names, the metric names trackers show;
* :mod:`.payload` -- a run (folder, record, result) as a :class:`Payload`;
* :mod:`.report` -- :func:`start` (trackers' start-up in a background thread while the run computes) and
  :func:`report` (one line per tracker; a failure never loses the run).

docs/training.md says where each tracker writes; docs/extending.md how to add one; ``check_tracker``
(:mod:`vlbench.testing`) checks one.
"""

from __future__ import annotations

from .names import metric_name, mlflow_name, parse_report_to
from .payload import ARTEFACTS, config_of, files_of, metrics_of, payload
from .protocol import DEFAULT_PROJECT, Payload, Tracker, TrackerError
from .report import Started, report, start

__all__ = ["ARTEFACTS", "DEFAULT_PROJECT", "Payload", "Started", "Tracker", "TrackerError", "config_of",
           "files_of", "metric_name", "metrics_of", "mlflow_name", "parse_report_to", "payload", "report", "start"]
