"""The invariance / sensitivity map on synthetic runs: invariance = the mean over caption families of RSUM retained,
sensitivity = the mean pairwise accuracy over the probes (per family too), recomputed from the synthetic formula;
probe conditions never count as invariance (not in the robustness summary, not in invariance); the order-free model
is marked as the reference; one plot per dataset."""

from __future__ import annotations

import pytest
from support.probe_runs import add_probe_results
from support.synthetic_runs import synth_run


def _rsum(model: int, j: int) -> float:
    """Total RSUM of the j-th condition of a synthetic run (support.synthetic_runs.synth_run's formula)."""
    base = 40.0 + 2 * model - j / 2
    return sum(base + 2 * k for k in (1, 5, 10)) + sum(base + k for k in (1, 5, 10))


def _runs(tmp_path):
    a = synth_run(tmp_path / "a", model=0, perturb=["char-swap", "missing-char", "synonym-noun"], corrupt=["snow"],
                  severities=(1,))
    add_probe_results(a, {"negation-present": ("negation", 70.0), "half-truth-object": ("half-truth", 40.0),
                          "half-truth-attribute": ("half-truth", 60.0)})
    b = synth_run(tmp_path / "b", model=1, perturb=["shuffle-all-words"])
    add_probe_results(b, {"negation-present": ("negation", 50.0)}, order_free=True)
    c = synth_run(tmp_path / "c", model=2, perturb=["char-swap"])  # no probes: no row in the map
    return a, b, c


def test_map_values_follow_their_definitions(tmp_path):
    from vlbench.leaderboards.build import make

    built = make(list(_runs(tmp_path)), plots=False)
    t = built.tables["sensitivity_map"]
    keys = [c.key for c in t.columns]
    rows = {r[1]: dict(zip(keys, r)) for r in t.rows}
    assert len(rows) == 2  # model 2 ran no probes
    ra = next(v for k, v in rows.items() if "model-0" in k)
    rb = next(v for k, v in rows.items() if "model-1" in k)
    clean = _rsum(0, 0)
    typos = (_rsum(0, 1) + _rsum(0, 2)) / 2 / clean * 100  # char-swap, missing-char: conditions 1 and 2
    lexical = _rsum(0, 3) / clean * 100
    assert ra["invariance"] == pytest.approx((typos + lexical) / 2)  # the image corruption is not in it
    assert ra["invariance_families"] == 2
    assert ra["sensitivity"] == pytest.approx((70 + 40 + 60) / 3) and ra["probes"] == 3
    assert ra["sensitivity_negation"] == 70.0 and ra["sensitivity_half-truth"] == pytest.approx(50.0)
    assert ra["reference"] == "" and rb["reference"] == "bag-of-words reference"
    assert rb["invariance"] == pytest.approx(_rsum(1, 1) / _rsum(1, 0) * 100) and rb["sensitivity"] == 50.0


def test_probes_never_count_as_invariance(tmp_path):
    from vlbench.leaderboards.build import make

    built = make(list(_runs(tmp_path)), plots=False)
    summary = built.tables["robustness_summary"]
    keys = [c.key for c in summary.columns]
    assert not any(k.startswith(("negation", "half-truth")) for k in keys)  # probes: no "retained" column
    assert "typos" in keys
    changes = built.tables["rsum_changes"]  # what the ranking's mean RSUM change and the change plots read
    conds = {r[[c.key for c in changes.columns].index("condition")] for r in changes.rows}
    assert conds == {"char-swap", "missing-char", "synonym-noun", "shuffle-all-words"}


def test_map_is_drawn_and_left_out_without_probes(tmp_path):
    from vlbench.leaderboards.build import make

    a, b, c = _runs(tmp_path)
    built = make([a, b], plots=True)
    assert [n for n in built.files if n.startswith("plots/sensitivity_map--") and n.endswith(".png")]
    page = built.files["leaderboard.md"].decode()
    assert "The invariance / sensitivity map" in page and "bag-of-words reference" in page
    alone = make([c], plots=True)
    assert "sensitivity_map" not in alone.tables
    assert not [n for n in alone.files if "sensitivity_map" in n]
