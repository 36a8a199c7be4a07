"""vlbench compare (issue #23 item 1): on real runs of two tiny models, every difference, interval and p-value
equals an independent computation from per_query.csv.gz (pandas, numpy, scipy; Holm and Bonferroni by hand);
deterministic under a seed; runs over different queries or datasets refused."""

from __future__ import annotations

import itertools
import json
import zlib

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from support.data import excerpt_rows, write_images
from support.runs import rehash

N = 400  # resamples: small keeps the test fast; the computation is the same for 10000


@pytest.fixture(scope="module")
def runs(tmp_path_factory, counting_plugin):
    from vlbench.pipeline.runner import run

    root = tmp_path_factory.mktemp("cmp")
    rows = excerpt_rows(12)
    names = write_images(root / "data" / "images", len(rows))
    man = root / "data" / "m.jsonl"
    man.write_text("".join(json.dumps({"image": f"images/{n}", "captions": r["captions"]}) + "\n"
                           for n, r in zip(names, rows)))
    other = root / "data" / "other.jsonl"  # another dataset: 11 of the images
    other.write_text("".join(json.dumps({"image": f"images/{n}", "captions": r["captions"]}) + "\n"
                             for n, r in list(zip(names, rows))[:11]))
    out = {}
    for m in ("counting:dim=16", "counting:dim=24"):
        out[m] = run(model=m, dataset=f"custom:{man}", perturb="shuffle-all-words", out=str(root / m[-2:]),
                     quiet=True, num_workers=0, n_boot=20, no_cache=True).out_dir
    out["other"] = run(model="counting:dim=16", dataset=f"custom:{other}", out=str(root / "other"), quiet=True,
                       num_workers=0, n_boot=20, no_cache=True).out_dir
    return out


def _pq(run_dir) -> pd.DataFrame:
    return pd.read_csv(run_dir / "per_query.csv.gz")


def _vals(df, cond, d, col="rsum"):
    x = df[(df.condition == cond) & (df.direction == d)].sort_values(["fold", "query_index"])
    return x[col].to_numpy(dtype=float)


def _rng(seed, key, what):
    return np.random.default_rng([seed, zlib.crc32(f"{key}|{what}".encode())])


def _boot(strata, key, seed):
    """Percentile CI: per stratum, N resamples of the queries (one rng.integers draw each), summed."""
    rng = _rng(seed, key, "ci")
    dist = np.zeros(N)
    for d in strata:
        dist += np.array([d[rng.integers(0, len(d), size=len(d))].mean() for _ in range(N)])
    return np.quantile(dist, 0.025), np.quantile(dist, 0.975)


def _signflip(strata, key, seed):
    t = np.concatenate([d / len(d) for d in strata])
    t = t[t != 0]
    obs = abs(t.sum())
    if 2 ** len(t) <= N:  # exact: every sign pattern
        return np.mean([abs(np.dot(s, t)) >= obs - 1e-9 * abs(t).sum()
                        for s in itertools.product((1, -1), repeat=len(t))])
    rng = _rng(seed, key, "p")
    hits = sum(abs(np.dot(np.where(rng.random(len(t)) < 0.5, -1, 1), t)) >= obs - 1e-9 * abs(t).sum()
               for _ in range(N))
    return (1 + hits) / (N + 1)


def _expected(a_dir, b_dir, seed, test="randomization"):
    A, B = _pq(a_dir), _pq(b_dir)
    ra = json.loads((a_dir / "results.json").read_text())["run_id"]
    rb = json.loads((b_dir / "results.json").read_text())["run_id"]
    rows = []
    for cond in ("clean", "shuffle-all-words"):
        for d in ("i2t", "t2i", "both"):
            for kind in ("difference",) if cond == "clean" else ("difference", "robustness"):
                dirs = ("i2t", "t2i") if d == "both" else (d,)
                strata = []
                for x in dirs:
                    a, b = _vals(A, cond, x), _vals(B, cond, x)
                    if kind == "robustness":
                        a, b = a - _vals(A, "clean", x), b - _vals(B, "clean", x)
                    strata.append(a - b)
                key = f"{ra}|{rb}|{cond}|{d}|{kind}|rsum"
                lo, hi = _boot(strata, key, seed)
                p = _signflip(strata, key, seed) if test == "randomization" else stats.ttest_rel(
                    *(lambda a, b: (a, b))(strata[0], np.zeros_like(strata[0]))).pvalue
                rows.append(dict(condition=cond, direction=d, kind=kind, diff=sum(s.mean() for s in strata),
                                 ci_low=lo, ci_high=hi, p=p))
    return rows


def test_every_difference_interval_and_p_value_recomputed(runs):
    from vlbench.compare import compare_runs

    a, b = runs["counting:dim=16"], runs["counting:dim=24"]
    rec = compare_runs([a, b], n_resamples=N, seed=7)
    exp = _expected(a, b, 7)
    assert [(r["condition"], r["direction"], r["kind"]) for r in rec["rows"]] == \
        [(e["condition"], e["direction"], e["kind"]) for e in exp]
    for r, e in zip(rec["rows"], exp):
        for k in ("diff", "ci_low", "ci_high", "p"):
            assert r[k] == pytest.approx(e[k], abs=1e-9), (r, k)
    # the clean i2t difference is the runs' own RSUM difference
    res = {m: json.loads((runs[m] / "results.json").read_text())["results"] for m in ("counting:dim=16", "counting:dim=24")}
    rs = {m: next(v["value"] for v in res[m] if v["condition"] == "clean" and v["direction"] == "i2t"
                  and v["metric"] == "rsum") for m in res}
    assert rec["rows"][0]["diff"] == pytest.approx(rs["counting:dim=16"] - rs["counting:dim=24"], abs=1e-6)
    nonzero = np.count_nonzero(_vals(_pq(a), "clean", "i2t") - _vals(_pq(b), "clean", "i2t"))
    assert rec["rows"][0]["exact"] == bool(2 ** nonzero <= N)  # few queries differ: every sign pattern enumerated
    # Holm by hand over the family of 9
    ps = [r["p"] for r in rec["rows"]]
    order = np.argsort(ps, kind="stable")
    holm, running = [0.0] * len(ps), 0.0
    for i, j in enumerate(order):
        running = max(running, min(1.0, (len(ps) - i) * ps[j]))
        holm[j] = running
    assert [r["p_adj"] for r in rec["rows"]] == pytest.approx(holm)
    assert rec["family_size"] == 9 and all(r["separable"] == (r["p_adj"] < 0.05) for r in rec["rows"])
    bonf = compare_runs([a, b], n_resamples=N, seed=7, correction="bonferroni")
    assert [r["p_adj"] for r in bonf["rows"]] == pytest.approx([min(1.0, 9 * p) for p in ps])


def test_ttest_matches_scipy_and_seed_determinism(runs):
    from vlbench.compare import compare_runs

    a, b = runs["counting:dim=16"], runs["counting:dim=24"]
    rec = compare_runs([a, b], n_resamples=N, seed=3, test="ttest")
    A, B = _pq(a), _pq(b)
    r = next(x for x in rec["rows"] if x["condition"] == "clean" and x["direction"] == "t2i")
    assert r["p"] == pytest.approx(stats.ttest_rel(_vals(A, "clean", "t2i"), _vals(B, "clean", "t2i")).pvalue)
    assert not any(x["direction"] == "both" for x in rec["rows"])  # the t-test is per direction
    r1, r2 = compare_runs([a, b], n_resamples=N, seed=3), compare_runs([a, b], n_resamples=N, seed=3)
    assert r1 == r2
    r3 = compare_runs([a, b], n_resamples=N, seed=4)
    assert [x["ci_low"] for x in r3["rows"]] != [x["ci_low"] for x in r1["rows"]]


def test_other_dataset_and_other_queries_refused(runs, tmp_path):
    import shutil

    from vlbench.cli import main
    from vlbench.compare import compare_runs
    from vlbench.errors import VlbenchError

    a, b = runs["counting:dim=16"], runs["counting:dim=24"]
    with pytest.raises(VlbenchError, match=r"different datasets.*content hash differs"):
        compare_runs([a, runs["other"]], n_resamples=N)
    # same dataset hash, but a per-query file whose t2i queries are reordered: refused by query
    c = tmp_path / "c"
    shutil.copytree(b, c)
    df = _pq(c)
    t2i = df[(df.condition == "clean") & (df.direction == "t2i")].index
    df.loc[t2i, ["query_index", "query_id"]] = df.loc[t2i[::-1], ["query_index", "query_id"]].to_numpy()
    df.to_csv(c / "per_query.csv.gz", index=False)
    with pytest.raises(VlbenchError, match=r"per_query.csv.gz is not the file run .* wrote: its sha256 differs"):
        compare_runs([a, c], n_resamples=N)  # issue #32: an edited file is refused by its hash first
    rehash(c)  # as if the run had written its queries in that order
    with pytest.raises(VlbenchError, match=r"do not share the queries of clean t2i \(query 0: "):
        compare_runs([a, c], n_resamples=N)
    assert main(["compare", str(a), str(runs["other"])]) == 2
    assert main(["compare", str(a), str(b), "--metric", "nope"]) == 2


def test_cli_writes_json_csv_md(runs, tmp_path, capsys):
    from vlbench.cli import main

    a, b = runs["counting:dim=16"], runs["counting:dim=24"]
    assert main(["compare", str(a), str(b), "--n-resamples", str(N), "--seed", "7", "--metric", "recall@1",
                 "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "| counting:dim=16 | counting:dim=24 | clean | i2t | difference | 12 |" in out and "holm" in out
    rec = json.loads((tmp_path / "o" / "comparison.json").read_text())
    A, B = _pq(a), _pq(b)
    r = rec["rows"][0]
    assert r["diff"] == pytest.approx(_vals(A, "clean", "i2t", "recall@1").mean() - _vals(B, "clean", "i2t", "recall@1").mean())
    assert not any(x["direction"] == "both" for x in rec["rows"])  # "both" is the RSUM total only
    csv_rows = (tmp_path / "o" / "comparison.csv").read_text().splitlines()
    assert len(csv_rows) == 1 + len(rec["rows"]) and csv_rows[0].startswith("run_a,run_b,model_a")


def test_the_leaderboard_reads_a_comparison_record(runs, tmp_path, capsys):
    """The record vlbench compare writes is read by 'leaderboard build --comparison': its rows appear as the
    paired_comparisons table (values as recorded); a record about a run the leaderboard does not use is left
    out with a warning naming it; no local path is shown."""
    import csv

    from vlbench.cli import main
    from vlbench.runfolder import record_hash

    a, b, other = runs["counting:dim=16"], runs["counting:dim=24"], runs["other"]
    assert main(["compare", str(a), str(b), "--n-resamples", str(N), "--out", str(tmp_path / "ab")]) == 0
    rec = json.loads((tmp_path / "ab" / "comparison.json").read_text())
    stale = tmp_path / "stale" / "comparison.json"  # names a run id this leaderboard does not have
    stale.parent.mkdir()
    gone = dict(rec, runs=[dict(rec["runs"][0], run_id="gone-run")] + rec["runs"][1:],
                rows=[dict(r, run_a="gone-run") if r["run_a"] == rec["runs"][0]["run_id"] else r for r in rec["rows"]])
    stale.write_text(json.dumps(dict(gone, record_hash=record_hash(gone))))
    capsys.readouterr()
    assert main(["leaderboard", "build", str(a), str(b), "--out", str(tmp_path / "lb"), "--no-plots",
                 "--comparison", str(tmp_path / "ab"), "--comparison", str(stale)]) == 0
    err = capsys.readouterr().err
    assert "comparison stale/comparison.json left out: its run(s) gone-run" in err
    with open(tmp_path / "lb" / "paired_comparisons.csv", newline="") as fh:
        got = list(csv.DictReader(fh))
    assert len(got) == len(rec["rows"]) > 0
    for row, want in zip(got, rec["rows"]):
        assert (row["model_a"], row["model_b"], row["condition"], row["direction"]) == (
            "counting:dim=16", "counting:dim=24", want["condition"], want["direction"])
        assert float(row["diff"]) == pytest.approx(want["diff"], abs=1e-6)
        assert float(row["p_adj"]) == pytest.approx(want["p_adj"], abs=1e-6)
        assert row["separable"] == ("yes" if want["separable"] else "no") and row["record"] == "ab/comparison.json"
    page = (tmp_path / "lb" / "index.html").read_text()
    assert "Paired model comparisons" in page and str(tmp_path) not in page
    assert main(["leaderboard", "build", str(a), str(other), "--out", str(tmp_path / "lb2"), "--no-plots",
                 "--comparison", str(tmp_path / "ab")]) == 0  # b is not in this build: left out, named
    assert "left out: its run(s)" in capsys.readouterr().err


def test_the_interval_is_labelled_with_its_level(runs):
    """--alpha sets both the separability threshold and the interval (1 - alpha); the table says which."""
    from vlbench.compare import compare_runs
    from vlbench.compare.report import to_markdown

    a, b = runs["counting:dim=16"], runs["counting:dim=24"]
    assert "| 90% CI |" in to_markdown(compare_runs([a, b], n_resamples=N, alpha=0.1))
    assert "| 95% CI |" in to_markdown(compare_runs([a, b], n_resamples=N))
