"""Datasets: what a run evaluates on.

What lives here: the ``Dataset`` record and manifest loading (:mod:`.core`), the built-in datasets' specs
and loaders (:mod:`.specs`, :mod:`.builtin`), downloads (:mod:`.download`), folds (:mod:`.folds`: how a
dataset with image folds is cut, for every step), extra positives (:mod:`.positives`, :mod:`.eccv`,
:mod:`.official`), ``--distractors`` galleries (:mod:`.distractors`), multilingual captions
(:mod:`.multilingual`) and the multilingual retrieval sets XM3600 and XTD10 (:mod:`.langsets`).

To add a dataset: a loader returning a ``Dataset``, registered in ``vlbench.registry.datasets`` (a plug-in:
an entry point in the group ``vlbench.datasets``, docs/extending.md); or a JSONL manifest used as
``custom:<file>`` with no code. This file holds no logic.
"""
