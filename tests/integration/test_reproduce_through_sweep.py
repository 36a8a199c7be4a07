"""``vlbench reproduce`` runs its grid through the sweep: a run that fails (a broken checkpoint) does not stop
the others, the tables are written from what finished, the command names the failed runs and their logs and
exits non-zero, and the same command after the fix runs only the failed runs."""

from __future__ import annotations

import json
import shutil

from vlbench.cli import main
from vlbench.studies.hendriksen2024.reproduce import run as H


def test_a_failed_run_of_a_reproduction_fails_alone_and_the_rerun_runs_only_it(tmp_path, folder_manifest,
                                                                                 colour_models, tiny_models, capsys):
    vec, rel = colour_models
    broken = shutil.copytree(tiny_models("clip", 0), tmp_path / "broken-clip")
    weights = (broken / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(b"not a checkpoint")
    args = ["reproduce", "hendriksen2024", "--out", str(tmp_path / "r"), "--perturb", "distraction", "--relevance",
            rel, "--bootstrap", "5", "--cache-dir", str(tmp_path / "cache"), "--retries", "1"]
    for key in H.MODELS:
        args += ["--model", f"{key}=" + (f"clip:{broken}" if key == "clip" else vec)]
    for key in H.DATASETS:
        args += ["--dataset", f"{key}=custom:{folder_manifest}"]
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "reproduce: 4 run(s) failed" in err and "hendriksen2024-clip-coco" in err
    assert str(tmp_path / "r" / "logs" / "hendriksen2024-clip-coco.log") in err
    log = (tmp_path / "r" / "logs" / "hendriksen2024-clip-coco.log").read_text()
    assert "attempt 2" in log and "Traceback" in log
    comp = json.loads((tmp_path / "r" / "hendriksen2024" / "comparison.json").read_text())
    verdicts = {(r["model"], r["dataset"]): r["verdict"] for r in comp["tables"]["table_5_2"]}
    assert verdicts[("clip", "coco")] == "not run" and verdicts[("align", "coco")] != "not run"
    finished = {p.parent.name: p.read_bytes() for p in (tmp_path / "r" / "runs").glob("*/results.json")}
    assert len(finished) == 12 and not any(name.startswith("hendriksen2024-clip-") for name in finished)

    (broken / "model.safetensors").write_bytes(weights)  # the fix
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "16 run(s): 12 already finished, 4 to run" in err
    after = {p.parent.name: p.read_bytes() for p in (tmp_path / "r" / "runs").glob("*/results.json")}
    assert len(after) == 16
    assert {name: after[name] for name in finished} == finished  # the 12 finished before are reused untouched
    comp = json.loads((tmp_path / "r" / "hendriksen2024" / "comparison.json").read_text())
    assert comp["counts"]["table_5_2"]["not run"] == 0
