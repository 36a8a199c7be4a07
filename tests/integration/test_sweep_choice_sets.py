"""Choice sets in a sweep: a plan with a choice task (Winoground on a tiny fixture in its released layout, a tiny
CLIP) beside a retrieval dataset runs through `vlbench sweep`; the task run's results are the ones `vlbench run
--task` gives, the study's run set and leaderboard list it, a second sweep skips it, and a plan that puts it on
another device is another run, never the finished one."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support.data import write_manifest

from vlbench.cli import main
from vlbench.results import RunRecord

pytestmark = pytest.mark.slow


def _winoground(root: Path) -> None:
    from PIL import Image

    pairs = [("a dog chases a cat", "a cat chases a dog"), ("the red cup is on the blue plate",
             "the blue cup is on the red plate"), ("a man above a boat", "a boat above a man"),
             ("a big tree and a small house", "a small tree and a big house")]
    wino = root / "winoground"
    (wino / "images").mkdir(parents=True)
    lines = []
    for k, (c0, c1) in enumerate(pairs):
        lines.append(json.dumps({"id": k, "image_0": f"ex_{k}_img_0", "image_1": f"ex_{k}_img_1", "caption_0": c0,
                                 "caption_1": c1, "tag": "Object", "secondary_tag": "", "num_main_preds": 1,
                                 "collapsed_tag": ("Object", "Relation")[k % 2]}))
        for j in (0, 1):
            pixels = np.random.default_rng(10 * k + j).integers(0, 256, (20, 24, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(wino / "images" / f"ex_{k}_img_{j}.png")
    (wino / "examples.jsonl").write_text("\n".join(lines) + "\n")


@pytest.fixture
def study(tmp_path, tiny_models, blind_data_dir):
    _winoground(blind_data_dir)
    manifest = write_manifest(tmp_path / "flickr", 6)
    plan = tmp_path / "plan.toml"
    plan.write_text(f"""
[study]
out = "{tmp_path / 'study'}"

[options]
num-workers = 0
cache-dir = "{tmp_path / 'cache'}"

[models]
tiny = "clip:{tiny_models('clip')}"

[datasets]
flickr = {{ spec = "custom:{manifest}", bootstrap = 20, validity = "off" }}
wino = {{ task = "winoground", data-dir = "{blind_data_dir}" }}
""")
    return {"plan": plan, "study": tmp_path / "study", "data": blind_data_dir, "model": tiny_models("clip"),
            "root": tmp_path}


def _outcomes(study: Path) -> dict:
    return {o["run_id"].split("--")[1]: o for o in json.loads((study / "sweep.json").read_text())["outcomes"]}


def test_a_plan_with_a_choice_task_runs_through_the_sweep_and_is_listed(study, capsys):
    assert main(["sweep", str(study["plan"]), "--workers", "1"]) == 0
    got = _outcomes(study["study"])
    assert {k: o["status"] for k, o in got.items()} == {"flickr": "done", "wino": "done"}
    wino = RunRecord.load(Path(got["wino"]["folder"]))
    assert wino.other["task"]["name"] == "winoground" and wino.model.spec == f"clip:{study['model']}"
    # the numbers are those of the same run made alone with vlbench run --task
    alone = study["root"] / "alone"
    assert main(["run", "--task", "winoground", "--model", f"clip:{study['model']}", "--data-dir", str(study["data"]),
                 "--out", str(alone), "--quiet", "--num-workers", "0", "--model-name", "tiny",
                 "--dataset-name", "wino"]) == 0
    mine = {(v.condition, v.key.metric): v.value for v in wino.values}
    assert mine == {(v.condition, v.key.metric): v.value for v in RunRecord.load(alone).values}
    assert any(m == "accuracy" for _, m in mine)
    listed = (study["study"] / "run_set.txt").read_text()
    assert str(Path(got["wino"]["folder"]).resolve()) in listed
    assert (study["study"] / "leaderboard").is_dir()
    # a second sweep: both runs are finished (the task run's files and record checked) and skipped
    assert main(["sweep", str(study["plan"]), "--workers", "1"]) == 0
    assert {k: o["status"] for k, o in _outcomes(study["study"]).items()} == {"flickr": "skipped", "wino": "skipped"}


def test_a_finished_choice_task_run_is_not_skipped_for_another_device(study):
    from vlbench.sweep.plan import expand, read_plan
    from vlbench.sweep.status import CONFLICT, FINISHED, state_of
    from vlbench.sweep.worker import Task

    assert main(["sweep", str(study["plan"]), "--workers", "1"]) == 0
    task = next(t for t in expand(read_plan(study["plan"]), study["study"]) if "task" in t.kwargs)
    assert state_of(task)[0] == FINISHED
    on_gpu = Task(task.run_id, task.folder, {**task.kwargs, "device": "cuda"}, log=task.log)
    state, why = state_of(on_gpu)
    assert state == CONFLICT and "device 'cpu', not 'cuda'" in why
