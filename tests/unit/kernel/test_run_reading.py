"""Reading a finished run's per-query values back (what analyze, compare and the leaderboard read): a value the
run cannot have written is refused by name, whatever the file's hash says."""

from __future__ import annotations

import pytest
from support.runs import rehash
from support.synthetic_runs import synth_run, write_per_query

from vlbench.errors import VlbenchError
from vlbench.runread import load_run

T2I = [0.0, 300.0, 100.0]
I2T = [100.0, 0.0, 200.0]  # recorded clean i2t RSUM: 100


def _edited(tmp_path, i2t: list[float]):
    """A run whose per-query i2t RSUM cells were replaced by ``i2t`` after the run (its record still says 100),
    with the file hash in results.json updated to the edited file (so only the values can tell)."""
    import gzip
    import shutil

    run = synth_run(tmp_path / "a")
    write_per_query(run, {("clean", "i2t"): I2T, ("clean", "t2i"): T2I})
    edited = write_per_query(tmp_path, {("clean", "i2t"): i2t, ("clean", "t2i"): T2I})  # no results.json there
    with gzip.open(edited, "rb") as src, gzip.open(run / "per_query.csv.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    rehash(run)
    return run


def test_infinite_per_query_cells_are_refused_even_with_the_file_hash_updated(tmp_path):
    # two inf cells: their mean is inf, and so was the old tolerance 1e-5 * mean(|p|), so inf "agreed" with 100
    run = _edited(tmp_path, [float("inf"), 0.0, float("inf")])
    with pytest.raises(VlbenchError) as err:
        load_run(run)
    assert "rsum" in err.value.message and "infinite" in err.value.message and "i2t0" in err.value.message


def test_finite_per_query_cells_whose_mean_overflows_are_refused(tmp_path):
    run = _edited(tmp_path, [1.7e308, 1.7e308, 1.7e308])
    with pytest.raises(VlbenchError) as err:
        load_run(run)
    assert "does not hold the values the run reported" in err.value.message


def test_intact_per_query_cells_are_read(tmp_path):
    run = _edited(tmp_path, I2T)
    data = load_run(run)
    assert data.tables[("clean", "t2i")].columns["rsum"].tolist() == T2I
