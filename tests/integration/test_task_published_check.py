"""`vlbench check` on a real task run: a tiny CLIP's Winoground run (a fixture in the released layout) whose
scores are set to the Winoground paper's CLIP ViT-B/32 row and whose model is named as that model, re-hashed and
re-sealed through vlbench's own API (results_hash over the value records, record_hash over the record), passes;
3 points off fails and names the entry's protocol facts. `vlbench run --task` prints the check after its table
when the model has published scores (a test-only entry for the tiny model)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vlbench.cli import main
from vlbench.published import check_run, task_scores
from vlbench.results import RunRecord, records_hash, seal

SPEC = "clip:openai/clip-vit-base-patch32"
PAPER = {"text_score": 30.75, "image_score": 10.50, "accuracy": 8.00}


def _image(path: Path, k: int) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.random.default_rng(k).integers(0, 256, (16, 20, 3), dtype=np.uint8)).save(path)


@pytest.fixture
def winoground_dir(tmp_path):
    root = tmp_path / "data" / "winoground"
    pairs = [("a dog chases a cat", "a cat chases a dog"), ("a man above a boat", "a boat above a man"),
             ("a big tree and a small house", "a small tree and a big house")]
    lines = []
    for k, (c0, c1) in enumerate(pairs):
        lines.append(json.dumps({"id": k, "image_0": f"ex_{k}_img_0", "image_1": f"ex_{k}_img_1", "caption_0": c0,
                                 "caption_1": c1, "tag": "Object", "secondary_tag": "", "num_main_preds": 1,
                                 "collapsed_tag": "Object"}))
        for j in (0, 1):
            _image(root / "images" / f"ex_{k}_img_{j}.png", 10 * k + j)
    (root / "examples.jsonl").write_text("\n".join(lines) + "\n")
    return root.parent


def _run(tiny_models, data_dir, out: Path, *more) -> Path:
    spec = f"clip:{tiny_models('clip')}"
    assert main(["run", "--task", "winoground", "--model", spec, "--data-dir", str(data_dir), "--out", str(out),
                 "--num-workers", "0", "--no-cache", *more]) == 0
    return out


def _as_paper_model(out: Path, shift: float) -> Path:
    """The run's Winoground scores set to the paper's (plus ``shift``) and its model named as OpenAI's ViT-B/32,
    the value hash and the record seal recomputed as vlbench writes them, so both verify on reading."""
    path = out / "results.json"
    doc = json.loads(path.read_text())
    for r in doc["results"]:
        if r["condition"] == "task:winoground" and r["metric"] in PAPER:
            r["value"] = PAPER[r["metric"]] + shift
    doc["results_hash"] = records_hash(doc["results"])
    doc["model"]["spec"] = SPEC
    path.write_text(json.dumps(seal(doc), indent=1))
    rec = RunRecord.load(out)  # both hashes verify: an unsealed edit would be refused here
    assert rec.sealed and rec.value("task:winoground", "i2t", "text_score") == PAPER["text_score"] + shift
    return out


def test_a_tiny_model_task_run_set_to_the_paper_passes_and_three_points_off_fails(tiny_models, winoground_dir,
                                                                                   tmp_path, capsys):
    ok = _as_paper_model(_run(tiny_models, winoground_dir, tmp_path / "ok", "--quiet"), 0.0)
    report = check_run(ok)
    assert report.status == "pass" and report.dataset == "winoground" and main(["check", str(ok)]) == 0
    facts = {f.fact: f.status for f in report.rows[0].facts}
    assert facts["set_version"] == "differs"  # 3 items of a fixture, not the released 400

    off = _as_paper_model(_run(tiny_models, winoground_dir, tmp_path / "off", "--quiet"), -3.0)
    capsys.readouterr()
    assert main(["check", str(off)]) == 1
    text = capsys.readouterr().out
    assert "OFF" in text and "verdict: off" in text
    for said in ("the item files (the released version, its item count)", "winoground: 3 items",
                 "the code that ran the model", "published: not stated", "this run: vlbench.hf.clip",
                 "numeric precision", "how a tie between the right and a wrong option is counted"):
        assert said in text, said


def test_vlbench_run_task_prints_the_check_when_scores_are_published(tiny_models, winoground_dir, tmp_path, capsys,
                                                                     monkeypatch):
    spec = f"clip:{tiny_models('clip')}"
    entry = task_scores.TaskEntry(
        "test-only-tiny-winoground", "winoground", "a tiny random CLIP (test-only entry)", (spec,),
        {"task:winoground": {"scores": {"accuracy": 0.0}, "n_items": 3, "sha256": []}},
        {"kind": "test", "citation": "this test", "table": "none", "url": "https://example.invalid",
         "read_in": "this test"}, {}, {"adapter": None, "preprocessing_adapter": None, "precision": None,
                                       "strict": True})
    monkeypatch.setattr(task_scores, "task_entries", lambda: (entry,))
    _run(tiny_models, winoground_dir, tmp_path / "printed")
    out = capsys.readouterr().out
    assert "published numbers check: " in out and "task:winoground" in out and "this test" in out
    assert out.index("group %") < out.index("published numbers check")  # after the run's table
