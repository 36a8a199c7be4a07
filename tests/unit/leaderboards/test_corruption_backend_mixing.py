"""The leaderboard refuses to table image corruptions made by the reference and the torch backend side by side
(--corrupt-backend), as it refuses mixed geometries, unless --allow-mixed; runs before the backend was recorded
count as reference runs."""

from __future__ import annotations

import json

import pytest

from support.synthetic_runs import synth_run


@pytest.mark.parametrize("older_backend", [None, "reference"])
def test_runs_of_both_backends_are_refused_unless_allowed(tmp_path, capsys, older_backend):
    from vlbench.cli import main

    synth_run(tmp_path / "runs" / "ref", corrupt=["gaussian_noise"], severities=(1,), backend=older_backend,
              created="2026-11-20T10:00:00", run_id="run-ref")
    synth_run(tmp_path / "runs" / "torch", corrupt=["gaussian_noise"], severities=(1,), backend="torch",
              created="2026-11-21T10:00:00", run_id="run-torch")
    rc = main(["leaderboard", "build", str(tmp_path / "runs"), "--out", str(tmp_path / "lb"), "--no-plots"])
    err = capsys.readouterr().err
    assert rc == 2 and "2 different image-corruption backends (--corrupt-backend reference / torch)" in err
    assert f"corruption backend torch: {tmp_path / 'runs' / 'torch'} (run run-torch)" in err
    assert f"corruption backend reference: {tmp_path / 'runs' / 'ref'} (run run-ref)" in err
    rc = main(["leaderboard", "build", str(tmp_path / "runs"), "--out", str(tmp_path / "lb"), "--no-plots",
               "--allow-mixed"])
    assert rc == 0
    rows = (tmp_path / "lb" / "image_corruptions.csv").read_text().splitlines()
    assert rows[1].endswith("run-torch,mixed: images corrupted by the torch backend")
    manifest = json.loads((tmp_path / "lb" / "build_manifest.json").read_text())
    assert {m["what"] for m in manifest["mixed"]} == {"corruption_backend"}


def test_one_backend_builds(tmp_path):
    from vlbench.cli import main

    for m in (0, 1):
        synth_run(tmp_path / "runs" / f"m{m}", model=m, corrupt=["fog"], severities=(2,), backend="torch",
                  run_id=f"run-{m}")
    assert main(["leaderboard", "build", str(tmp_path / "runs"), "--out", str(tmp_path / "lb"), "--no-plots"]) == 0
