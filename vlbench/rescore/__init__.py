"""``vlbench rescore RUN --as SUITE``: a finished run's cached embeddings scored as other suites score them.

What lives here: the rescore kernel (:mod:`.engine`: read a run's embedding index and cache, score every
condition, write ``RUN/rescore/<suite>.json``), the suite records and their registry (:mod:`.registry`), the
built-in suites, one record each (:mod:`.suites`: clip_benchmark, mieb, mmeb, eccv, cxc) and the command
line (:mod:`.cli`). docs/rescore.md has the conventions.

To add a suite: one module that builds a ``Suite`` (its convention notes and a ``score`` function, e.g.
``per_fold(fn)``) and calls ``register_suite``; nothing else changes. This file holds no logic: it
re-exports the public names.
"""

from .engine import format_table, load_embeddings, rescore, score_suite
from .registry import Suite, check_suites, per_fold, register_suite, suites, unregister_suite

__all__ = ["format_table", "load_embeddings", "rescore", "score_suite", "Suite", "check_suites", "per_fold",
           "register_suite", "suites", "unregister_suite"]
