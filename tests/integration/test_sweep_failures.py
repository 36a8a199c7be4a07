"""Failure isolation in a sweep: a run whose checkpoint is broken fails alone (retried the stated number of times),
the others finish, the summary names the failed run and its log, the exit status is non-zero, and once the
checkpoint is fixed, running the same command again runs only that run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from support.data import write_manifest

from vlbench.cli import main


def test_one_broken_checkpoint_fails_alone_and_a_rerun_after_the_fix_runs_only_it(tmp_path, tiny_models, capsys):
    good = tiny_models("clip", 0)
    broken = shutil.copytree(good, tmp_path / "broken-clip")
    (broken / "model.safetensors").write_bytes(b"not a checkpoint")
    data = write_manifest(tmp_path / "data", 6)
    plan = tmp_path / "plan.toml"
    plan.write_text(f"""
[options]
n-boot = 20
validity = "off"
num-workers = 0
cache-dir = "{tmp_path / 'cache'}"

[models]
good = "clip:{good}"
broken = "clip:{broken}"

[datasets]
d = "custom:{data}"
""")
    study = tmp_path / "study"
    capsys.readouterr()
    assert main(["sweep", str(plan), "--out", str(study), "--workers", "1", "--retries", "1"]) == 1
    err = capsys.readouterr().err
    outcomes = {o["run_id"].split("--")[0]: o for o in json.loads((study / "sweep.json").read_text())["outcomes"]}
    assert outcomes["good"]["status"] == "done" and (Path(outcomes["good"]["folder"]) / "results.json").is_file()
    failed = outcomes["broken"]
    assert failed["status"] == "failed" and failed["attempts"] == 2 and failed["error"]
    assert f"FAILED {failed['run_id']}" in err and failed["log"] in err
    log = Path(failed["log"]).read_text()
    assert "attempt 1" in log and "attempt 2" in log and "Traceback" in log
    assert not (Path(failed["folder"]) / "results.json").exists()

    shutil.copyfile(good / "model.safetensors", broken / "model.safetensors")  # the fix
    good_record = (Path(outcomes["good"]["folder"]) / "results.json").read_bytes()
    assert main(["sweep", str(plan), "--out", str(study), "--workers", "1"]) == 0
    again = {o["run_id"].split("--")[0]: o for o in json.loads((study / "sweep.json").read_text())["outcomes"]}
    assert again["good"]["status"] == "skipped" and again["broken"]["status"] == "done"
    assert again["broken"]["run_id"] == failed["run_id"]  # the same run: the same id and folder
    assert (Path(outcomes["good"]["folder"]) / "results.json").read_bytes() == good_record
    assert (Path(failed["folder"]) / "results.json").is_file()
