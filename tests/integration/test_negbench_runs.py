"""NegBench in real runs on its released CSV layout (tests/fixtures/negbench), a tiny random-weight CLIP loaded the way
a hub id is: `--task negbench-mcq` (overall and per question type) and `--dataset negbench-coco` (text-to-image
recall, the paper's retrieval score) equal a plain-NumPy recomputation from the model's own vectors, exact ties
included; `vlbench check` on the MCQ run says the tiny model has no published row, and the same run named as
OpenAI's ViT-B/32 with the repository's totals passes and names the tie rule as a difference."""

from __future__ import annotations

import ast
import csv
import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import vlbench
from vlbench.cli import main
from vlbench.published import check_run
from vlbench.results import RunRecord, records_hash, seal

FIXTURE = Path(__file__).parents[1] / "fixtures" / "negbench"
MCQ = {"coco": "COCO_val_mcq_llama3.1_rephrased.csv", "voc2007": "VOC2007_mcq_llama3.1_rephrased.csv"}
NEGATED = "COCO_val_negated_retrieval_llama3.1_rephrased_affneg_true.csv"
TYPES = {"positive": "affirmation", "negative": "negation", "hybrid": "hybrid"}


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _name(path: str) -> str:
    return path.rsplit("/", 1)[1]


def _data(tmp_path: Path, same=()) -> tuple[Path, Path]:
    """<tmp>/data/negbench/ with the fixture's files, and one random image per file name (the names in ``same``
    get the first one's pixels: identical images, an exact tie for any model)."""
    from PIL import Image

    root = tmp_path / "data" / "negbench"
    root.mkdir(parents=True)
    for f in FIXTURE.glob("*.csv"):
        shutil.copy(f, root / f.name)
    names = sorted({_name(r["image_path"]) for f in MCQ.values() for r in _rows(FIXTURE / f)}
                   | {_name(r["filepath"]) for r in _rows(FIXTURE / NEGATED)})
    images = tmp_path / "images"
    images.mkdir()
    for k, name in enumerate(names):
        seed = names.index(same[0]) if name in same else k
        pixels = np.random.default_rng(seed).integers(0, 256, (24, 20, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(images / name)
    return tmp_path / "data", images


def _encoder(spec):
    import torch

    from vlbench.encoding.encode import load_image
    from vlbench.models.adapter import load_model

    adapter = load_model(spec, device="cpu")

    def unit(v):
        v = np.asarray(v.float())[0].astype(np.float64)
        return v / np.linalg.norm(v)

    return (lambda p: unit(adapter.encode_images(torch.stack([adapter.preprocess(load_image(p))]))),
            lambda t: unit(adapter.encode_texts([t])))


@pytest.fixture(scope="module")
def mcq_run(tiny_models, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("negbench-mcq")
    data, images = _data(tmp)
    spec = f"clip:{tiny_models('clip')}"
    out = tmp / "run"
    assert main(["run", "--task", "negbench-mcq", "--model", spec, "--data-dir", str(data), "--images-dir",
                 str(images), "--out", str(out), "--quiet", "--num-workers", "0", "--no-cache"]) == 0
    return spec, images, out


def test_a_mcq_run_equals_a_numpy_recomputation_overall_and_per_type(mcq_run):
    spec, images, out = mcq_run
    doc = json.loads((out / "results.json").read_text())
    assert list(doc["conditions"]) == ["task:negbench-mcq:coco", "task:negbench-mcq:voc2007"]
    assert [s["metric"] for s in doc["task"]["scores"]] == ["accuracy", "affirmation_accuracy", "negation_accuracy",
                                                            "hybrid_accuracy"]
    image, text = _encoder(spec)
    with gzip.open(out / "per_item.csv.gz", "rt") as fh:
        per_item = {r["item_id"]: r for r in csv.DictReader(fh)}
    for piece, file in MCQ.items():
        right, kinds = [], []
        for n, row in enumerate(_rows(FIXTURE / file), start=1):
            v = image(images / _name(row["image_path"]))
            s = [float(text(row[f"caption_{k}"]) @ v) for k in range(4)]
            assert json.loads(per_item[f"{piece}:{n}"]["scores"]) == pytest.approx(s, abs=1e-5)
            c = int(row["correct_answer"])
            right.append(all(s[c] > s[k] for k in range(4) if k != c))  # strict: a tie is a miss
            kinds.append(TYPES[row["correct_answer_template"]])
        got = {r["metric"]: r for r in doc["results"] if r["condition"] == f"task:negbench-mcq:{piece}"}
        assert got["accuracy"]["value"] == pytest.approx(100 * np.mean(right)) and got["accuracy"]["n"] == len(right)
        assert got["chance"]["value"] == 25.0
        for t in sorted(set(kinds)):
            mine = [ok for ok, k in zip(right, kinds) if k == t]
            assert got[f"{t}_accuracy"]["value"] == pytest.approx(100 * np.mean(mine)), (piece, t)
            assert got[f"{t}_accuracy"]["n"] == len(mine)


def test_check_on_the_tiny_model_says_none_published_and_as_the_paper_model_compares(mcq_run, tmp_path, capsys):
    _, _, out = mcq_run
    report = check_run(out)
    assert report.status == "none" and "no published scores for model" in report.reason
    named = tmp_path / "named"
    shutil.copytree(out, named)
    path = named / "results.json"
    doc = json.loads(path.read_text())
    published = {"task:negbench-mcq:coco": 39.30, "task:negbench-mcq:voc2007": 38.72}
    for r in doc["results"]:
        if r["metric"] == "accuracy" and r["condition"] in published:
            r["value"] = published[r["condition"]] + 0.4
    doc["results_hash"] = records_hash(doc["results"])
    doc["model"]["spec"] = "openclip:ViT-B-32/openai"
    path.write_text(json.dumps(seal(doc), indent=1))
    assert RunRecord.load(named).sealed
    report = check_run(named)
    assert report.status == "pass", report.format()
    facts = {f.fact: f.status for f in report.rows[0].facts}
    assert facts["implementation"] == "differs" and facts["tie_rule"] == "differs"  # transformers, strict ties
    capsys.readouterr()
    assert main(["check", str(named)]) == 0
    text = capsys.readouterr().out
    assert "task:negbench-mcq:coco" in text and "results/mcq/1_baseline_total.csv" in text


def _ranks(scores: np.ndarray) -> np.ndarray:
    """1-based rank of every candidate: higher score first, a tie to the lower index (the suite's tie rule)."""
    n = scores.shape[1]
    out = np.empty(scores.shape, dtype=np.int64)
    for q, row in enumerate(scores):
        for c in range(n):
            out[q, c] = 1 + int(np.sum(row > row[c])) + int(np.sum((row == row[c]) & (np.arange(n) < c)))
    return out


def test_negated_retrieval_recall_equals_a_numpy_recomputation_with_an_exact_tie(tiny_models, tmp_path):
    rows = _rows(FIXTURE / NEGATED)
    names = [_name(r["filepath"]) for r in rows]
    data, images = _data(tmp_path, same=(names[1], names[3]))  # image 4 has image 2's pixels: its captions tie
    spec = f"clip:{tiny_models('clip')}"
    res = vlbench.run(model=spec, dataset=f"negbench-coco?images={images}", data_dir=str(data),
                      out=str(tmp_path / "run"), quiet=True, num_workers=0, validity="off", n_boot=20,
                      no_cache=True, k=(1, 2, 3))
    image, text = _encoder(spec)
    img = np.stack([image(images / n) for n in names])
    caps = [(i, c) for i, r in enumerate(rows) for c in ast.literal_eval(r["captions"])]
    txt = np.stack([text(c) for _, c in caps])
    assert np.array_equal(img[1], img[3])
    ranks = _ranks(txt @ img.T)
    got = {v.key.k: v.value for v in res.record.values
           if v.condition == "clean" and v.key.metric == "recall" and v.key.direction == "t2i"}
    for k in (1, 2, 3):
        want = 100.0 * np.mean([ranks[j, i] <= k for j, (i, _) in enumerate(caps)])
        assert got[k] == pytest.approx(want), k
    # the tie: image 4's captions never rank it above image 2 (lower index first)
    assert all(ranks[j, 3] > ranks[j, 1] for j, (i, _) in enumerate(caps) if i == 3)
    assert res.record.dataset.fields["source"]["annotations"].endswith(NEGATED)


def test_the_leaderboard_shows_each_question_type(mcq_run, tmp_path):
    _, _, out = mcq_run
    runs = tmp_path / "runs"
    shutil.copytree(out, runs / "mcq")
    assert main(["leaderboard", "build", str(runs), "--out", str(tmp_path / "lb"), "--no-plots"]) == 0
    with open(tmp_path / "lb" / "choice_tasks.csv", newline="") as fh:
        board = {r["set"]: r for r in csv.DictReader(fh) if r["task"] == "negbench-mcq"}
    doc = json.loads((out / "results.json").read_text())
    for r in doc["results"]:
        if r["metric"].endswith("_accuracy") and not r["metric"].startswith("blind"):
            row = board[r["condition"].removeprefix("task:")]
            assert float(row[r["metric"]]) == pytest.approx(r["value"]), r["metric"]


def test_the_blind_baseline_is_reported_per_question_type(tiny_models, blind_data_dir, tmp_path):
    from vlbench.tasks.blind import coco_caption_lm, normalized

    root = blind_data_dir / "negbench"
    root.mkdir()
    shutil.copy(FIXTURE / MCQ["coco"], root / MCQ["coco"])
    _, images = _data(tmp_path / "img")
    out = tmp_path / "run"
    assert main(["run", "--task", "negbench-mcq", "--model", f"clip:{tiny_models('clip')}", "--dataset",
                 "negbench-mcq:coco", "--data-dir", str(blind_data_dir), "--images-dir", str(images), "--out",
                 str(out), "--quiet", "--num-workers", "0", "--no-cache"]) == 0
    rows = _rows(FIXTURE / MCQ["coco"])
    texts = {normalized(r[f"caption_{k}"]) for r in rows for k in range(4)}
    lm, _ = coco_caption_lm(blind_data_dir, set(), texts)
    right = {}
    for r in rows:
        s = [lm.score(r[f"caption_{k}"]) for k in range(4)]
        c = int(r["correct_answer"])
        right.setdefault(TYPES[r["correct_answer_template"]], []).append(all(s[c] > s[k] for k in range(4) if k != c))
    got = {x["metric"]: x["value"] for x in json.loads((out / "results.json").read_text())["results"]}
    assert got["blind_accuracy"] == pytest.approx(100 * np.mean([v for vs in right.values() for v in vs]))
    for t, oks in right.items():
        assert got[f"blind_{t}_accuracy"] == pytest.approx(100 * np.mean(oks)), t


def test_per_type_accuracy_under_conditions_recounts_from_the_per_item_records(tiny_models, tmp_path):
    data, images = _data(tmp_path)
    out = tmp_path / "run"
    assert main(["run", "--task", "negbench-mcq", "--model", f"clip:{tiny_models('clip')}", "--dataset",
                 "negbench-mcq:coco", "--data-dir", str(data), "--images-dir", str(images), "--out", str(out),
                 "--quiet", "--num-workers", "0", "--no-cache", "--perturb", "char-swap", "--perturb-images",
                 "gaussian_noise:1"]) == 0
    kind = {f"coco:{n}": TYPES[r["correct_answer_template"]]
            for n, r in enumerate(_rows(FIXTURE / MCQ["coco"]), start=1)}
    with gzip.open(out / "per_item.csv.gz", "rt") as fh:
        records = list(csv.DictReader(fh))
    doc = json.loads((out / "results.json").read_text())
    conds = {r["condition"] for r in doc["results"]}
    assert conds == {"task:negbench-mcq:coco", "task:negbench-mcq:coco@char-swap",
                     "task:negbench-mcq:coco@img:gaussian_noise:1"}
    for cond in conds:
        got = {r["metric"]: r["value"] for r in doc["results"] if r["condition"] == cond}
        mine = [r for r in records if r["condition"] == cond]
        assert len(mine) == 8
        for t in ("affirmation", "negation", "hybrid"):
            oks = [int(r["correct"]) for r in mine if kind[r["item_id"]] == t]
            assert got[f"{t}_accuracy"] == pytest.approx(100 * np.mean(oks)), (cond, t)
