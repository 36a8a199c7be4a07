"""Issue #12: results inputs that are not regular files are refused by name without being read, and a
leaderboard build never writes or deletes through a symbolic link inside its output folder."""

from __future__ import annotations

import json
import os
import shutil
import threading

import pytest

from conftest import TESTS

RUN = TESTS / "fixtures" / "legacy_v1" / "runs" / "16-flickr-mini"  # clean + two perturbations: plots too


def _refused(path, why):
    from vlbench.leaderboards.store import UnreadableResults, read_run

    with pytest.raises(UnreadableResults) as exc:
        read_run(path)
    assert str(path) in exc.value.path and why in exc.value.reason


def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "results.json"
    os.mkfifo(fifo)
    t = threading.Thread(target=_refused, args=(fifo, "not a regular file"), daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "reading a FIFO blocked"


def test_device_symlink_directory_and_huge_file_are_refused(tmp_path, monkeypatch):
    from vlbench.leaderboards import store

    (tmp_path / "zero.json").symlink_to("/dev/zero")
    _refused(tmp_path / "zero.json", "not a regular file")
    (tmp_path / "dir.json").mkdir()
    _refused(tmp_path / "dir.json", "is a folder")
    big = tmp_path / "big.json"
    shutil.copy(RUN / "results.json", big)
    monkeypatch.setattr(store, "MAX_RESULTS_BYTES", 1000)
    _refused(big, "over the 1000-byte limit")
    monkeypatch.undo()
    assert store.read_run(big).run_id == json.loads(big.read_text())["run_id"]  # the same file under the cap


def test_build_skips_a_fifo_results_file_by_name(tmp_path):
    from vlbench.leaderboards import build_leaderboard

    shutil.copytree(RUN, tmp_path / "in" / "good")
    (tmp_path / "in" / "pipe").mkdir()
    os.mkfifo(tmp_path / "in" / "pipe" / "results.json")
    warned = []
    build_leaderboard([tmp_path / "in"], tmp_path / "lb", plots=False, warn=warned.append)
    assert any(str(tmp_path / "in" / "pipe" / "results.json") in w and "regular file" in w for w in warned)
    assert (tmp_path / "lb" / "table_5_2.csv").read_text().count("\n") == 2  # header + the good run


def test_build_never_writes_or_deletes_through_a_symlinked_subfolder(tmp_path):
    from vlbench.errors import VlbenchError
    from vlbench.leaderboards import build_leaderboard

    shutil.copytree(RUN, tmp_path / "in" / "good")
    out = tmp_path / "lb"
    build_leaderboard([tmp_path / "in"], out)  # with plots: files under out/plots
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / next(p.name for p in (out / "plots").iterdir())
    victim.write_bytes(b"keep me")
    shutil.rmtree(out / "plots")
    (out / "plots").symlink_to(outside, target_is_directory=True)
    with pytest.raises(VlbenchError, match="symbolic link"):
        build_leaderboard([tmp_path / "in"], out)
    build_leaderboard([tmp_path / "in"], out, plots=False)  # the old plots are stale: not deleted through the link
    assert victim.read_bytes() == b"keep me" and sorted(p.name for p in outside.iterdir()) == [victim.name]
