"""compare answers the question asked: clean, then one robustness row per family (its
conditions averaged per query), the correction family stated; narrowed by --conditions / --directions; models
named by --model-name; and the leaderboard's rank groups and compare agree on a constructed case."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from support.synthetic_runs import synth_run, write_per_query

PERTURB = ["char-swap", "missing-char", "shuffle-all-words"]  # typos x 2, word-order x 1


def _run(root, model, vals, perturb=(), label=None):
    folder = synth_run(root / f"m{model}", model=model, perturb=perturb, label=label)
    write_per_query(folder, vals)
    return folder


def _vals(seed):
    rng = np.random.default_rng(seed)
    return {(c, d): list(rng.integers(0, 4, size=8) * 100.0) for c in ["clean"] + PERTURB for d in ("i2t", "t2i")}


def test_the_default_is_clean_then_one_robustness_row_per_family(tmp_path):
    from vlbench.compare.engine import compare_runs
    from vlbench.compare.report import to_markdown

    va, vb = _vals(1), _vals(2)
    a = _run(tmp_path, 0, va, PERTURB, label="my model $x$")
    b = _run(tmp_path, 1, vb, PERTURB)
    rec = compare_runs([a, b], conditions="clean,families", directions=None, n_resamples=200)
    assert [(r["condition"], r["direction"], r["kind"]) for r in rec["rows"]] == [
        ("clean", "both", "difference"), ("typos", "both", "robustness"), ("word-order", "both", "robustness")]
    typos = rec["rows"][1]
    assert typos["conditions"] == ["char-swap", "missing-char"]

    def robust(v, d, conds):  # independent: per query, mean over the family of (cond - clean)
        return np.mean([np.array(v[(c, d)]) - np.array(v[("clean", d)]) for c in conds], axis=0)

    want = sum(float(np.mean(robust(va, d, typos["conditions"]) - robust(vb, d, typos["conditions"])))
               for d in ("i2t", "t2i"))
    assert typos["diff"] == pytest.approx(want, abs=1e-12)
    assert rec["family_size"] == 3 and rec["runs"][0]["label"] == "my model $x$"
    text = to_markdown(rec)
    assert "Correction: holm over the family of 3 comparisons (3 rows: 1 pair(s) of runs x 1 direction(s)" in text
    assert "| my model $x$ | clip:model-1 | clean | both | difference |" in text
    assert "typos (family of 2)" in text and "--conditions all" in text
    named = compare_runs([a, b], conditions="clean", directions="t2i", n_resamples=200, names=["A", "B"])
    assert [r["direction"] for r in named["rows"]] == ["t2i"] and [r["label"] for r in named["runs"]] == ["A", "B"]
    detail = compare_runs([a, b], conditions="char-swap", directions="i2t", n_resamples=200)
    assert [(r["condition"], r["kind"]) for r in detail["rows"]] == [("char-swap", "difference"),
                                                                     ("char-swap", "robustness")]


def test_cli_default_and_unknown_condition(tmp_path, capsys):
    from vlbench.cli import main

    a, b = _run(tmp_path, 0, _vals(1), PERTURB), _run(tmp_path, 1, _vals(2), PERTURB)
    assert main(["compare", str(a), str(b), "--n-resamples", "200", "--model-name", "A", "--model-name", "B"]) == 0
    out = capsys.readouterr().out
    assert "| A | B | clean | both | difference |" in out and "word-order (family of 1)" in out
    assert main(["compare", str(a), str(b), "--conditions", "clean,nonsense"]) == 2
    err = capsys.readouterr().err
    assert "--conditions" in err and "nonsense" in err and "typos (family)" in err


def test_compare_and_the_rank_groups_agree_where_one_pair_is_separable(tmp_path):
    """A = 300 on every query, B = 300 (i2t) / 0 (t2i), C = 0; five queries per direction. Exact sign-flip
    p-values (every pattern): A-B 2/32, B-C 2/32, A-C 2/1024; Holm over the 3 pairs: A-C 0.0059 (separable),
    A-B and B-C 0.125 (not). The leaderboard's rank groups and compare (clean, total RSUM, same test and
    correction over the same 3 pairs) give these same p-values and verdicts."""
    from vlbench.compare.engine import compare_runs
    from vlbench.leaderboards.build import make

    five = {"A": ([300.0] * 5, [300.0] * 5), "B": ([300.0] * 5, [0.0] * 5), "C": ([0.0] * 5, [0.0] * 5)}
    folders = [_run(tmp_path / "runs", i, {("clean", "i2t"): v[0], ("clean", "t2i"): v[1]}, label=m)
               for i, (m, v) in enumerate(five.items())]
    built = make([tmp_path / "runs"], plots=False, warn=lambda m: None)
    board = {(r[0], r[1]): (r[3], r[4], r[5]) for r in built.tables["rank_pairs"].rows}
    rec = compare_runs(folders, conditions="clean", directions="both", n_resamples=2000)
    label = {r["run_id"]: r["label"] for r in rec["runs"]}
    cmp = {(label[r["run_a"]], label[r["run_b"]]): (r["p"], r["p_adj"], r["separable"]) for r in rec["rows"]}
    assert set(cmp) == set(board) == {("A", "B"), ("A", "C"), ("B", "C")}
    for pair in cmp:
        assert cmp[pair][0] == pytest.approx(board[pair][0]) and cmp[pair][1] == pytest.approx(board[pair][1])
        assert cmp[pair][2] == board[pair][2], pair
    assert cmp[("A", "C")][1] == pytest.approx(3 * 2 / 1024) and cmp[("A", "C")][2] is True
    assert cmp[("A", "B")][1] == pytest.approx(2 * 2 / 32) and cmp[("A", "B")][2] is False
    letters = {r[1]: r[3] for r in built.tables["rank_groups"].rows}
    assert letters == {"A": "a", "B": "ab", "C": "b"}


def test_exact_sign_flip_in_blocks_equals_every_pattern_listed():
    """The exact test enumerates patterns in blocks (bounded memory); the count equals a listing of all 2^13."""
    from vlbench.metrics import paired

    rng = np.random.default_rng(3)
    d = [rng.normal(size=9), rng.normal(size=4)]
    w = [1.0, 0.5]
    p, exact = paired.sign_flip_p(d, w, 10000, paired.generator(0, "k", "p"))
    terms = np.concatenate([d[0] * (1.0 / 9), d[1] * (0.5 / 4)])
    obs = abs(terms.sum())
    listed = sum(abs(np.dot(s, terms)) >= obs - 1e-9 * np.abs(terms).sum()
                 for s in itertools.product((1, -1), repeat=13))
    assert exact and p == listed / 2 ** 13


def test_separable_no_beside_an_interval_above_zero_says_why_on_the_line():
    """Issue 44: compare printed an interval above 0 beside "separable: no" with no word on the line. The cell says
    that the interval is the comparison's own (unadjusted) and separable is the p adjusted over the family."""
    from vlbench.compare.report import separable_cell

    base = {"ci_low": 0.4, "ci_high": 3.1, "p": 0.03, "p_adj": 0.09, "separable": False}
    cell = separable_cell(base, 0.05)
    assert cell.startswith("no: ") and "adjusted over the family is 0.090 >= 0.05" in cell
    assert separable_cell({**base, "ci_low": -0.2}, 0.05) == "no"  # interval and verdict agree: no words
    assert separable_cell({**base, "p_adj": 0.01, "separable": True}, 0.05) == "yes"
    touching = separable_cell({**base, "ci_low": -0.1, "p_adj": 0.01, "separable": True}, 0.05)
    assert touching.startswith("yes: ") and "touches 0" in touching
