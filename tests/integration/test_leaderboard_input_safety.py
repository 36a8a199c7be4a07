"""Leaderboard input and output that an attacker (or an accident) controls: results files that
are FIFOs, devices or huge; output folders holding links to elsewhere."""

from __future__ import annotations

import os
import threading

import pytest

from support.runs import counting_run


@pytest.fixture(scope="module")
def one_run(tmp_path_factory, counting_plugin):
    return counting_run(tmp_path_factory.mktemp("safety"), 6, perturb="char-swap,distraction-true")


def _build(args, capsys):
    from vlbench.cli import main

    rc = main(["leaderboard", "build", *map(str, args), "--no-plots"])
    return rc, capsys.readouterr().err


def _with_timeout(fn, seconds=20):
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("v", fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the build hung"
    return box["v"]


def test_results_json_linked_to_dev_zero_is_skipped_unread(one_run, tmp_path, capsys):
    bad = tmp_path / "in" / "zero"
    bad.mkdir(parents=True)
    (bad / "results.json").symlink_to("/dev/zero")
    rc, err = _with_timeout(lambda: _build([one_run, tmp_path / "in", "--out", tmp_path / "lb"], capsys))
    assert rc == 0
    assert f"skipped {bad / 'results.json'}" in err and "is a device" in err and "/dev/zero" in err


def test_results_json_fifo_is_skipped_without_blocking(one_run, tmp_path, capsys):
    bad = tmp_path / "in" / "fifo"
    bad.mkdir(parents=True)
    os.mkfifo(bad / "results.json")
    rc, err = _with_timeout(lambda: _build([one_run, tmp_path / "in", "--out", tmp_path / "lb"], capsys))
    assert rc == 0 and "named pipe (FIFO)" in err
    rc, err = _with_timeout(lambda: _build([one_run, bad / "results.json", "--out", tmp_path / "lb2"], capsys))
    assert rc == 0 and "named pipe (FIFO)" in err


def test_oversized_results_file_is_refused_unread(one_run, tmp_path, capsys, monkeypatch):
    from vlbench.leaderboards import store

    monkeypatch.setattr(store, "MAX_RESULTS_BYTES", 1000)
    rc, err = _build([one_run, "--out", tmp_path / "lb"], capsys)
    assert rc == 2 and "larger than any results file" in err


@pytest.mark.parametrize("command", ["build", "publish"])
def test_symlinked_subfolder_in_out_is_refused_and_outside_untouched(one_run, tmp_path, capsys, command):
    from vlbench.cli import main

    outside = tmp_path / "outside"
    outside.mkdir()
    keep = outside / "precious.txt"
    keep.write_text("do not touch")
    out = tmp_path / "lb"
    args = ["leaderboard", "build", str(one_run), "--out", str(out)] if command == "build" else \
        ["leaderboard", "publish", "--from", str(tmp_path / "board"), "--out", str(out)]
    if command == "publish":
        assert main(["leaderboard", "build", str(one_run), "--out", str(tmp_path / "board")]) == 0
    assert main(args) == 0  # a first, clean write
    sub = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert sub, "expected sub-folders in the output"
    victim = out / sub[0]
    for f in victim.iterdir():
        (outside / f.name).write_bytes(f.read_bytes())
    import shutil

    shutil.rmtree(victim)
    victim.symlink_to(outside, target_is_directory=True)
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert ("is a symbolic link" in err or "holds a symbolic link" in err) and str(victim) in err
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before
    assert keep.read_text() == "do not touch"
