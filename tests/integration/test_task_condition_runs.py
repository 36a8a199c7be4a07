"""A compositional choice task under caption perturbations and image corruptions (`vlbench run --task whatsup
--perturb ... --perturb-images ...`) on a tiny CLIP: what is recorded, flips against the per-item records, the blind
ceiling, --perturb-options correct vs all, the embedding cache, and the leaderboard's compositional table."""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

import numpy as np
import pytest

from vlbench.cli import main

SHARED_DATA = Path("/work/shared/data")
SET = "task:whatsup:controlled_a"
PREPS = ("on", "under", "to the left of", "to the right of")
NAMED = {"on": "on", "under": "under", "to the left of": "left_of", "to the right of": "right_of"}


def _rows(out: Path) -> list[dict]:
    with gzip.open(out / "per_item.csv.gz", "rt") as fh:
        return list(csv.DictReader(fh))


def _csv(path: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


@pytest.fixture(scope="module")
def runs(tiny_models, tmp_path_factory):
    """What'sUp controlled_a (12 items, 4 options, the first right) in its released layout, the blind baseline's
    COCO captions, and three runs sharing one cache: every candidate perturbed (+ a corruption), only the right
    one, and the first run again (warm)."""
    from PIL import Image

    coco = SHARED_DATA / "captions" / "coco5k_test.jsonl"
    if not coco.is_file():
        pytest.skip(f"the COCO test captions are not at {coco}")
    root = tmp_path_factory.mktemp("taskconds")
    data = root / "data"
    (data / "captions").mkdir(parents=True)
    (data / "captions" / coco.name).symlink_to(coco)
    ws = data / "whatsup"
    (ws / "controlled_images").mkdir(parents=True)
    rows = [{"image_path": f"data/controlled_images/{o}_{NAMED[p]}_table.jpeg",
             "caption_options": [f"A {o} {p} a table", *(f"A {o} {q} a table" for q in PREPS if q != p)]}
            for o in ("mug", "book", "lamp") for p in PREPS]
    (ws / "controlled_images_dataset.json").write_text(json.dumps(rows))
    for k, r in enumerate(rows):
        Image.fromarray(np.random.default_rng(100 + k).integers(0, 256, (20, 24, 3), dtype=np.uint8)).save(
            ws / "controlled_images" / r["image_path"].split("/")[-1])
    spec = f"clip:{tiny_models('clip')}"
    common = ["run", "--task", "whatsup", "--dataset", "whatsup:controlled_a", "--model", spec, "--data-dir",
              str(data), "--cache-dir", str(root / "cache"), "--quiet", "--num-workers", "0"]
    every = common + ["--perturb", "distraction-true,char-swap", "--perturb-images", "gaussian_noise:5"]
    assert main(every + ["--out", str(root / "all")]) == 0
    assert main(common + ["--perturb", "distraction-true", "--perturb-options", "correct",
                          "--out", str(root / "correct")]) == 0
    assert main(every + ["--out", str(root / "warm")]) == 0
    other = [f"clip:{tiny_models('clip', seed=1)}" if a == spec else a for a in every]
    assert main(other + ["--out", str(root / "other")]) == 0
    from vlbench.leaderboards import build_leaderboard

    build_leaderboard([root / "all", root / "correct"], root / "lb")
    return {"root": root, "rows": rows, "spec": spec, "data": data, "ws": ws}


def _doc(runs, name: str) -> dict:
    return json.loads((runs["root"] / name / "results.json").read_text())


def test_perturbed_run_records_each_condition_and_its_perturbation(runs):
    doc = _doc(runs, "all")
    names = [SET, f"{SET}@distraction-true", f"{SET}@char-swap", f"{SET}@img:gaussian_noise:5"]
    assert list(doc["conditions"]) == names
    dt, img = doc["conditions"][names[1]], doc["conditions"][names[3]]
    assert dt["perturbation"] == "distraction-true" and dt["family"] == "distraction" and dt["set"] == SET
    assert dt["perturb_options"] == "all" and dt["n_applicable"] == dt["n_captions"] == 12  # 12 distinct options
    assert dt["candidates_changed"] == 48 and dt["items_changed"] == 12 and dt["seed"] == 0
    assert img["corruption"] == "gaussian_noise" and img["severity"] == 5 and img["kind"] == "choice"
    assert img["condition_kind"] == "image" and "cache_key" in img and "corrupted_at" in img
    said = doc["task"]["conditions"]
    assert said["perturb"] == "distraction-true,char-swap" and said["perturb_options"] == "all"
    assert said["perturb_images"] == "gaussian_noise:5"


def test_flips_equal_a_recomputation_from_the_per_item_records(runs):
    out = runs["root"] / "all"
    doc, rows = _doc(runs, "all"), _rows(out)
    flips = {r["condition"]: r for r in _csv(out / "flips.csv")}
    boots = {b["condition"]: b for b in doc["bootstrap"]}
    clean = {r["item_id"]: int(r["correct"]) for r in rows if r["condition"] == SET}
    moved = 0
    for cond in list(doc["conditions"])[1:]:
        mine = [r for r in rows if r["condition"] == cond]
        assert len(mine) == 12
        for r in mine:  # each item's record: its answer from its own scores (strict), its flip
            s = json.loads(r["scores"])
            assert int(r["correct"]) == int(s[0] > max(s[1:]))
            was, now = clean[r["item_id"]], int(r["correct"])
            assert int(r["clean_correct"]) == was and r["set"] == SET
            assert r["flip"] == ("hit_to_miss" if was > now else "miss_to_hit" if now > was else "")
        a = np.array([clean[r["item_id"]] for r in mine], dtype=float)
        b = np.array([int(r["correct"]) for r in mine], dtype=float)
        h2m, m2h = int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum())
        assert (int(flips[cond]["hit_to_miss"]), int(flips[cond]["miss_to_hit"])) == (h2m, m2h)
        assert (boots[cond]["hit_to_miss"], boots[cond]["miss_to_hit"]) == (h2m, m2h)
        moved += h2m + m2h
        d = (b - a) * 100
        assert boots[cond]["delta"] == pytest.approx(d.mean(), abs=1e-9)
        means = d[np.random.default_rng(0).integers(0, 12, size=(1000, 12))].mean(axis=1)
        assert boots[cond]["ci_low"] == pytest.approx(np.percentile(means, 2.5), abs=1e-9)
        assert float(flips[cond]["ci_high"]) == pytest.approx(np.percentile(means, 97.5), abs=1e-5)
        acc = {r["metric"]: r["value"] for r in doc["results"] if r["condition"] == cond}["accuracy"]
        assert acc == pytest.approx(100 * b.mean(), abs=1e-9)
    assert moved > 0  # the recomputation is not of zeros only
    assert "right -> wrong" in (out / "table.md").read_text()


def test_corruption_blind_ceiling_is_the_clean_one(runs):
    doc = _doc(runs, "all")
    blind = {r["condition"]: r for r in doc["results"] if r["metric"] == "blind_accuracy"}
    assert doc["task"]["blind_baseline"]["available"]
    img = blind[f"{SET}@img:gaussian_noise:5"]
    assert img["value"] == blind[SET]["value"] and img["same_as"] == SET
    assert (img["ci_low"], img["ci_high"]) == (blind[SET]["ci_low"], blind[SET]["ci_high"])
    assert "same_as" not in blind[f"{SET}@char-swap"]
    # the image condition's answers differ from clean's only through the images: the same right candidate
    assert doc["conditions"][f"{SET}@img:gaussian_noise:5"]["blind_baseline"].startswith("the clean set's")


def test_caption_blind_ceiling_is_recomputed_on_the_perturbed_candidates(runs):
    """The correct-only run: the bigram scorer (trained without any evaluated text) picks by plausibility among
    the perturbed right option and the clean wrong ones."""
    from vlbench.tasks.blind import coco_caption_lm, normalized

    doc = _doc(runs, "correct")
    cond = f"{SET}@correct:distraction-true"
    options = [r["caption_options"] for r in runs["rows"]]
    shown = [[o[0] + " and true is true", *o[1:]] for o in options]
    evaluated = {normalized(c) for opts in options + shown for c in opts}
    lm, _ = coco_caption_lm(runs["data"], set(), evaluated)
    for name, items in ((SET, options), (cond, shown)):
        hits = [lm.score(o[0]) > max(lm.score(c) for c in o[1:]) for o in items]
        got = {r["metric"]: r["value"] for r in doc["results"] if r["condition"] == name}["blind_accuracy"]
        assert got == pytest.approx(100 * np.mean(hits), abs=1e-9)


def test_perturb_options_correct_changes_only_the_right_candidate_and_all_every_one(runs):
    """Per item, the recorded similarities: under 'correct' the wrong options score exactly as clean (same text,
    same image) and the right one as the independently encoded perturbed text; under 'all' every option moves."""
    import torch

    from vlbench.encoding.encode import load_image
    from vlbench.models.adapter import load_model

    adapter = load_model(runs["spec"], device="cpu")

    def unit(v):
        v = np.asarray(v.float())[0]
        return v / np.linalg.norm(v)

    for name, cond, changed in (("correct", f"{SET}@correct:distraction-true", {0}),
                                ("all", f"{SET}@distraction-true", {0, 1, 2, 3})):
        rows = _rows(runs["root"] / name)
        clean = {r["item_id"]: json.loads(r["scores"]) for r in rows if r["condition"] == SET}
        for r, opts in zip([r for r in rows if r["condition"] == cond], (x["caption_options"] for x in runs["rows"])):
            got, before = json.loads(r["scores"]), clean[r["item_id"]]
            path = runs["ws"] / "controlled_images" / r["image"].split("/")[-1]
            img = unit(adapter.encode_images(torch.stack([adapter.preprocess(load_image(path))])))
            for k, opt in enumerate(opts):
                text = opt + " and true is true" if k in changed else opt
                assert got[k] == pytest.approx(float(unit(adapter.encode_texts([text])) @ img), abs=1e-5)
                assert (got[k] != before[k]) == (k in changed)


def test_each_distinct_text_and_corrupted_image_is_encoded_once(runs):
    first, warm = _doc(runs, "all")["encoding"], _doc(runs, "warm")["encoding"]
    # 12 distinct options; distraction-true and char-swap change each: at most 36 texts; 12 images, 12 corrupted
    assert first["texts_distinct"] == first["texts_encoded"] <= 36 and first["images_encoded"] == 24
    assert warm["texts_encoded"] == 0 and warm["images_encoded"] == 0 and warm["images_cached"] == 24


def test_leaderboard_compositional_table_shows_clean_and_each_family(runs):
    (row,) = _csv(runs["root"] / "lb" / "compositional.csv")
    doc, right = _doc(runs, "all"), _doc(runs, "correct")
    acc = {(r["condition"]): r["value"] for d in (doc, right) for r in d["results"] if r["metric"] == "accuracy"}
    boots = {b["condition"]: b["delta"] for d in (doc, right) for b in d["bootstrap"]}
    assert row["task"] == "whatsup" and row["set"] == "whatsup:controlled_a" and int(row["items"]) == 12
    assert float(row["clean"]) == pytest.approx(acc[SET], abs=1e-6)
    assert float(row["distraction"]) == pytest.approx(acc[f"{SET}@distraction-true"], abs=1e-6)
    assert float(row["typos_delta"]) == pytest.approx(boots[f"{SET}@char-swap"], abs=1e-6)
    assert float(row["image-noise"]) == pytest.approx(acc[f"{SET}@img:gaussian_noise:5"], abs=1e-6)
    assert float(row["distraction_correct"]) == pytest.approx(acc[f"{SET}@correct:distraction-true"], abs=1e-6)
    (choice,) = _csv(runs["root"] / "lb" / "choice_tasks.csv")  # the clean set only
    assert choice["set"] == "whatsup:controlled_a"
    flips = {r["condition"] for r in _csv(runs["root"] / "lb" / "flips.csv")}
    assert f"{SET}@char-swap" in flips and f"{SET}@correct:distraction-true" in flips


def test_condition_options_are_refused_where_they_do_not_apply(runs, tmp_path, capsys):
    man = runs["root"] / "nothing.jsonl"
    assert main(["run", "--model", runs["spec"], "--dataset", f"custom:{man}", "--perturb-options", "correct",
                 "--out", str(tmp_path / "r")]) == 2
    assert "--perturb-options applies to a choice task" in capsys.readouterr().err
    assert main(["run", "--task", "whatsup", "--model", runs["spec"], "--perturb-options", "correct",
                 "--data-dir", str(runs["data"]), "--out", str(tmp_path / "t")]) == 2
    assert "--perturb-options needs --perturb" in capsys.readouterr().err
    assert main(["run", "--task", "whatsup", "--model", runs["spec"], "--k", "5", "--perturb", "typos",
                 "--data-dir", str(runs["data"]), "--out", str(tmp_path / "k")]) == 2
    assert "--k applies to retrieval runs" in capsys.readouterr().err


def test_compare_pairs_two_models_item_by_item_under_each_condition(runs):
    """`vlbench compare --metric accuracy` on two task runs: each condition's difference and robustness rows equal
    the per-item recomputation (A - B; (A_cond - A_set) - (B_cond - B_set))."""
    from vlbench.compare import compare_runs

    root = runs["root"]
    doc = compare_runs([root / "all", root / "other"], metric="accuracy", conditions="all", n_resamples=200)
    ok = {}
    for name in ("all", "other"):
        for r in _rows(root / name):
            ok.setdefault((name, r["condition"]), {})[r["item_id"]] = 100.0 * int(r["correct"])
    ids = sorted(ok[("all", SET)])

    def col(name, cond):
        return np.array([ok[(name, cond)][i] for i in ids])

    assert any((col("all", c) != col("other", c)).any() for c in {k[1] for k in ok})  # the models differ somewhere
    rows = {(r["condition"], r["kind"]): r for r in doc["rows"]}
    assert {d for (_, _), r in rows.items() for d in [r["direction"]]} == {"i2t"}
    assert rows[(SET, "difference")]["diff"] == pytest.approx((col("all", SET) - col("other", SET)).mean())
    for cond in list(_doc(runs, "all")["conditions"])[1:]:
        assert rows[(cond, "difference")]["diff"] == pytest.approx((col("all", cond) - col("other", cond)).mean())
        robust = (col("all", cond) - col("all", SET)) - (col("other", cond) - col("other", SET))
        assert rows[(cond, "robustness")]["diff"] == pytest.approx(robust.mean())
        assert rows[(cond, "robustness")]["n_queries"] == 12
    from vlbench.errors import OptionError

    with pytest.raises(OptionError) as err:  # rsum, the default metric, is a retrieval run's
        compare_runs([root / "all", root / "other"], n_resamples=200)
    assert err.value.option == "metric" and "accuracy" in err.value.hint
    fams = compare_runs([root / "all", root / "other"], metric="accuracy", conditions="families", n_resamples=200)
    assert {r["condition"] for r in fams["rows"]} == {f"{SET}@typos", f"{SET}@distraction", f"{SET}@image-noise"}


def test_winoground_under_conditions_every_caption_is_a_right_one(tiny_models, tmp_path):
    """Winoground's pairs: `--perturb-options correct` perturbs both captions (each is the right one of one image),
    recorded; every similarity under the caption condition equals an independent encoding of the perturbed captions,
    and the text, image and group scores of each condition follow the paper's rule on them."""
    import torch
    from PIL import Image

    from vlbench.encoding.encode import load_image
    from vlbench.models.adapter import load_model

    wino = tmp_path / "data" / "winoground"
    (wino / "images").mkdir(parents=True)
    pairs = [("a dog chases a cat", "a cat chases a dog"), ("a man above a boat", "a boat above a man"),
             ("a big tree and a small house", "a small tree and a big house")]
    lines = []
    for k, (c0, c1) in enumerate(pairs):
        lines.append(json.dumps({"id": k, "image_0": f"ex_{k}_0", "image_1": f"ex_{k}_1", "caption_0": c0,
                                 "caption_1": c1, "collapsed_tag": "Object"}))
        for j in (0, 1):
            Image.fromarray(np.random.default_rng(10 * k + j).integers(0, 256, (20, 24, 3), dtype=np.uint8)).save(
                wino / "images" / f"ex_{k}_{j}.png")
    (wino / "examples.jsonl").write_text("\n".join(lines) + "\n")
    spec = f"clip:{tiny_models('clip')}"
    out = tmp_path / "wg"
    assert main(["run", "--task", "winoground", "--model", spec, "--data-dir", str(tmp_path / "data"), "--out",
                 str(out), "--quiet", "--num-workers", "0", "--perturb", "distraction-false", "--perturb-options",
                 "correct", "--perturb-images", "gaussian_noise:2"]) == 0
    doc = json.loads((out / "results.json").read_text())
    cond = "task:winoground@correct:distraction-false"
    assert list(doc["conditions"]) == ["task:winoground", cond, "task:winoground@img:gaussian_noise:2"]
    assert doc["conditions"][cond]["candidates_changed"] == 6  # both captions of each of the 3 items
    assert "every caption" in doc["conditions"][cond]["perturbed_candidates"]
    adapter = load_model(spec, device="cpu")

    def unit(v):
        v = np.asarray(v.float())[0]
        return v / np.linalg.norm(v)

    rows = [r for r in _rows(out) if r["condition"] == cond]
    flags = {"text": [], "image": [], "group": []}
    for r, (c0, c1) in zip(rows, pairs):
        imgs = [unit(adapter.encode_images(torch.stack([adapter.preprocess(load_image(wino / "images" / n))])))
                for n in (r["image"], r["image_1"])]
        caps = [unit(adapter.encode_texts([c + " and false is false"])) for c in (c0, c1)]
        s = np.array([[c @ i for i in imgs] for c in caps])  # s[c, I]
        assert json.loads(r["scores"]) == pytest.approx([s[0, 0], s[1, 0], s[0, 1], s[1, 1]], abs=1e-5)
        text = s[0, 0] > s[1, 0] and s[1, 1] > s[0, 1]
        image = s[0, 0] > s[0, 1] and s[1, 1] > s[1, 0]
        for name, v in (("text", text), ("image", image), ("group", text and image)):
            flags[name].append(v)
            assert int(r[f"{name}_correct"]) == int(v)
    got = {r["metric"]: r["value"] for r in doc["results"] if r["condition"] == cond}
    for name, metric in (("text", "text_score"), ("image", "image_score"), ("group", "accuracy")):
        assert got[metric] == pytest.approx(100 * np.mean(flags[name]))
