"""The robustness summary (issue #31 item 4): chance level against a simulation of random rankings, RSUM retained
against its definition, its bootstrap interval against a plain resampling loop; "largest drop" only for a real
drop; a model name with $...$ is drawn as written, never as mathtext."""

from __future__ import annotations

import numpy as np
import pytest
from support.synthetic_runs import PERTURBATIONS, synth_run, write_per_query


@pytest.mark.parametrize("gallery,positives", [(12, 1), (12, 5), (40, 5), (7, 3)])
def test_chance_hit_rate_equals_a_simulation_of_random_rankings(gallery, positives):
    from vlbench.leaderboards.paper.summary import hit_chance

    rng = np.random.default_rng(0)
    trials = 20000
    ranks = np.argsort(rng.random((trials, gallery)), axis=1)  # a random ranking of the gallery per trial
    first = (ranks < positives).argmax(axis=1) + 1  # rank of the best positive (candidates 0..positives-1)
    for k in (1, 5, 10):
        sim = float(np.mean(first <= k))
        assert hit_chance(k, gallery, positives) == pytest.approx(sim, abs=0.015), k


def test_chance_rsum_of_a_dataset_record():
    from vlbench.leaderboards.paper.summary import chance_rsum, hit_chance

    want = 100 * sum(k / 12 + hit_chance(k, 60, 5) for k in (1, 5, 10))
    assert chance_rsum({"n_images": 12, "n_captions": 60, "gallery_size": 12}) == pytest.approx(want)
    # coco-1k style: five folds of 1,000 images are ranked fold by fold
    assert chance_rsum({"n_images": 5000, "n_captions": 25000, "folds": 5}) == pytest.approx(
        100 * sum(k / 1000 + hit_chance(k, 5000, 5) for k in (1, 5, 10)))
    assert chance_rsum({"name": "old run"}) is None


def test_retained_value_and_interval(tmp_path):
    from vlbench.leaderboards.build import make
    from vlbench.leaderboards.paper.summary import retained_interval

    typos = PERTURBATIONS["typos"][:2]
    folder = synth_run(tmp_path / "m0", model=0, perturb=typos)
    rng = np.random.default_rng(1)
    pq = {(c, d): rng.integers(0, 4, size=40) * 100.0 for c in ["clean"] + typos for d in ("i2t", "t2i")}
    write_per_query(folder, {k: list(v) for k, v in pq.items()})
    built = make([tmp_path], plots=False, warn=lambda m: None)
    t = built.tables["robustness_summary"]
    row = dict(zip([c.key for c in t.columns], t.rows[0]))
    res = built.selection.used_runs()[0]
    rsum = {c: res.record.value(c, "both", "rsum") for c in ["clean"] + typos}
    assert row["typos"] == pytest.approx(100 * np.mean([rsum[c] for c in typos]) / rsum["clean"])
    assert row["chance_rsum"] == pytest.approx(100 * sum(k / 12 + 1 - np.prod([(55 - j) / (60 - j) for j in range(k)])
                                                         for k in (1, 5, 10)))
    lo, hi = retained_interval(pq, typos, "any")
    # an independent bootstrap: a plain loop over resamples (another generator: the same interval up to noise)
    gen = np.random.default_rng(9)
    stats = []
    for _ in range(2000):
        means = {c: 0.0 for c in ["clean"] + typos}
        for d in ("i2t", "t2i"):
            idx = gen.integers(0, 40, size=40)
            for c in means:
                means[c] += pq[(c, d)][idx].mean()
        stats.append(100 * np.mean([means[c] for c in typos]) / means["clean"])
    assert lo == pytest.approx(np.quantile(stats, 0.025), abs=3.0) and hi == pytest.approx(np.quantile(stats, 0.975),
                                                                                           abs=3.0)


def test_largest_drop_only_for_a_real_drop():
    from vlbench.leaderboards.paper.ranking import ranking_table
    from vlbench.leaderboards.table_types import Column, Table

    t52 = Table("clean_retrieval", "", "", [Column("dataset"), Column("model"), Column("i2t_rsum", "num"),
                                            Column("t2i_rsum", "num")], [["d", "A", 100.0, 100.0]])
    keys = ["dataset", "model", "condition", "direction", "delta", "ci_high"]
    rows = [["d", "A", "up", "i2t", 2.0, 3.0], ["d", "A", "up", "t2i", 0.0, 1.0], ["d", "A", "up", "both", 2.0, 4.0],
            ["d", "A", "noise", "i2t", -1.0, 1.0], ["d", "A", "noise", "t2i", 0.0, 1.0],
            ["d", "A", "noise", "both", -1.0, 2.0]]
    changes = Table("rsum_changes", "", "", [Column(k, "num" if k in ("delta", "ci_high") else "text") for k in keys],
                    rows)
    rank = ranking_table(t52, changes)
    assert rank.rows[0][rank.column("worst")] is None  # a rise and a change whose interval holds 0: no drop
    rows[5][5] = -0.5  # the interval now lies below 0: a real drop
    assert ranking_table(t52, changes).rows[0][rank.column("worst")] == "noise (d)"


@pytest.mark.slow  # draws real figures (matplotlib): about 3 s
def test_a_model_name_with_dollars_is_drawn_as_written(tmp_path):
    from vlbench.leaderboards import build_leaderboard
    from vlbench.leaderboards.paper import plots

    drawn = []
    real = plots._both

    def keep(fig):
        drawn.append(fig)
        return real(fig)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plots, "_both", keep)
        for i, label in enumerate(["$\\frac$ broken", "price $5 and $6"]):
            synth_run(tmp_path / "runs" / f"m{i}", model=i, perturb=PERTURBATIONS["typos"][:2], label=label)
        build_leaderboard([tmp_path / "runs"], tmp_path / "lb", warn=lambda m: None)
    legend = [t.get_text() for f in drawn for t in (f.legends[0].get_texts() if f.legends else [])]
    assert "\\$\\frac\\$ broken" in legend and "price \\$5 and \\$6" in legend
    shown = [t._preprocess_math(t.get_text()) for f in drawn for t in f.legends[0].get_texts()]
    assert ("$\\frac$ broken", False) in shown and ("price $5 and $6", False) in shown  # plain text, as written


def test_a_model_at_or_below_chance_is_never_the_best_retained():
    """A random-ranking model keeps ~100% of its (chance-level) RSUM: it must not get the bold "best retained" cell,
    which goes to the best of the models above chance; its clean RSUM column is judged as before."""
    from vlbench.leaderboards.paper.latex import to_latex
    from vlbench.leaderboards.table_types import Column, Table

    cols = [Column("dataset"), Column("model"), Column("clean_rsum", "num", 1), Column("chance_rsum", "num", 1),
            Column("typos", "num", 1, "typos % retained")]
    rows = [["d", "random", 30.0, 40.0, 101.0], ["d", "at-chance", 40.0, 40.0, 99.0], ["d", "good", 300.0, 40.0, 90.0],
            ["d", "better", 350.0, 40.0, 80.0]]
    table = Table("robustness_summary", "Summary", "", cols, rows)
    body = [line.split(" & ") for line in to_latex(table).splitlines() if line.startswith("d & ")]
    cells = {c[1]: c for c in body}
    assert set(cells) == {"random", "at-chance", "good", "better"}
    assert "boldmath" not in cells["random"][4] and "boldmath" not in cells["at-chance"][4]
    assert "boldmath" in cells["good"][4] and "boldmath" in cells["better"][2]
