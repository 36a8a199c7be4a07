"""`vlbench run --task order|sugarcrepe`: run folders, accuracies against an independent computation, warm runs."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from vlbench.cli import main
from vlbench.tasks.run import run_task

SHARED_DATA = Path("/work/shared/data")


def _cos_rows(adapter, image_path, candidates):
    """One item alone: its image and every candidate encoded on their own, cosine similarities."""
    import torch

    from vlbench.encoding.encode import load_image

    v = np.asarray(adapter.encode_images(torch.stack([adapter.preprocess(load_image(image_path))])).float())[0]
    t = np.stack([np.asarray(adapter.encode_texts([c]).float())[0] for c in candidates])
    return t @ v / (np.linalg.norm(t, axis=1) * np.linalg.norm(v))


def _per_item(out: Path) -> list[dict]:
    import csv

    with gzip.open(out / "per_item.csv.gz", "rt") as fh:
        return list(csv.DictReader(fh))


def _check_against_independent(res, adapter, items, image_path, cond):
    """Accuracy, every chosen index and every score equal the one-item-at-a-time computation."""
    hits, chosen = [], []
    rows = {r["item_id"]: r for r in _per_item(res.out_dir) if r["condition"] == cond}
    assert len(rows) == len(items)
    for it in items:
        cos = _cos_rows(adapter, image_path(it.image), it.candidates)
        rec = rows[it.item_id]
        assert json.loads(rec["scores"]) == pytest.approx(cos.tolist(), abs=1e-5)
        margin = cos[it.correct] - np.delete(cos, it.correct).max()
        assert abs(margin) > 1e-5  # no near-tie: the comparison below is not decided by rounding
        hits.append(margin > 0)
        chosen.append(int(np.argmax(cos)))
        assert int(rec["chosen"]) == chosen[-1] and int(rec["correct"]) == int(hits[-1])
    acc = {r["metric"]: r for r in res.results["results"] if r["condition"] == cond}["accuracy"]
    assert acc["value"] == pytest.approx(100 * np.mean(hits), abs=1e-9)
    assert acc["ci_low"] <= acc["value"] <= acc["ci_high"] and acc["n"] == len(items)


def test_order_task_run_equals_independent_computation(tiny_models, manifest, tmp_path):
    from vlbench.datasets.core import load_dataset
    from vlbench.models.adapter import load_model
    from vlbench.tasks import order_items

    spec = f"clip:{tiny_models('clip')}"
    out = tmp_path / "order"
    assert main(["run", "--task", "order", "--model", spec, "--dataset", f"custom:{manifest}", "--out", str(out),
                 "--quiet", "--num-workers", "0"]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["task"]["name"] == "order" and list(doc["conditions"]) == ["task:order"]
    assert (out / "table.md").read_text().startswith("| ")
    ds = load_dataset(f"custom:{manifest}")
    items = order_items(ds, seed=0)
    paths = {name: ds.image_path(i) for i, name in enumerate(ds.images)}
    from types import SimpleNamespace

    res = SimpleNamespace(out_dir=out, results=doc)
    _check_against_independent(res, load_model(spec, device="cpu"), items, paths.__getitem__, "task:order")
    # the leaderboard reads the run like any other
    from vlbench.leaderboards.store import read_run

    assert read_run(out / "results.json").conditions() == ["task:order"]


@pytest.fixture
def sugarcrepe_images(tmp_path):
    if not (SHARED_DATA / "sugarcrepe" / "swap_obj.json").is_file():
        pytest.skip(f"the SugarCrepe files are not at {SHARED_DATA / 'sugarcrepe'}")
    from PIL import Image

    folder = tmp_path / "val2017"
    folder.mkdir()
    names = set()
    for s in ("swap_obj", "swap_att"):
        names |= {v["filename"] for v in json.loads((SHARED_DATA / "sugarcrepe" / f"{s}.json").read_text()).values()}
    for n in sorted(names):
        rng = np.random.default_rng(int(n.split(".")[0]))
        Image.fromarray(rng.integers(0, 256, (20, 24, 3), dtype=np.uint8)).save(folder / n, quality=95)
    return folder


def test_sugarcrepe_task_run_equals_independent_computation(tiny_models, sugarcrepe_images, tmp_path):
    from vlbench.models.adapter import load_model
    from vlbench.tasks import sugarcrepe_items

    spec = f"clip:{tiny_models('clip')}"
    res = run_task(task="sugarcrepe", model=spec, dataset="sugarcrepe:swap_obj,swap_att", data_dir=str(SHARED_DATA),
                   images_dir=str(sugarcrepe_images), out=str(tmp_path / "sc"), quiet=True, num_workers=0)
    assert list(res.results["conditions"]) == ["task:sugarcrepe:swap_obj", "task:sugarcrepe:swap_att"]
    assert res.results["dataset"]["n_items"] == 245 + 666
    enc = res.results["encoding"]
    assert enc["images_encoded"] == len({p.name for p in sugarcrepe_images.iterdir()})
    adapter = load_model(spec, device="cpu")
    items = sugarcrepe_items(SHARED_DATA / "sugarcrepe", "swap_obj", images_dir=sugarcrepe_images)
    _check_against_independent(res, adapter, items, lambda k: sugarcrepe_images / k, "task:sugarcrepe:swap_obj")
    chance = {r["condition"]: r["value"] for r in res.results["results"] if r["metric"] == "chance"}
    assert chance == {"task:sugarcrepe:swap_obj": 50.0, "task:sugarcrepe:swap_att": 50.0}


def test_sugarcrepe_missing_images_error_names_the_folder(tmp_path, capsys):
    if not (SHARED_DATA / "sugarcrepe" / "swap_obj.json").is_file():
        pytest.skip(f"the SugarCrepe files are not at {SHARED_DATA / 'sugarcrepe'}")
    empty = tmp_path / "no-images"
    empty.mkdir()
    rc = main(["run", "--task", "sugarcrepe", "--model", "counting", "--dataset", "sugarcrepe:swap_obj",
               "--data-dir", str(SHARED_DATA), "--images-dir", str(empty), "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 2 and str(empty) in err and "val2017" in err and not (tmp_path / "x" / "results.json").exists()


def test_warm_task_run_encodes_nothing(counting_plugin, manifest, tmp_path, monkeypatch):
    from support.data import read_counts

    counts = tmp_path / "counts.jsonl"
    monkeypatch.setenv("VLBENCH_COUNT_FILE", str(counts))
    kw = dict(task="order", model="counting", dataset=f"custom:{manifest}", quiet=True, num_workers=0,
              cache_dir=str(tmp_path / "cache"))
    cold = run_task(out=str(tmp_path / "a"), **kw)
    first = read_counts(counts)
    assert first["images"] == 12 and first["texts"] > 0
    warm = run_task(out=str(tmp_path / "b"), **kw)
    assert read_counts(counts) == first  # nothing encoded the second time
    assert warm.results["results"] == cold.results["results"]


def test_task_options_are_checked(manifest, tmp_path, capsys):
    rc = main(["run", "--task", "order", "--model", "counting", "--dataset", f"custom:{manifest}",
               "--shortcuts", "matched", "--out", str(tmp_path / "x")])
    assert rc == 2 and "--shortcuts applies to retrieval runs" in capsys.readouterr().err
    rc = main(["run", "--task", "sugarcrepe", "--model", "counting", "--dataset", "sugarcrepe:swap_objects"])
    assert rc == 2 and "unknown SugarCrepe subset 'swap_objects'" in capsys.readouterr().err
    rc = main(["run", "--model", "counting"])
    assert rc == 2 and "needs --dataset" in capsys.readouterr().err


def test_bigram_lm_by_hand():
    import math

    from vlbench.tasks.blind import BigramLM

    lm = BigramLM(["a b", "A c."])
    # bigrams <s>a x2, ab, b</s>, ac, c</s>: 5 types; continuation counts a1 b1 c1 </s>2, +1 over 4 words + unknown
    assert lm.p_cont("a") == pytest.approx(0.2) and lm.p_cont("</s>") == pytest.approx(0.3)
    assert lm.p_cont("zebra") == pytest.approx(0.1)
    assert lm.prob("a", "b") == pytest.approx(0.25 / 2 + 0.75 * 2 / 2 * 0.2)
    assert lm.score("a b") == pytest.approx((math.log(0.7) + math.log(0.275) + math.log(0.475)) / 3)
    assert sum(lm.prob("a", w) for w in ("a", "b", "c", "</s>", "zebra")) == pytest.approx(1.0)


def test_sugarcrepe_blind_baseline(counting_plugin, sugarcrepe_images, tmp_path):
    from vlbench.tasks import sugarcrepe_items
    from vlbench.tasks.blind import coco_caption_lm, coco_image_id

    res = run_task(task="sugarcrepe", model="counting", dataset="sugarcrepe:swap_obj,swap_att",
                   data_dir=str(SHARED_DATA), images_dir=str(sugarcrepe_images), out=str(tmp_path / "b"),
                   quiet=True, num_workers=0)
    info = res.results["task"]["blind_baseline"]
    items = [it for s in ("swap_obj", "swap_att")
             for it in sugarcrepe_items(SHARED_DATA / "sugarcrepe", s, images_dir=sugarcrepe_images)]
    every = {coco_image_id(it.image) for s in ("add_att", "add_obj", "replace_att", "replace_obj", "replace_rel",
                                               "swap_att", "swap_obj")
             for it in sugarcrepe_items(SHARED_DATA / "sugarcrepe", s, check_images=False)}
    # all seven sets' images are left out of the training text (183 of the 5,000 COCO test images), and the
    # captions of the other images that equal (lower case, words only) a candidate of the evaluated items: 6
    words = lambda t: " ".join(re.findall(r"[a-z0-9]+(?:'[a-z]+)?", t.lower()))  # noqa: E731
    cands = {words(c) for it in items for c in it.candidates}
    rows = [json.loads(x) for x in (SHARED_DATA / "captions" / "coco5k_test.jsonl").read_text().splitlines()]
    same = sum(words(c) in cands for r in rows if coco_image_id(r["image"]) not in every for c in r["captions"])
    assert same == 6 and info["excluded_captions_by_content"] == same
    assert info["available"] and info["excluded_images"] == 183 and info["training_captions"] == 4817 * 5 - same
    lm, _ = coco_caption_lm(SHARED_DATA, every, cands)
    for s in ("swap_obj", "swap_att"):
        sub = [it for it in items if it.item_id.startswith(s + ":")]
        hits = [lm.score(it.candidates[0]) > lm.score(it.candidates[1]) for it in sub]
        rec = next(r for r in res.results["results"]
                   if r["condition"] == f"task:sugarcrepe:{s}" and r["metric"] == "blind_accuracy")
        assert rec["value"] == pytest.approx(100 * np.mean(hits)) and rec["n"] == len(sub)
    assert "blind (text-only) %" in (tmp_path / "b" / "table.md").read_text()


def test_ls_lists_tasks_datasets_and_image_perturbations(capsys):
    assert main(["ls"]) == 0
    out = capsys.readouterr().out
    for name in ("tasks (vlbench run --task NAME):", "sugarcrepe", "order", "image-perturbations:", "gaussian_noise",
                 "jpeg_compression", "flickr30k-de", "flickr30k-multi30k-cs"):
        assert name in out
    assert main(["ls", "tasks"]) == 0 and "datasets:" not in capsys.readouterr().out


def test_a_task_registered_in_a_test_file_runs_end_to_end(counting_plugin, manifest, tmp_path):
    """A choice task is one registered record; a new one (here, in this file) runs through the
    kernel with no other module edited: item sets from its load hook, its own rule and table."""
    from vlbench.datasets.core import load_dataset
    from vlbench.tasks import ChoiceItem, ChoiceTask, ItemSets, register_task, unregister_task

    def load(cfg, note):  # each image: its first caption against the next image's first caption
        ds = load_dataset(cfg.dataset, require_images=True)
        first = [ds.captions[ds.captions_of(i)[0]] for i in range(ds.n_images)]
        items = [ChoiceItem(f"own-{i}", name, (first[i], first[(i + 1) % ds.n_images]))
                 for i, name in enumerate(ds.images)]
        note(f"{len(items)} items")
        return ItemSets({"task:own-caption": items}, {n: ds.image_path(i) for i, n in enumerate(ds.images)},
                        ds.describe(), {"task:own-caption": {"items": len(items)}})

    task = register_task(ChoiceTask("own-caption", "an image's own caption against another image's", load,
                                    rule="own caption above the other", table=lambda rec: "own-caption table"))
    try:
        res = run_task(task="own-caption", model="counting", dataset=f"custom:{manifest}", out=str(tmp_path / "r"),
                       quiet=True, num_workers=0, no_cache=True)
        doc = json.loads((tmp_path / "r" / "results.json").read_text())
        assert doc["task"]["name"] == "own-caption" and doc["task"]["rule"] == "own caption above the other"
        assert list(doc["conditions"]) == ["task:own-caption"]
        rows = _per_item(res.out_dir)
        acc = {r["metric"]: r for r in doc["results"]}["accuracy"]
        assert acc["n"] == len(rows) == 12
        assert acc["value"] == pytest.approx(100 * np.mean([int(r["correct"]) for r in rows]))
        assert (tmp_path / "r" / "table.md").read_text() == "own-caption table\n"
        from vlbench.tasks.run import TASKS

        assert TASKS["own-caption"] == task.description
    finally:
        unregister_task(task.name)
