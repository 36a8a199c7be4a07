"""``compare_runs``: paired differences between runs of different models on the same dataset, per condition
and direction, with a bootstrap interval, a p-value and a family-wise correction (docs/compare.md)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..errors import OptionError, VlbenchError
from ..metrics import paired
from ..pipeline.rerank.readback import PREFIX
from ..results import DIRECTIONS
from ..runread import RunData
from .data import check_comparable, check_same_queries, load_stage
from .plan import CORRECTIONS, TESTS, Ask, asks, base_of, check_options, directions
from .record import seal

RECORD_KIND = "vlbench-comparison"
ROW_KEYS = ("run_a", "run_b", "model_a", "model_b", "condition", "direction", "kind", "n_queries", "a", "b", "diff",
            "ci_low", "ci_high", "p", "p_adj", "separable", "exact")
__all__ = ["TESTS", "CORRECTIONS", "RECORD_KIND", "ROW_KEYS", "compare_loaded", "compare_runs"]


def _shared_conditions(runs: list[RunData], notes: list[str]) -> list[str]:
    """Conditions every run has, minus perturbations whose output (captions hash) differs between runs."""
    sets = [set(r.conditions) for r in runs]
    shared = set.intersection(*sets)
    for c in sorted(set.union(*sets) - shared):
        notes.append(f"condition {c} is not in every run (only in "
                     f"{', '.join(r.folder for r in runs if c in r.conditions)})"
                     ": not compared")
    out = []
    for c in sorted(shared, key=lambda c: (c != "clean", c)):
        hashes = {str(r.record.condition(c).meta.get("captions_hash")) for r in runs}
        if c != "clean" and len(hashes) > 1:
            notes.append(f"condition {c}: the perturbed captions differ between runs (captions_hash), so its "
                         "queries are not the same: not compared")
            continue
        out.append(c)
    return out


def _column(run: RunData, cond: str, d: str, metric: str) -> np.ndarray:
    cols = run.tables[(cond, d)].columns
    if metric not in cols:
        have = ", ".join(c for c in run.header if c in cols)
        raise OptionError("--metric", f"run {run.folder} has no per-query column {metric!r} for {cond} {d}; its "
                                      f"columns: {have}")
    return cols[metric]


def _finite_column(run: RunData, cond: str, d: str, metric: str) -> np.ndarray:
    x = _column(run, cond, d, metric)
    if np.isinf(x).any():
        raise VlbenchError(f"run {run.folder}: {int(np.isinf(x).sum())} per-query value(s) of {metric} for {cond} {d} "
                           "are infinite; a run writes finite values, so its per-query file was changed or damaged",
                           "re-run the model with 'vlbench run' into a new folder")
    return x


def _side(run: RunData, conds: tuple[str, ...], d: str, metric: str, robust: bool) -> np.ndarray:
    """Per query: the value under the condition, or (robustness) its change against clean, averaged over
    ``conds`` (one condition: exactly its change)."""
    if not robust:
        return _finite_column(run, conds[0], d, metric)
    total = sum(_finite_column(run, c, d, metric) - _finite_column(run, base_of(run, c), d, metric) for c in conds)
    return total if len(conds) == 1 else total / len(conds)


def _strata(a: RunData, b: RunData, conds: tuple[str, ...], dirs: tuple, metric: str, robust: bool):
    """(paired differences per direction, means of A and B) with queries where a value is missing dropped."""
    strata, ma, mb = [], 0.0, 0.0
    for d in dirs:
        xa, xb = _side(a, conds, d, metric, robust), _side(b, conds, d, metric, robust)
        ok = ~(np.isnan(xa) | np.isnan(xb))
        strata.append(xa[ok] - xb[ok])
        ma, mb = (ma + float(xa[ok].mean()) if ok.any() else math.nan,
                  mb + float(xb[ok].mean()) if ok.any() else math.nan)
    return strata, ma, mb


def _row(a: RunData, b: RunData, ask: Ask, direction: str, kind: str, opts: dict) -> dict | None:
    dirs = DIRECTIONS if direction == "both" else (direction,)
    need = set(ask.conditions) | ({base_of(a, c) for c in ask.conditions} if kind == "robustness" else set())
    if any((c, d) not in r.tables for r in (a, b) for d in dirs for c in need):
        return None
    if kind == "robustness" and any(opts["metric"] not in r.tables[(base_of(r, c), d)].columns
                                    for r in (a, b) for d in dirs for c in ask.conditions):
        return None  # a condition's own column (a probe's probe_accuracy): no clean value to change from
    strata, ma, mb = _strata(a, b, ask.conditions, dirs, opts["metric"], kind == "robustness")
    if any(len(s) == 0 for s in strata):
        return None
    weights = [1.0] * len(strata)
    cond = ask.label if ask.kind != "family" else f"family:{ask.label}"
    key = "|".join([a.record.run_id, b.record.run_id, cond, direction, kind, opts["metric"]])
    dist = paired.bootstrap_dist(strata, weights, opts["n_resamples"], paired.generator(opts["seed"], key, "ci"))
    lo, hi = paired.percentile_ci(dist, opts["alpha"])
    exact = None
    if opts["test"] == "randomization":
        p, exact = paired.sign_flip_p(strata, weights, opts["n_resamples"], paired.generator(opts["seed"], key, "p"))
    elif opts["test"] == "bootstrap":
        p = paired.bootstrap_p(dist)
    else:
        p = paired.ttest_p(strata[0])
    return {"run_a": a.record.run_id, "run_b": b.record.run_id, "model_a": a.record.model.spec,
            "model_b": b.record.model.spec, "condition": ask.label, "direction": direction, "kind": kind,
            "n_queries": int(sum(len(s) for s in strata)), "a": ma, "b": mb, "diff": paired.statistic(strata, weights),
            "ci_low": lo, "ci_high": hi, "p": p, "p_adj": None, "separable": None, "exact": exact,
            **({"family": ask.label, "conditions": list(ask.conditions)} if ask.kind == "family" else {})}


def _kinds(ask: Ask) -> tuple[str, ...]:
    return {"clean": ("difference",), "condition": ("difference", "robustness"), "family": ("robustness",)}[ask.kind]


def _nothing_to_compare(runs: list[RunData]) -> VlbenchError:
    empty = [r.folder for r in runs if not any(len(t.keys) for t in r.tables.values())]
    if empty:
        return VlbenchError(f"no per-query values to compare: the per-query file of run(s) {', '.join(empty)} holds "
                            "no values", "re-run the model(s) with 'vlbench run' into a new folder")
    return VlbenchError(f"runs {', '.join(r.folder for r in runs)} share no condition and direction with per-query "
                        "values to compare (for the --conditions and --directions asked)",
                        "compare runs of the same dataset made with the same conditions")


def _family_text(n_pairs: int, groups: list[Ask], dirs: tuple, n_rows: int) -> str:
    what = ", ".join(f"{g.label} ({g.kind})" for g in groups)
    return (f"{n_rows} rows: {n_pairs} pair(s) of runs x {len(dirs)} direction(s) ({', '.join(dirs)}) x the rows "
            f"asked for ({what}); a condition adds a difference and a robustness row")


def compare_loaded(runs: list[RunData], metric: str = "rsum", test: str = "randomization", correction: str = "holm",
                   n_resamples: int = 10000, seed: int = 0, alpha: float = 0.05, *, conditions: str | None = "all",
                   directions_: str | None = None, names: list[str] | None = None) -> dict:
    """The comparison record of loaded runs (see :func:`compare_runs`)."""
    check_options(runs, metric, test, correction, n_resamples, alpha, seed, names)
    both = [r.folder for r in runs if any(c.startswith(PREFIX) for c, _ in r.tables)]
    if both:  # a two-stage run read whole: its rerank:<condition> rows are no conditions of their own
        raise VlbenchError(f"run(s) {', '.join(both)} hold both stages of a two-stage run (--rerank)",
                           "load each with vlbench.compare.data.load_stage (RUN: the final ranking, RUN@first: the "
                           "first stage), as compare_runs does")
    check_comparable(runs)
    if any(not any(len(t.keys) for t in r.tables.values()) for r in runs):
        raise _nothing_to_compare(runs)
    notes: list[str] = []
    conds = _shared_conditions(runs, notes)
    for c in conds:
        for d in DIRECTIONS:
            if all((c, d) in r.tables for r in runs):
                check_same_queries(runs, c, d)
    groups = asks(runs, conds, conditions)
    dirs = directions(directions_, metric, test)
    if directions_ is None:  # the directions the runs have (a choice task's image picks a caption: i2t only)
        dirs = tuple(d for d in dirs if any(k[1] == d for r in runs for k in r.tables)) or dirs
    opts = {"metric": metric, "test": test, "n_resamples": n_resamples, "seed": seed, "alpha": alpha}
    rows = []
    for a, b in itertools.combinations(runs, 2):
        if a.record.model.hash == b.record.model.hash:
            notes.append(f"runs {a.folder} and {b.folder} are of the same model (hash {a.record.model.hash[:12]}): "
                         "their differences measure run-to-run variation, not two models")
        for g in groups:
            for d in dirs:
                for kind in _kinds(g):
                    row = _row(a, b, g, d, kind, opts)
                    if row is not None:
                        rows.append(row)
    if not rows:
        raise _nothing_to_compare(runs)
    for row, adj in zip(rows, paired.adjust([r["p"] for r in rows], correction)):
        row["p_adj"], row["separable"] = adj, adj is not None and adj < alpha
    labels = names or [r.record.model.label for r in runs]
    return {"kind": RECORD_KIND, "format_version": 1, "metric": metric, "test": test, "correction": correction,
            "alpha": alpha, "n_resamples": n_resamples, "seed": seed, "family_size": len(rows),
            "family": _family_text(len(runs) * (len(runs) - 1) // 2, groups, dirs, len(rows)),
            "conditions": conditions or "all", "directions": list(dirs),
            "dataset": {"name": runs[0].record.dataset.name, "hash": runs[0].record.dataset.hash},
            "runs": [{"run_id": r.record.run_id, "folder": r.folder, "model": r.record.model.spec, "label": lab,
                      "model_hash": r.record.model.hash} for r, lab in zip(runs, labels)],
            "rows": rows, "notes": notes}


def compare_runs(paths, metric: str = "rsum", test: str = "randomization", correction: str = "holm",
                 n_resamples: int = 10000, seed: int = 0, alpha: float = 0.05, *, conditions: str | None = "all",
                 directions: str | None = "i2t,t2i,both", names: list[str] | None = None) -> dict:
    """Compare runs of different models on the same dataset (same content hash, same queries).

    For every pair of runs (in the given order, A before B), the rows ``conditions`` asks for ("clean", family
    names, "families" = every family, condition names, "all" = clean and every condition; comma-separated) in
    each of ``directions`` ("i2t", "t2i", "both" = i2t + t2i for RSUM; None: "both" where it can be tested):
    the mean paired difference A - B of the per-query ``metric`` ("rsum": the per-query sum of the Recall@k
    hits, whose mean is the run's RSUM), its paired bootstrap interval and a p-value (``test``); for a
    perturbation also the robustness difference, per query (A_cond - A_clean) - (B_cond - B_clean), and for a
    family that robustness difference averaged over the family's conditions per query. p-values are adjusted
    over the whole family of rows (``correction``). ``names``: labels of the runs' models (default: each run's
    --model-name, else its spec). Deterministic for a ``seed``. Returns the comparison record (docs/compare.md).
    A two-stage run (``vlbench run --rerank``) is compared on its final ranking; ``RUN@first`` names its first stage
    alone (``RUN@final`` the final ranking), so a run can be compared with its own first stage.
    The command line's default is ``conditions="clean,families"``, ``directions=None``."""
    runs = [load_stage(p) for p in paths]  # a two-stage run: its final ranking (RUN@first: its first stage)
    if directions == "i2t,t2i,both" and (metric != "rsum" or test == "ttest"):
        directions = "i2t,t2i"  # the Python default: every direction that can be tested
    return seal(compare_loaded(runs, metric, test, correction, n_resamples, seed, alpha, conditions=conditions,
                               directions_=directions, names=names), runs)  # record.py
