"""Which runs a leaderboard takes: one dataset per content hash, stray / limited / unfinished
runs left out and named, --select, --run-set, --latest, and a ranking over the datasets the ranked models share."""

from __future__ import annotations

import csv
import io

import pytest
from support.synthetic_runs import synth_run

from vlbench.errors import OptionError


def _polluted(root):
    """Two models on one dataset under two names, a stray exploratory run, a --limit run, a crashed run."""
    synth_run(root / "a-mini", model=0, dataset="custom:mini.jsonl", perturb=["char-swap"])
    synth_run(root / "b-mini", model=1, dataset="custom:mini-copy.jsonl", perturb=["char-swap"])
    synth_run(root / "a-explore", model=0, dataset="custom:explore.jsonl", dataset_hash="e" * 64,
              created="2026-11-21T10:00:00")
    synth_run(root / "b-limit", model=1, dataset="custom:mini.jsonl", dataset_hash="f" * 64, limit=5,
              created="2026-11-22T10:00:00")
    (root / "c-crashed").mkdir()
    (root / "c-crashed" / "table.md").write_text("| half a table |\n")
    return root


def _rows(built, name):
    return list(csv.DictReader(io.StringIO(built.files[f"{name}.csv"].decode())))


def test_a_polluted_folder_gives_one_dataset_and_names_what_it_left_out(tmp_path, capsys):
    """The must-show case: one dataset (two names, one hash), the stray and the limited runs left out and named,
    the unfinished folder named, the ranking over the dataset both models ran."""
    from vlbench.cli import main
    from vlbench.leaderboards.build import make
    from vlbench.leaderboards.paper.ranking import ranking_table

    runs = _polluted(tmp_path / "runs")
    warned = []
    built = make([runs], plots=False, warn=warned.append)
    clean = _rows(built, "clean_retrieval")
    assert len(clean) == 2 and {r["dataset"] for r in clean} == {"custom:mini-copy.jsonl"}  # one dataset
    assert {r["dataset_hash"] for r in clean} == {"d" * 64}
    left = {x["folder"].rsplit("/", 1)[-1]: x["reason"] for x in built.manifest["left_out"]}
    assert set(left) == {"a-explore", "b-limit", "c-crashed"}
    assert left["a-explore"].startswith("stray") and left["b-limit"].startswith("limited: --limit 5")
    assert left["c-crashed"].startswith("not finished")
    (conflict,) = built.manifest["dataset_names"]
    assert conflict["hash"] == "d" * 64 and set(conflict["names"]) == {"custom:mini.jsonl", "custom:mini-copy.jsonl"}
    assert any("2 names" in w for w in warned)
    # no column or row of the stray or limited dataset anywhere
    assert list(_rows(built, "rsum_per_perturbation_total")[0])[4:-1] == ["custom:mini-copy.jsonl"]
    assert all("explore" not in r["dataset"] for r in _rows(built, "values"))
    rank = ranking_table(built.tables["clean_retrieval"], built.tables["rsum_changes"])
    assert [(r[0], r[1]) for r in rank.rows] == [(1, "clip:model-1"), (2, "clip:model-0")]
    assert all(r[-1] == "" for r in rank.rows)  # both ranked over the common dataset, nothing partial
    # the CLI prints what it took and what it left out
    assert main(["leaderboard", "build", str(runs), "--out", str(tmp_path / "lb"), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "took 2 run(s)" in out and "3 left out" in out
    for name in ("a-explore", "b-limit", "c-crashed"):
        assert any(line.startswith("  left out") and name in line for line in out.splitlines()), name


def test_allow_limited_and_keep_stray_take_them(tmp_path):
    from vlbench.leaderboards.build import make
    from vlbench.leaderboards.runset import Choice

    runs = _polluted(tmp_path / "runs")
    built = make([runs], plots=False, warn=lambda m: None, choice=Choice(allow_limited=True, keep_stray=True))
    datasets = {r["dataset"] for r in _rows(built, "clean_retrieval")}
    assert datasets == {"custom:mini-copy.jsonl", "custom:explore.jsonl", "custom:mini.jsonl [first 5 images]"}
    assert [x["folder"].rsplit("/", 1)[-1] for x in built.manifest["left_out"]] == ["c-crashed"]


def test_a_partial_model_is_ranked_separately_and_marked(tmp_path):
    from vlbench.leaderboards.build import make
    from vlbench.leaderboards.paper.ranking import ranking_table

    for m in (0, 1):
        for ds, h in (("custom:x.jsonl", "a" * 64), ("custom:y.jsonl", "b" * 64)):
            synth_run(tmp_path / f"m{m}-{ds[7]}", model=m, dataset=ds, dataset_hash=h)
    synth_run(tmp_path / "m2-x", model=2, dataset="custom:x.jsonl", dataset_hash="a" * 64)  # best, but x only
    built = make([tmp_path], plots=False, warn=lambda m: None)
    rank = ranking_table(built.tables["clean_retrieval"], built.tables["rsum_changes"])
    assert [(r[0], r[1]) for r in rank.rows] == [(1, "clip:model-1"), (2, "clip:model-0"), (None, "clip:model-2")]
    assert rank.rows[2][-1].startswith("partial coverage: no clean RSUM on custom:y.jsonl; ranked separately")


def test_select_run_set_and_latest(tmp_path):
    from vlbench.leaderboards.build import make
    from vlbench.leaderboards.runset import Choice

    synth_run(tmp_path / "final-a", model=0)
    synth_run(tmp_path / "final-b", model=1)
    synth_run(tmp_path / "try-b", model=1, created="2026-11-25T10:00:00", clean_r1=10.0)  # newer, worse
    got = make([tmp_path], plots=False, warn=lambda m: None, choice=Choice(select=("*final-*",)))
    assert sorted(r["folder"].rsplit("/", 1)[-1] for r in got.manifest["runs"]) == ["final-a", "final-b"]
    assert got.manifest["left_out"][0]["reason"].startswith("not matched by --select")
    latest = make([tmp_path], plots=False, warn=lambda m: None, choice=Choice(latest=True))
    assert sorted(r["folder"].rsplit("/", 1)[-1] for r in latest.manifest["runs"]) == ["final-a", "try-b"]
    assert "--latest took" in latest.manifest["left_out"][0]["reason"]
    listing = tmp_path / "set.txt"
    listing.write_text(f"# the paper's runs\n{tmp_path / 'final-a'}\nrun-final-b\n")
    chosen = make([tmp_path], plots=False, warn=lambda m: None, choice=Choice(run_set=str(listing)))
    assert sorted(r["folder"].rsplit("/", 1)[-1] for r in chosen.manifest["runs"]) == ["final-a", "final-b"]
    listing.write_text("run-nowhere\n")
    with pytest.raises(OptionError) as err:
        make([tmp_path], plots=False, warn=lambda m: None, choice=Choice(run_set=str(listing)))
    assert err.value.option == "--run-set" and "run-nowhere" in str(err.value)


def test_publish_names_the_runs_left_out(tmp_path):
    from vlbench.leaderboards import publish_leaderboard

    runs = _polluted(tmp_path / "runs")
    publish_leaderboard(tmp_path / "site", paths=[runs], plots=False, warn=lambda m: None)
    readme = (tmp_path / "site" / "README.md").read_text()
    assert "## Runs left out" in readme and "b-limit: limited: --limit 5" in readme and "a-explore: stray" in readme
    assert (tmp_path / "site" / "clean_retrieval" / "clean_retrieval.tex").is_file()
    assert (tmp_path / "site" / "leaderboard.tex").is_file()


def test_no_shared_dataset_means_nothing_is_stray(tmp_path):
    """Two models on two different datasets: no common ground, so neither is stray; both are marked partial."""
    from vlbench.leaderboards.build import make
    from vlbench.leaderboards.paper.ranking import ranking_table

    synth_run(tmp_path / "a", model=0, dataset="custom:x.jsonl", dataset_hash="a" * 64)
    synth_run(tmp_path / "b", model=1, dataset="custom:y.jsonl", dataset_hash="b" * 64)
    built = make([tmp_path], plots=False, warn=lambda m: None)
    assert "left_out" not in built.manifest and len(built.manifest["runs"]) == 2
    rank = ranking_table(built.tables["clean_retrieval"], built.tables["rsum_changes"])
    assert all(r[0] is None and r[-1].startswith("partial coverage") for r in rank.rows)


def test_a_run_set_that_is_a_device_is_refused_unread(tmp_path):
    """--run-set /dev/zero: refused by its kind before reading (it never ends: the old reader ran out of memory)."""
    from vlbench.leaderboards.runset import Choice, choose

    with pytest.raises(OptionError) as err:
        choose([], Choice(run_set="/dev/zero"))
    assert err.value.option == "--run-set" and "not a regular file" in str(err.value)


def test_a_run_set_over_the_size_bound_is_refused_unread(tmp_path, monkeypatch):
    from vlbench.leaderboards import runset

    big = tmp_path / "big.txt"
    big.write_text("x\n" * 600)
    monkeypatch.setattr(runset, "MAX_RUN_SET_BYTES", 1000)
    with pytest.raises(OptionError) as err:
        runset.choose([], runset.Choice(run_set=str(big)))
    assert err.value.option == "--run-set" and "1000-byte limit" in str(err.value)


def test_a_run_set_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    """--run-set a FIFO: refused by its kind. A writer thread stands by, so that a reader that opens the FIFO (the
    old code) gets an empty run set and the test fails instead of hanging."""
    import os
    import threading

    from vlbench.leaderboards.runset import Choice, choose

    fifo = tmp_path / "runs.fifo"
    os.mkfifo(fifo)

    def writer():
        with open(fifo, "w"):
            pass

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        with pytest.raises(OptionError) as err:
            choose([], Choice(run_set=str(fifo)))
        assert err.value.option == "--run-set" and "not a regular file" in str(err.value)
    finally:
        # let the writer go, if nothing opened it; the read end stays open until the writer is through (a reader
        # closed at once left the writer's open() waiting, and this join waited its whole 5 s in most runs)
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            t.join(5)
        finally:
            os.close(reader)
    assert not t.is_alive()
