"""Leaderboard sections built from files beside results.json, read only when present (older runs lack them):

* rank groups -- which models are separable: a paired sign-flip randomization test of every pair of models on
  the per-query clean RSUM of per_query.csv.gz (:mod:`vlbench.metrics.paired`), Holm-corrected over the pairs,
  shown as a compact letter display in the ranking (models sharing a letter are not separable); only the models
  ranked together (clean results and per-query values on every dataset of the board) get a group;
* flips -- each run's flips.csv at the smallest k: queries going hit -> miss and miss -> hit, top-10 overlap;
* distractors -- conditions of kind "gallery" (``--distractors``): false rate and the change of RSUM.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
from pathlib import Path

from ..errors import VlbenchError
from ..metrics import paired
from ..results import DIRECTIONS
from ..runread import check_against_record, flip_rows, proven_per_query, record_problem, run_mismatch
from ..util.io import read_regular_file
from .store import condition_key
from .table_types import Column, Table
from .tables import _Ctx, _values, language_mean

ALPHA = 0.05
SEED = 0
MIN_RESAMPLES = 2000


def _folder(run) -> str:
    return os.path.dirname(run.path) or "."


def run_per_query(run, conditions: set[str]) -> dict | None:
    """{(condition, direction): QueryTable} of the run's own per-query file (proven by its file hashes, agreeing with
    its record); a two-stage run's final ranking reads its ``rerank:<condition>`` rows, checked against its final
    values. None without the file; raises as runread.proven_per_query."""
    side = {run.side_condition(c): c for c in conditions}
    tabs = proven_per_query(_folder(run), run.record, set(side))
    if tabs is None or not run.stage:
        return tabs
    tabs = {(side[c], d): t for (c, d), t in tabs.items()}
    check_against_record(_folder(run), run.record, tabs)
    return tabs


def _clean_rsum(run) -> dict | None:
    """{direction: (query keys, per-query RSUM)} of the run's clean condition, or None without the file."""

    try:  # only the run's own file, proven by its file hashes (runfolder.per_query_file), agreeing with its record
        tabs = run_per_query(run, {"clean"})
        if tabs is None:
            return None
    except Exception:  # an unproven or unreadable per-query file: the model has no group (noted in the table)
        return None
    out = {d: (t.keys, t.columns.get("rsum")) for (c, d), t in tabs.items()}
    return out if {"i2t", "t2i"} <= set(out) and all(v[1] is not None for v in out.values()) else None


def _pair_strata(qa: dict, qb: dict):
    """Paired per-query differences over the datasets both models have (same queries), each direction weighted
    1 / number of shared datasets: the statistic is the difference of mean clean total RSUM."""
    shared = [ds for ds in qa if ds in qb and all(qa[ds][d][0] == qb[ds][d][0] for d in DIRECTIONS)]
    strata = [qa[ds][d][1] - qb[ds][d][1] for ds in shared for d in DIRECTIONS]
    return strata, [1.0 / len(shared)] * len(strata) if shared else []


def _criterion(q: dict) -> float:
    return sum(float(q[ds]["i2t"][1].mean() + q[ds]["t2i"][1].mean()) for ds in q) / len(q)


def rank_groups(ctx: _Ctx) -> list[Table]:
    """The rank_groups table (one row per model) and rank_pairs (one row per pair of models)."""

    per_model: dict[str, dict] = {}
    # a multilingual set's clean values are a mean over its languages: not a dataset of the ranking (ranking.py)
    board = {k: by for k, by in ctx.pairs.items() if not (by.get("clean") and language_mean(by["clean"]))}
    with_clean = {(dn, dh) for (_, dn, dh), by_cond in board.items() if "clean" in by_cond}
    covered: dict[str, set] = {}
    for (mh, dn, dh), by_cond in board.items():
        run = by_cond.get("clean")
        q = _clean_rsum(run) if run is not None else None
        if run is not None:
            covered.setdefault(mh, set()).add((dn, dh))
        if q is not None:
            per_model.setdefault(mh, {})[(dn, dh)] = q
    # only the models ranked together (clean results on every dataset: ranking.coverage) get a group
    per_model = {m: q for m, q in per_model.items() if covered.get(m) == with_clean and len(q) == len(with_clean)}
    order = sorted(per_model, key=lambda m: (-_criterion(per_model[m]), ctx.model(m), m))
    pairs = list(itertools.combinations(order, 2))
    n_res = max(MIN_RESAMPLES, math.ceil(2 * len(pairs) / ALPHA))
    stats: list[tuple[float | None, float | None]] = []
    for a, b in pairs:
        strata, w = _pair_strata(per_model[a], per_model[b])
        if not strata:
            stats.append((None, None))
            continue
        p, _ = paired.sign_flip_p(strata, w, n_res, paired.generator(SEED, f"{a}|{b}", "rank"))
        stats.append((paired.statistic(strata, w), p))
    adj = paired.adjust([p for _, p in stats], "holm")
    sep = {frozenset(pr) for pr, q in zip(pairs, adj) if q is not None and q < ALPHA}
    let = paired.letters(order, sep)
    adjacent = sum(frozenset(x) in sep for x in zip(order, order[1:]))
    desc = (f"Models sharing a letter are not separable: paired sign-flip randomization test (two-sided, "
            f"{n_res} sign patterns, seed {SEED}, +1 correction) of the difference of mean clean total RSUM on "
            f"the per-query values (per_query.csv.gz) of every dataset of the board, Holm-corrected over "
            f"{len(pairs)} pairs, alpha {ALPHA}. {adjacent} of {max(len(order) - 1, 0)} adjacent pairs are "
            f"separable. Pairs: rank_pairs.csv; reading: docs/compare.md.")
    rows = [[i + 1, ctx.model(m), _criterion(per_model[m]), let[m], len(per_model[m])] for i, m in enumerate(order)]
    groups = Table("rank_groups", "Separable ranks", desc,
                   [Column("rank", "int"), Column("model"), Column("mean_clean_rsum", "num", 1, "mean clean RSUM"),
                    Column("group"), Column("datasets", "int")], rows, sorted(ctx.sel.values[k].ref for k in
                                                                                 ctx.sel.values if k[3] == "clean"
                                                                                 and k[0] in per_model))
    prow = [[ctx.model(a), ctx.model(b), d, p, q, q is not None and q < ALPHA]
            for (a, b), (d, p), q in zip(pairs, stats, adj)]
    pairs_t = Table("rank_pairs", "Pairwise model differences (rank groups)", desc,
                    [Column("model_a"), Column("model_b"), Column("diff", "num", 2), Column("p", "num", 4),
                     Column("p_holm", "num", 4), Column("separable")], prow, groups.runs)
    return [groups, pairs_t]


def with_groups(rank: Table, groups: Table | None) -> Table:
    """The page's ranking with a group column (letters) and the test stated under its title."""
    if groups is None or not groups.rows:
        return rank
    letter = {r[1]: r[3] for r in groups.rows}
    i = rank.column("model") + 1
    cols = rank.columns[:i] + [Column("group", label="group")] + rank.columns[i:]
    rows = [r[:i] + [letter.get(r[1], "")] + r[i:] for r in rank.rows]
    return Table(rank.name, rank.title, rank.description + " Group: " + groups.description, cols, rows, rank.runs)


def _read_flips(run) -> list[dict]:
    try:  # the run's own flips.csv, proven by its file hashes; none for an older run without them
        return flip_rows(_folder(run), run.record.other)
    except VlbenchError:
        return []


def _f(x):
    try:
        return float(x) if x not in (None, "") else None
    except ValueError:
        return None


def flips_table(ctx: _Ctx) -> Table:
    """One row per (dataset, model, condition): flips at the run's smallest k and the t2i top-10 overlap."""
    cols = [Column("dataset"), Column("model"), Column("condition"), Column("k", "int"),
            Column("i2t_hit_to_miss", "int", label="i2t hit→miss"),
            Column("i2t_miss_to_hit", "int", label="i2t miss→hit"),
            Column("t2i_hit_to_miss", "int", label="t2i hit→miss"),
            Column("t2i_miss_to_hit", "int", label="t2i miss→hit"),
            Column("t2i_top10_overlap", "num", 3, "t2i top-10 overlap"), Column("run_id")]
    rows, runs = [], set()
    cache: dict = {}
    for key in ctx.keys():
        mh, dn, dh = key
        for cond in sorted(ctx.pairs[key], key=condition_key):
            run = ctx.pairs[key][cond]
            recs = [r for r in cache.setdefault(run.path, _read_flips(run))
                    if r.get("condition") == run.side_condition(cond)]  # a final ranking's: rerank:<condition>
            ks = sorted({int(_f(r.get("k")) or 0) for r in recs} - {0})
            if not ks:
                continue
            by = {r.get("direction"): r for r in recs if int(_f(r.get("k")) or 0) == ks[0]}
            def cell(d, c, by=by):
                return _f(by.get(d, {}).get(c))

            rows.append([ctx.dataset(dn, dh), ctx.model(mh), cond, ks[0], cell("i2t", "hit_to_miss"),
                         cell("i2t", "miss_to_hit"), cell("t2i", "hit_to_miss"), cell("t2i", "miss_to_hit"),
                         cell("t2i", "top10_overlap"), run.ref])
            runs.add(run.ref)
    return Table("flips", "Flips: queries that change between clean and each condition",
                 "From each run's flips.csv at its smallest k: queries whose hit (a positive within the top k) turns "
                 "into a miss and back, per direction, and the mean overlap of the t2i top-10 lists with clean "
                 "(1 = the same images retrieved). Every k and the rank-change percentiles: the runs' flips.csv.",
                 cols, rows, sorted(runs))


def distractor_table(ctx: _Ctx) -> Table:
    """Conditions of kind "gallery": false rate, R@1 and the RSUM change against clean with its interval."""
    cols = [Column("dataset"), Column("model"), Column("condition"), Column("direction"),
            Column("false_rate", "num", 2, "false rate %"), Column("recall@1", "num", 2, "R@1"),
            Column("rsum", "num", 2, "RSUM"), Column("delta", "num", 2), Column("ci_low", "num", 2),
            Column("ci_high", "num", 2), Column("run_id")]
    rows, runs = [], set()
    for key in ctx.keys():
        mh, dn, dh = key
        for cond in sorted(ctx.pairs[key], key=condition_key):
            run = ctx.pairs[key][cond]
            if cond == "clean" or run.condition_meta(cond).get("kind") != "gallery":
                continue
            v, clean = _values(run, cond), _values(run, "clean")
            for d in DIRECTIONS:
                b = next((x.fields for x in run.record.intervals if x.condition == cond and x.get("direction") == d
                          and x.get("metric") == "rsum"), {})
                val, base = v.get((d, "rsum", None)), clean.get((d, "rsum", None))
                rows.append([ctx.dataset(dn, dh), ctx.model(mh), cond, d, v.get((d, "false_rate", None)),
                             v.get((d, "recall", 1)), val, b.get("delta", None if val is None or base is None
                                                                 else val - base), b.get("ci_low"), b.get("ci_high"),
                             run.ref])
                runs.add(run.ref)
    return Table("distractors", "Gallery distractors: false rate and change against the gallery without them",
                 "Conditions of --distractors: the clean queries scored against the gallery plus injected candidates. "
                 "false rate: percent of queries whose best injected candidate outranks every positive; delta: RSUM "
                 "minus clean RSUM, with the run's paired bootstrap 95% interval.", cols, rows, sorted(runs))


def read_comparisons(paths, warn) -> list[tuple[str, dict]]:
    """(path, record) of every ``vlbench compare`` record given (a comparison.json, or a folder holding one);
    an unreadable or malformed one is skipped with a warning naming it."""


    out = []
    for given in paths or ():
        p = Path(given)
        p = p / "comparison.json" if p.is_dir() else p
        try:  # a regular file of at most 64 MiB (a FIFO or /dev/zero would block the build)
            rec = json.loads(read_regular_file(p, 64 * 2 ** 20).decode("utf-8"))
            problem = record_problem(rec)  # keys, types, rows naming listed runs, the record's own hash
            if problem:
                raise ValueError(problem)
        except (OSError, ValueError, RecursionError) as exc:
            warn(f"comparison {given} skipped: {exc}")
            continue
        out.append((p.name if p.name != "comparison.json" else f"{p.parent.name}/{p.name}", rec))  # no local path
    return out


def comparison_table(ctx: _Ctx, records: list[tuple[str, dict]], warn) -> Table:
    """The rows of ``vlbench compare`` records whose two runs both provide values in this leaderboard (a
    comparison of a superseded or absent run is skipped with a warning naming the record and the run)."""
    used = {r.record.run_id: r.record for r in ctx.sel.used_runs()}  # a final ranking's: <run id>+<pair>@K<k>
    cols = [Column("dataset"), Column("model_a", label="model A"), Column("model_b", label="model B"),
            Column("condition"), Column("direction"), Column("kind"), Column("metric"), Column("n", "int"),
            Column("diff", "num", 2, "A - B"), Column("ci_low", "num", 2), Column("ci_high", "num", 2),
            Column("p_adj", "num", 4, "p adj."), Column("separable"), Column("test"), Column("record")]
    rows = []
    for path, rec in records:
        models = {r.get("run_id"): (r.get("model_hash"), r.get("model")) for r in rec["runs"] if isinstance(r, dict)}
        missing = sorted({str(rid) for rid in models if rid not in used})
        if missing:
            warn(f"comparison {path} left out: its run(s) {', '.join(missing)} are not among this leaderboard's "
                 "runs (superseded or not given); compare the runs the leaderboard uses")
            continue
        other = next((why for e in rec["runs"] if (why := run_mismatch(e, used[e["run_id"]]))), None)
        if other:
            warn(f"comparison {path} left out: {other} (the run was re-made or edited); run 'vlbench compare' again "
                 "on the runs the leaderboard uses")
            continue
        def name(rid, models=models):
            return ctx.lab.model.get(models[rid][0], models[rid][1])

        test = f"{rec.get('test')}, {rec.get('correction')} over {rec.get('family_size')}"
        for r in rec["rows"]:
            rows.append([rec["dataset"].get("name"), name(r["run_a"]), name(r["run_b"]), r["condition"],
                         r["direction"], r["kind"], rec.get("metric"), r["n_queries"], r["diff"], r["ci_low"],
                         r["ci_high"], r["p_adj"], "yes" if r["separable"] else "no", test, path])
    return Table("paired_comparisons", "Paired model comparisons (vlbench compare)",
                 "Rows of the vlbench compare records given with --comparison: the paired per-query difference A - B "
                 "(robustness rows: the difference of the two models' changes against clean) with its paired "
                 "bootstrap interval at 1 - the record's alpha (95% by default) and the multiplicity-adjusted "
                 "p-value; separable = adjusted p < the "
                 "record's alpha. docs/compare.md.", cols, rows, [])


def read_analyses(paths, warn) -> list[tuple[str, list[dict]]]:
    """(name, rows) of the ``vlbench analyze`` regression tables given (analysis_regression.csv, or the folder
    ``vlbench analyze --out`` wrote); an unreadable one is skipped with a warning naming it."""
    out = []
    for given in paths or ():
        p = Path(given)
        p = p / "analysis_regression.csv" if p.is_dir() else p
        try:
            text = read_regular_file(p, 64 * 2 ** 20).decode("utf-8")
            rows = _analysis_rows(text)
        except (OSError, ValueError, csv.Error) as exc:
            warn(f"analysis {given} skipped: {exc}")
            continue
        out.append((f"{p.parent.name}/{p.name}", rows))
    return out


#: the columns of analysis_regression.csv the leaderboard reads
_ANALYSIS_COLUMNS = ("run", "condition", "term", "coef", "ci_low", "ci_high", "per_sd")


def _analysis_rows(text: str) -> list[dict]:
    """The rows of an analysis_regression.csv; ValueError naming the first row (and its line) that does not have
    the header's fields (a short or long row: a cut or edited file)."""
    reader = csv.DictReader(text.splitlines())
    rows = []
    for i, row in enumerate(reader, 1):
        if None in row or None in row.values():  # DictReader: extra cells under key None, missing ones None
            n = sum(v is not None for k, v in row.items() if k is not None) + len(row.get(None) or ())
            raise ValueError(f"row {i} (line {reader.line_num}) has {n} fields, its header "
                             f"{len(reader.fieldnames or ())}: the file was cut or edited; write it again with "
                             "'vlbench analyze'")
        rows.append(row)
    if rows and not set(_ANALYSIS_COLUMNS) <= set(rows[0]):
        raise ValueError("it is not an analysis_regression.csv of 'vlbench analyze'")
    return rows


def _num(cell) -> float | None:
    try:
        value = float(cell)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def analysis_table(ctx: _Ctx, analyses: list[tuple[str, list[dict]]], warn) -> Table:
    """Which captions make each model brittle (``vlbench analyze``, docs/analyze.md): per model, dataset and
    perturbation family, the regression of the per-query change on the caption features, one row per feature,
    for the runs this leaderboard uses (an analysis of another run is left out with a warning)."""
    used = {r.record.run_id: r for r in ctx.sel.used_runs()}
    cols = [Column("dataset"), Column("model"), Column("condition"), Column("direction"), Column("outcome"),
            Column("feature"), Column("per_sd", "num", 2, "effect of 1 SD"), Column("coef", "num", 3),
            Column("ci_low", "num", 3), Column("ci_high", "num", 3), Column("n", "int"),
            Column("n_images", "int", label="images"), Column("analysis")]
    rows = []
    for name, recs in analyses:
        other = sorted({r["run"] for r in recs if r["run"] not in used})
        if other:
            warn(f"analysis {name}: rows of run(s) {', '.join(other)} left out (not among this leaderboard's runs)")
        for r in recs:
            run = used.get(r["run"])
            if run is None or r["term"] in ("const", "(not fitted)") or r.get("scope") == "condition" and \
                    any(x.get("scope") == "family" and x["run"] == r["run"] for x in recs):
                continue  # the family rows when the run has them; single conditions otherwise
            model = ctx.lab.model.get(run.record.model.hash, run.record.model.spec)
            rows.append([r.get("dataset"), model, r["condition"].removeprefix("family:"), r.get("direction"),
                         r.get("outcome"), r["term"], _num(r["per_sd"]), _num(r["coef"]), _num(r["ci_low"]),
                         _num(r["ci_high"]), int(float(r["n"])) if _num(r.get("n")) is not None else None,
                         int(float(r["n_images"])) if _num(r.get("n_images")) is not None else None, name])
    return Table("caption_brittleness", "Which captions make a model brittle (vlbench analyze)",
                 "Least squares of the per-query change under each perturbation family on caption granularity "
                 "features; 95% intervals cluster-robust by image; 'effect of 1 SD' is the coefficient times the "
                 "feature's standard deviation. Correlation, not cause (docs/analyze.md).", cols, rows, [])
