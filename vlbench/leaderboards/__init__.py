"""Leaderboards: result records -> tables, plots, a static page and a publishable folder.

Importing this package imports neither torch nor matplotlib nor pandas; pandas is imported by
:func:`load_results`, matplotlib only when plots are drawn.

* :func:`load_results` -- every value of the given runs as a long pandas DataFrame;
* :func:`build_leaderboard` -- CSV / Markdown tables (clean retrieval, RSUM per perturbation, model-input analysis, RSUM
  changes, every value, provenance), one HTML page, PNG plots and a manifest, into a folder;
* :func:`publish_leaderboard` -- a built leaderboard laid out for committing or uploading.

See docs/leaderboards.md.

What lives here: :mod:`.store` (reading and selecting results), :mod:`.runset` (which runs a build takes),
:mod:`.tables` and :mod:`.all_tables` (the tables), :mod:`.sections`, :mod:`.modalities` (more tables),
:mod:`.render` (HTML, Markdown), :mod:`.paper` (the ranking view, the robustness summary, LaTeX, the plots),
:mod:`.build` (a leaderboard folder; :func:`load_results`), :mod:`.writing`, :mod:`.publish`, :mod:`.integrity`
(checks of every run read) and :mod:`.cli`. To add a table: a function
giving a ``table_types.Table``, listed in ``all_tables.build_tables``. This file holds no logic: it
re-exports the public names (the heavier ones on first use).
"""

from __future__ import annotations

from .store import CURRENT_SCHEMA, UPGRADES, Run, SchemaTooNew, UnreadableResults, discover, load_runs, read_run, select

__all__ = ["load_results", "build_leaderboard", "publish_leaderboard", "read_run", "load_runs", "discover",
           "select", "Run", "SchemaTooNew", "UnreadableResults", "CURRENT_SCHEMA", "UPGRADES", "RESULT_COLUMNS"]


def __getattr__(name):  # lazy re-exports: importing the package stays cheap
    if name in ("load_results", "build_leaderboard", "RESULT_COLUMNS"):
        from . import build  # lazy: vlbench --help imports this module; keep it light
        return getattr(build, name)
    if name == "publish_leaderboard":
        from .publish import publish_leaderboard  # lazy: vlbench --help imports this module; keep it light
        return publish_leaderboard
    raise AttributeError(name)
