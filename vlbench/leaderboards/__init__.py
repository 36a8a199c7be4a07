"""Leaderboards: result records -> tables, plots, a static page and a publishable folder.

Importing this package imports neither torch nor matplotlib nor pandas; pandas is imported by
:func:`load_results`, matplotlib only when plots are drawn.

* :func:`load_results` -- every value of the given runs as a long pandas DataFrame;
* :func:`build_leaderboard` -- CSV / Markdown tables (clean retrieval, RSUM per perturbation, model-input analysis, RSUM
  changes, every value, provenance), one HTML page, PNG plots and a manifest, into a folder;
* :func:`publish_leaderboard` -- a built leaderboard laid out for committing or uploading.

See docs/leaderboards.md.
"""

from __future__ import annotations

import warnings

from .store import (CURRENT_SCHEMA, UPGRADES, Run, SchemaTooNew, UnreadableResults, discover, load_runs,
                    read_run, select)

__all__ = ["load_results", "build_leaderboard", "publish_leaderboard", "read_run", "load_runs", "discover",
           "select", "Run", "SchemaTooNew", "UnreadableResults", "CURRENT_SCHEMA", "UPGRADES", "RESULT_COLUMNS"]

#: columns of :func:`load_results`, in order
RESULT_COLUMNS = ["model", "model_spec", "model_hash", "dataset", "dataset_name", "dataset_hash", "condition",
                  "family", "direction", "metric", "k", "value", "kept", "run_id", "created", "metric_version",
                  "vlbench_version", "schema_version", "perturbation_version", "perturbation_seed", "captions_hash",
                  "source"]


def load_results(paths, *, errors: str = "warn"):
    """Every value of the runs under ``paths`` as a long pandas DataFrame (:data:`RESULT_COLUMNS`).

    ``paths``: a run folder, a results.json file, a folder holding run folders (searched
    recursively), or a list of these. ``kept`` is True for the values a leaderboard would show (the
    newest run per model hash, dataset hash and condition); superseded duplicates have False.
    ``errors``: what to do with an unreadable results.json: "warn" (skip it with a warning),
    "ignore" (skip it silently) or "raise". Skipped files are in ``df.attrs["skipped"]``.
    """
    import pandas as pd

    from ..errors import VlbenchError
    from .tables import long_order, long_rows, make_labels

    if errors not in ("warn", "ignore", "raise"):
        raise ValueError("errors must be 'warn', 'ignore' or 'raise'")

    def warn(msg):
        if errors == "warn":
            warnings.warn(msg, UserWarning, stacklevel=3)

    loaded = load_runs(paths, warn=warn)
    if errors == "raise" and loaded.skipped:
        s = loaded.skipped[0]
        raise VlbenchError(f"{s['path']}: {s['reason']}", "remove or re-create this run, or use errors='warn'")
    selection = select(loaded.runs)
    labels = make_labels(loaded.runs, selection, allow_mixed=True, keep_paths=True)
    rows = []
    for run in loaded.runs:
        for r in long_rows(run, labels):
            r["kept"] = selection.values.get((run.model_hash, run.dataset_name, run.dataset_hash, r["condition"])) is run
            rows.append(r)
    rows.sort(key=lambda x: long_order(x) + (not x["kept"], x["run_id"], x["source"]))
    df = pd.DataFrame([[r[c] for c in RESULT_COLUMNS] for r in rows], columns=RESULT_COLUMNS)
    df["k"] = df["k"].astype("Int64")
    df["perturbation_seed"] = pd.array([s if isinstance(s, int) and not isinstance(s, bool) else None
                                        for s in df["perturbation_seed"]], dtype="Int64")
    df["value"] = df["value"].astype("float64")
    df["kept"] = df["kept"].astype(bool)
    df.attrs["skipped"] = loaded.skipped
    return df


def build_leaderboard(paths, out, allow_mixed: bool = False, **kw):
    """Build the leaderboard of ``paths`` into the folder ``out``; see :mod:`vlbench.leaderboards.build`."""
    from .build import build_leaderboard as _build

    return _build(paths, out, allow_mixed=allow_mixed, **kw)


def publish_leaderboard(out, **kw):
    """Publish a built leaderboard (``build_dir=``) or results (``paths=``) into ``out``."""
    from .publish import publish_leaderboard as _publish

    return _publish(out, **kw)
