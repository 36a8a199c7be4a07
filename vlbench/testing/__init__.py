"""Conformance checks for plug-in authors, as scikit-learn's ``check_estimator``: one call runs a plug-in through
every clause of its contract that vlbench relies on, and vlbench's own tests run them on every built-in.

* :func:`check_adapter` (a model adapter or a ``NAME[:CHECKPOINT]`` spec): identity, shapes, determinism,
  batch independence, text keys (testing/adapter.py);
* :func:`check_perturbation` (a caption perturbation: name, class or object): the record, determinism,
  edge captions, independence of the other captions (testing/perturbation.py);
* :func:`check_metric` (a ``Metric`` or name): the record, per-query values, range, aggregate, perfect vs.
  worst ranking, param honoured (testing/metric.py);
* :func:`check_dataset` (a ``Dataset``, factory or name): images, captions, indices, ids, files (testing/dataset.py);
* :func:`check_image_perturbation` (an image corruption: name or function): shape, values, determinism,
  severities (testing/images.py);
* :func:`check_executor` (a sweep executor: name, class or object): the protocol, options refused before any
  run, one typed outcome per task in order, retries honoured, progress events (testing/executor.py).
* :func:`check_exporter` (a ``vlbench export`` format: name or object): the protocol, the files it returns, writes
  only under ``out``, leaves the run as it was, the same bytes twice (testing/exporter.py);
* :func:`check_tracker` (a ``--report-to`` tracker: name or object): the protocol, a silent ``prepare``, one
  line from ``send``, the payload unchanged, a second run (testing/tracker.py);
* :func:`check_pair_scorer` (a pair scorer: ``NAME[:CHECKPOINT]`` or object): identity, float32 scores, batch
  and order independence, an image encoded once, text keys, mismatched pairs refused (testing/pairs.py).

Each returns a :class:`Report` (the checks passed, and those skipped with why) and raises a
:class:`ConformanceError` (an ``AssertionError``) naming the plug-in, the check, what was expected and what was
found. Example: ``from vlbench.testing import check_metric; check_metric(MY_METRIC)``. docs/extending.md
("Check your plug-in") shows them. To add a check, add it to the kind's module; a new plug-in kind gets a
module of its own and an export here.
"""

from __future__ import annotations

from .adapter import check_adapter
from .common import ConformanceError, Report
from .dataset import check_dataset
from .executor import check_executor
from .exporter import check_exporter
from .images import check_image_perturbation
from .metric import check_metric
from .pairs import check_pair_scorer
from .perturbation import check_perturbation
from .tracker import check_tracker

__all__ = ["ConformanceError", "Report", "check_adapter", "check_dataset", "check_executor", "check_exporter",
           "check_image_perturbation", "check_metric", "check_pair_scorer", "check_perturbation", "check_tracker"]
