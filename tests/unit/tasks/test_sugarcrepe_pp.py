"""`vlbench run --task sugarcrepe++`: ITT / TOT accuracies against an independent per-item computation, on a
fixture in the official file format (tests/fixtures/sugarcrepe_pp), plus the reader, download and CLI checks."""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import shutil

import numpy as np
import pytest
from support.data import FIXTURES, SHARED_DATA

from vlbench.cli import main
from vlbench.errors import DataError, VlbenchError
from vlbench.tasks.run import run_task

FIXTURE = FIXTURES / "sugarcrepe_pp"
SUBSETS = ("swap_obj", "replace_att")


@pytest.fixture
def scpp_data(tmp_path):
    """A data folder (fixture files under sugarcrepe_pp/, the shared COCO captions when present) and an image
    folder with one synthetic image per file name."""
    from PIL import Image

    data = tmp_path / "data"
    shutil.copytree(FIXTURE, data / "sugarcrepe_pp")
    if (SHARED_DATA / "captions").is_dir():
        (data / "captions").symlink_to(SHARED_DATA / "captions")
    images = tmp_path / "val2017"
    images.mkdir()
    for s in SUBSETS:
        for row in json.loads((FIXTURE / f"{s}.json").read_text()):
            rng = np.random.default_rng(int(row["filename"].split(".")[0]))
            Image.fromarray(rng.integers(0, 256, (20, 24, 3), dtype=np.uint8)).save(images / row["filename"])
    return data, images


def _bootstrap(ok: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """The choice tasks' interval, written out: 1,000 resamples of the items, 2.5th / 97.5th percentiles."""
    idx = np.random.default_rng(seed).integers(0, len(ok), size=(1000, len(ok)))
    means = ok[idx].mean(axis=1) * 100
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _unit(x) -> np.ndarray:
    v = np.asarray(x.float() if hasattr(x, "float") else x, dtype=np.float64)[0]
    return v / np.linalg.norm(v)


@pytest.mark.slow  # a whole task run of a tiny CLIP
def test_run_equals_an_independent_per_item_computation(tiny_models, scpp_data, tmp_path):
    import torch

    from vlbench.encoding.encode import load_image
    from vlbench.models.adapter import load_model

    data, images = scpp_data
    spec = f"clip:{tiny_models('clip')}"
    res = run_task(task="sugarcrepe++", model=spec, dataset="sugarcrepe++:swap_obj,replace-att", data_dir=str(data),
                   images_dir=str(images), out=str(tmp_path / "run"), quiet=True, num_workers=0)
    assert list(res.results["conditions"]) == ["task:sugarcrepe++:swap_obj", "task:sugarcrepe++:replace_att"]
    assert res.results["dataset"]["n_items"] == 7 and res.results["dataset"]["n_images"] == 5
    assert res.results["encoding"]["images_encoded"] == 5  # 000000000101 and 202 are shared
    adapter = load_model(spec, device="cpu")
    with gzip.open(res.out_dir / "per_item.csv.gz", "rt") as fh:
        rows = {(r["condition"], r["item_id"]): r for r in csv.DictReader(fh)}
    records = {(r["condition"], r["metric"]): r for r in res.results["results"]}
    for s in SUBSETS:
        cond, flags = f"task:sugarcrepe++:{s}", {"itt": [], "tot": [], "p1": [], "p2": []}
        for row in json.loads((FIXTURE / f"{s}.json").read_text()):  # the official format, read here on its own
            v = _unit(adapter.encode_images(torch.stack([adapter.preprocess(load_image(images / row["filename"]))])))
            p1, p2, n = (_unit(adapter.encode_texts([row[k]])) for k in ("caption", "caption2", "negative_caption"))
            ip1, ip2, ineg, t12, t1n, t2n = v @ p1, v @ p2, v @ n, p1 @ p2, p1 @ n, p2 @ n
            flags["itt"].append(ip1 > ineg and ip2 > ineg)
            flags["tot"].append(t12 > t1n and t12 > t2n)
            flags["p1"].append(ip1 > ineg)
            flags["p2"].append(ip2 > ineg)
            rec = rows[(cond, f"{s}:{row['id']}")]
            assert json.loads(rec["scores"]) == pytest.approx([ip1, ip2, ineg], abs=1e-5)
            assert json.loads(rec["text_scores"]) == pytest.approx([t12, t1n, t2n], abs=1e-5)
            if row["caption"] == row["negative_caption"]:  # the tie item: a miss on ITT, P1 and TOT
                assert (rec["correct"], rec["p1_correct"], rec["tot_correct"]) == ("0", "0", "0")
            else:  # no near-tie, so the comparisons are not decided by rounding
                assert min(abs(ip1 - ineg), abs(ip2 - ineg), abs(t12 - t1n), abs(t12 - t2n)) > 1e-5
                assert int(rec["correct"]) == flags["itt"][-1] and int(rec["tot_correct"]) == flags["tot"][-1]
            assert int(rec["chosen"]) == int(np.argmax([ip1, ip2, ineg]))
        for name, metric in (("itt", "accuracy"), ("tot", "tot_accuracy"), ("p1", "p1_accuracy"),
                             ("p2", "p2_accuracy")):
            ok = np.array(flags[name], dtype=np.float64)
            got = records[(cond, metric)]
            assert got["value"] == pytest.approx(100 * ok.mean(), abs=1e-9) and got["n"] == len(ok)
            assert (got["ci_low"], got["ci_high"]) == pytest.approx(_bootstrap(ok), abs=1e-9)
        assert records[(cond, "chance")]["value"] == pytest.approx(100 / 3)
    table = (res.out_dir / "table.md").read_text()
    assert "ITT %" in table and "TOT %" in table and "task:sugarcrepe++:replace_att" in table
    assert res.results["dataset"]["source"]["sha256"]["swap_obj"] == hashlib.sha256(
        (FIXTURE / "swap_obj.json").read_bytes()).hexdigest()
    assert res.results["conditions"]["task:sugarcrepe++:swap_obj"]["pinned_file"] is False
    # the leaderboard's choice-task table shows ITT and, for SugarCrepe++, TOT with its interval
    from vlbench.leaderboards import build_leaderboard

    build_leaderboard([res.out_dir], tmp_path / "lb", plots=False)
    with open(tmp_path / "lb" / "choice_tasks.csv", newline="") as fh:
        table_rows = {r["set"]: r for r in csv.DictReader(fh)}
    for s in SUBSETS:
        row, cond = table_rows[f"sugarcrepe++:{s}"], f"task:sugarcrepe++:{s}"
        assert float(row["accuracy"]) == pytest.approx(records[(cond, "accuracy")]["value"], abs=0.005)
        assert float(row["tot"]) == pytest.approx(records[(cond, "tot_accuracy")]["value"], abs=0.005)
        assert float(row["tot_ci_high"]) == pytest.approx(records[(cond, "tot_accuracy")]["ci_high"], abs=0.005)


def test_evaluate_triplets_by_hand():
    from vlbench.tasks import TripletItem, evaluate_triplets

    items = [TripletItem("a", "i1", "p", "q", "n"), TripletItem("b", "i2", "p", "r", "m")]
    img = {"i1": [1, 0], "i2": [0, 1]}
    # i1: image cos p 1, q .6, n .8 -> P1 yes, P2 no, ITT no; text p.q .6 < p.n .8 -> TOT no
    # i2: image cos p 0, r .8, m -1 -> ITT yes; text p.r .6, p.m 0, r.m -.8 -> TOT yes
    txt = {"p": [1, 0], "q": [0.6, 0.8], "n": [0.8, 0.6], "r": [0.6, 0.8], "m": [0, -1]}
    res = evaluate_triplets(items, img, txt)
    assert [r.scores for r in res.records] == [pytest.approx([1, 0.6, 0.8]), pytest.approx([0, 0.8, -1])]
    assert res.records[1].text_scores == pytest.approx([0.6, 0, -0.8])
    assert [(r.itt, r.tot, r.p1, r.p2) for r in res.records] == [(False, False, True, False), (True, True, True, True)]
    assert res.accuracy == 50.0 and res.scores["tot"][0] == 50.0 and res.scores["p1"][0] == 100.0
    assert res.scores["p2"][0] == 50.0 and res.n_items == 2


def test_reader_and_subset_errors(tmp_path, capsys):
    from vlbench.tasks.sets.sugarcrepe_pp import parse_scpp_spec, read_scpp_file

    assert parse_scpp_spec("sugarcrepe++:replace-att,swap_obj") == ["replace_att", "swap_obj"]
    with pytest.raises(VlbenchError, match="SugarCrepe\\+\\+ has no add_att"):
        parse_scpp_spec("sugarcrepe++:add_att")
    p = tmp_path / "swap_obj.json"
    p.write_text(json.dumps({"0": {"filename": "a.jpg", "caption": "x", "negative_caption": "y"}}))
    with pytest.raises(DataError, match="holds a JSON dict, not a list of items"):
        read_scpp_file(p, "swap_obj")
    p.write_text(json.dumps([{"id": 7, "filename": "a.jpg", "caption": "x", "negative_caption": "y"}]))
    with pytest.raises(DataError, match="item 0 lacks filename / caption / caption2"):
        read_scpp_file(p, "swap_obj")
    p.write_text(json.dumps([{"id": 1, "filename": "../a.jpg", "caption": "x", "caption2": "z",
                              "negative_caption": "y"}]))
    with pytest.raises(DataError, match="has a '..' component"):
        read_scpp_file(p, "swap_obj")
    rc = main(["run", "--task", "sugarcrepe++", "--model", "counting", "--dataset", "sugarcrepe++:add_obj"])
    assert rc == 2 and "unknown SugarCrepe++ subset 'add_obj'" in capsys.readouterr().err


def test_download_is_checked_against_the_pinned_sha256(tmp_path, monkeypatch):
    import vlbench.datasets.download as dl
    from vlbench.tasks.sets import sugarcrepe_pp as S

    body = (FIXTURE / "swap_obj.json").read_bytes()
    asked = []
    monkeypatch.setattr(dl, "http_get", lambda url, timeout=60.0: asked.append(url) or body)
    for var in ("VLBENCH_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(DataError, match="pinned 5f33cae824de431a"):  # the fixture is not the real file
        S.scpp_root(tmp_path, ["swap_obj"])
    assert asked == [f"https://raw.githubusercontent.com/Sri-Harsha/scpp/{S.SCPP_COMMIT}/data/swap_obj.json"]
    assert not (tmp_path / "sugarcrepe_pp" / "swap_obj.json").exists()
    monkeypatch.setitem(S.SCPP_FILES, "swap_obj", (hashlib.sha256(body).hexdigest(), 4))
    assert S.scpp_root(tmp_path, ["swap_obj"]) == tmp_path / "sugarcrepe_pp"
    assert (tmp_path / "sugarcrepe_pp" / "swap_obj.json").read_bytes() == body
    monkeypatch.setenv("VLBENCH_OFFLINE", "1")
    with pytest.raises(DataError, match="replace_att.json are not in") as exc:
        S.scpp_root(tmp_path / "empty", ["replace_att"])
    assert f"Sri-Harsha/scpp (commit {S.SCPP_COMMIT[:10]}" in exc.value.hint


@pytest.mark.slow  # a task run and the COCO caption language model (~0.6 s CPU)
def test_blind_baseline_is_the_itt_rule_on_a_caption_model(counting_plugin, scpp_data, tmp_path):
    if not (SHARED_DATA / "captions" / "coco5k_test.jsonl").is_file():
        pytest.skip(f"the COCO test captions are not at {SHARED_DATA / 'captions'}")
    from vlbench.tasks.blind import SUGARCREPE_TEST_IMAGES, coco_caption_lm, normalized

    data, images = scpp_data
    res = run_task(task="sugarcrepe++", model="counting", dataset="sugarcrepe++:swap_obj,replace_att",
                   data_dir=str(data), images_dir=str(images), out=str(tmp_path / "b"), quiet=True, num_workers=0)
    info = res.results["task"]["blind_baseline"]
    assert info["available"] and info["excluded_images"] == 183
    rows = [r for s in SUBSETS for r in json.loads((FIXTURE / f"{s}.json").read_text())]
    texts = {normalized(r[k]) for r in rows for k in ("caption", "caption2", "negative_caption")}
    lm, _ = coco_caption_lm(data, set(SUGARCREPE_TEST_IMAGES), texts)
    for s in SUBSETS:
        hits = [lm.score(r["caption"]) > lm.score(r["negative_caption"]) and
                lm.score(r["caption2"]) > lm.score(r["negative_caption"])
                for r in json.loads((FIXTURE / f"{s}.json").read_text())]
        rec = next(r for r in res.results["results"]
                   if r["condition"] == f"task:sugarcrepe++:{s}" and r["metric"] == "blind_accuracy")
        assert rec["value"] == pytest.approx(100 * np.mean(hits)) and rec["n"] == len(hits)


def _one_item_file(root, filename):
    root.mkdir(parents=True, exist_ok=True)
    (root / "swap_obj.json").write_text(json.dumps([{"id": 0, "filename": filename, "caption": "a dog",
                                                     "caption2": "one dog", "negative_caption": "a cat"}]))
    return root


def test_images_dir_symlink_pointing_elsewhere_is_refused(tmp_path, monkeypatch):
    """A symbolic link inside --images-dir that points outside it was followed (custom manifests refuse
    it); now refused the same way, naming the image and $VLBENCH_IMAGE_ROOTS."""
    from vlbench.tasks.sets.sugarcrepe_pp import scpp_items

    monkeypatch.delenv("VLBENCH_IMAGE_ROOTS", raising=False)
    secret = tmp_path / "elsewhere" / "secret.jpg"
    secret.parent.mkdir()
    secret.write_bytes(b"not yours")
    images = tmp_path / "val2017"
    images.mkdir()
    (images / "000000000139.jpg").symlink_to(secret)
    root = _one_item_file(tmp_path / "scpp", "000000000139.jpg")
    with pytest.raises(DataError, match="points outside the data folder") as err:
        scpp_items(root, "swap_obj", images_dir=images)
    assert "SugarCrepe++ swap_obj" in err.value.message and "VLBENCH_IMAGE_ROOTS" in err.value.hint
    monkeypatch.setenv("VLBENCH_IMAGE_ROOTS", str(secret.parent))  # a named store is allowed, as for manifests
    assert [it.image for it in scpp_items(root, "swap_obj", images_dir=images)] == ["000000000139.jpg"]


def test_a_5000_character_image_name_is_a_clear_error(tmp_path, capsys):
    """A 5,000-character image name ended in a traceback (the file system's ENAMETOOLONG); now a
    DataError naming the item and the limit, with the name cut short in the message."""
    from vlbench.tasks.sets.sugarcrepe_pp import scpp_items

    root = _one_item_file(tmp_path / "sugarcrepe_pp", "a" * 5000 + ".jpg")
    with pytest.raises(DataError, match="5,004 characters") as err:
        scpp_items(root, "swap_obj", images_dir=tmp_path)
    assert "item 0" in err.value.message and "255" in err.value.message and len(err.value.message) < 600
    code = main(["run", "--task", "sugarcrepe++", "--dataset", "sugarcrepe++:swap_obj", "--model", "clip",
                 "--data-dir", str(tmp_path), "--images-dir", str(tmp_path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "5,004 characters" in err
