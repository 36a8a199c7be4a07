"""Runs with meaning-changing probes (``--probes``): the recorded sensitivity numbers equal a recomputation from
the model's own forward, probes never enter the invariance summary, and a constructed case: a bag-of-words model
ties every word swap (chance) and keeps everything under shuffles, while a model that keeps word order notices
the swaps; the invariance / sensitivity map separates them."""

from __future__ import annotations

import csv
import gzip
import json
import re

import numpy as np
import pytest
from PIL import Image

from vlbench import registry
from vlbench.datasets.core import load_dataset
from vlbench.pipeline import sensitivity as S

ROWS = [["a dog chases a cat", "a dog runs after a small cat on grass"],
        ["a man rides a horse", "a man on a brown horse in a field"],
        ["a girl feeds a goat", "a young girl with a goat at a farm"],
        ["a boy kicks a ball", "a boy plays with a red ball in a park"],
        ["a woman walks a dog", "a woman and her dog on a street"],
        ["a cat watches a bird", "a grey cat looks at a bird outside"]]


def _swap(text: str) -> str | None:
    """'a X verb a Y' -> 'a Y verb a X' (a hand-made swap of the two objects)."""
    w = text.split()
    if len(w) == 5 and w[0] == "a" and w[3] == "a":
        return " ".join(["a", w[4], w[2], "a", w[1]])
    return None


@pytest.fixture
def word_models():
    for name, target in (("bow", "support.bow_model:load_bow"), ("ordered", "support.bow_model:load_ordered")):
        if name not in registry.models:
            registry.models.register(name, target, source="plugin:test")
    return "bow", "ordered"


def _run(tmp_path, model, man, data_dir):
    from support.probe_runs import hand_probe, run_with_probes

    def extra(ds):
        return [hand_probe("swap-objects", "swap", ds.captions, ds.caption_ids, _swap)]

    return run_with_probes(extra, model=model, dataset=f"custom:{man}", out=str(tmp_path / model), quiet=True,
                           num_workers=0, n_boot=50, no_cache=True, validity="off", perturb="shuffle-all-words",
                           k=(1, 5), data_dir=str(data_dir))


def test_bag_of_words_ties_every_swap_and_keeps_everything_under_shuffles(tmp_path, word_models, blind_data_dir):
    from support.bow_model import write_colour_set

    man = write_colour_set(tmp_path / "data", ROWS)
    bow, ordered = (_run(tmp_path, m, man, blind_data_dir) for m in word_models)
    sb = bow.results["sensitivity"]["conditions"]["swap-objects"]
    so = ordered.results["sensitivity"]["conditions"]["swap-objects"]
    assert sb["n_applicable"] == so["n_applicable"] == 6
    # chance for an order-free model: every pair ties; a tie is a miss (0%), as a coin flip 50%
    assert sb["n_ties"] == 6 and sb["accuracy"] == 0.0 and sb["accuracy_ties_half"] == 50.0
    assert so["accuracy"] == 100.0 and so["n_ties"] == 0  # word order kept: every swap noticed
    # the blind ceiling by the choice tasks' own path: each caption and its swap as a two-candidate item
    from vlbench.tasks.blind import coco_caption_lm, normalized
    from vlbench.tasks.choice import ChoiceItem, evaluate_text_only

    items = [ChoiceItem(str(i), "x", (c, _swap(c))) for i, c in enumerate(c for r in ROWS for c in r) if _swap(c)]
    texts = {normalized(c) for r in ROWS for c in r} | {normalized(it.candidates[1]) for it in items}
    lm, _ = coco_caption_lm(blind_data_dir, set(), texts)
    assert sb["blind_accuracy"] == so["blind_accuracy"] == pytest.approx(evaluate_text_only(items, lm).accuracy)
    assert bow.results["sensitivity"]["blind"]["available"] is True
    rsum = {(v["condition"], v["direction"]): v["value"] for v in bow.results["results"] if v["metric"] == "rsum"}
    for d in ("i2t", "t2i", "both"):  # full invariance under shuffles: the same bags of words
        assert rsum[("shuffle-all-words", d)] == rsum[("clean", d)]
    # the probe is kind sensitivity: never in the family summary of the invariance conditions
    assert bow.record.condition("swap-objects").meta["kind"] == "sensitivity"
    from vlbench.pipeline.report import family_summary

    summary = family_summary(bow.record)
    assert "swap" not in summary and "word-order" in summary
    assert "meaning-changing probes" in bow.table()

    # the map separates them: both fully or nearly invariant, only the ordered model sensitive
    from vlbench.leaderboards.build import make

    built = make([bow.out_dir, ordered.out_dir], plots=True)
    t = built.tables["sensitivity_map"]
    rows = {r[1]: dict(zip([c.key for c in t.columns], r)) for r in t.rows}
    rb, ro = rows[next(k for k in rows if k.startswith("bow"))], rows[next(k for k in rows if k.startswith("ordered"))]
    assert rb["invariance"] == pytest.approx(100.0) and rb["sensitivity"] == 0.0
    assert rb["reference"] == "bag-of-words reference" and ro["reference"] == ""
    assert ro["sensitivity"] == 100.0 and ro["sensitivity_swap"] == 100.0
    assert any(name.startswith("plots/sensitivity_map--") for name in built.files)

    # compare: paired, caption by caption, on the probe's own per-query column (100 = the original won)
    from vlbench.compare import compare_runs

    rec = compare_runs([bow.out_dir, ordered.out_dir], metric="probe_accuracy", conditions="swap-objects",
                       directions="t2i", n_resamples=200)
    (row,) = [r for r in rec["rows"] if r["condition"] == "swap-objects"]  # no robustness row: clean has no column
    assert (row["kind"], row["n_queries"], row["a"], row["b"], row["diff"]) == ("difference", 6, 0.0, 100.0, -100.0)
    default = compare_runs([bow.out_dir, ordered.out_dir], n_resamples=200,  # the command's default rows
                           conditions="clean,families")
    assert {r["condition"] for r in default["rows"]} == {"clean", "word-order"}  # the probe's family is no loss


def _normalized(x):
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _words(text):
    return re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())


def _per_item(out, name):
    with gzip.open(out / "per_item.csv.gz", "rt", encoding="utf-8", newline="") as fh:
        return [r for r in csv.DictReader(fh) if r["condition"] == name]


@pytest.fixture(scope="module")
def probe_run(tmp_path_factory):
    """A --probes run of the counting plug-in on 12 excerpt images (60 captions), and its manifest."""
    from support.data import write_manifest

    from vlbench.pipeline.runner import run

    if "counting" not in registry.models:
        registry.models.register("counting", "vlbench_counting_plugin:load", source="plugin:test")
    root = tmp_path_factory.mktemp("probe-run")
    man = write_manifest(root / "data", 12)
    res = run(model="counting:dim=16", dataset=f"custom:{man}", out=str(root / "run"), probes="sensitivity",
              quiet=True, num_workers=0, n_boot=50, cache_dir=str(root / "cache"), validity="off", k=(1, 5),
              data_dir=str(root / "no-captions"))  # no COCO captions: the blind ceiling says it is unavailable
    return res, man


@pytest.mark.slow
def test_run_probes_equal_a_recomputation_from_the_models_forward(probe_run):
    """Every number of results.json "sensitivity" from a plain loop: the probe texts made again, the plug-in's own
    encode_texts / encode_images, L2-normalised as vlbench does, compared one caption at a time."""
    import torch
    from vlbench_counting_plugin import load

    from vlbench.perturbations.probes import make_probes

    res, man = probe_run
    sec = res.results["sensitivity"]["conditions"]
    from vlbench.perturbations.probes import PROBES

    assert set(sec) == set(PROBES)  # "sensitivity": every probe (negation, half-truth, replace, swap, count, antonym)
    ds = load_dataset(f"custom:{man}")
    probes = make_probes(ds.captions, ds.caption_ids, [ds.images[g] for g in ds.caption_to_image], list(sec), seed=0)
    model = load("dim=16")
    img = _normalized(model.encode_images(torch.stack([model.preprocess(Image.open(ds.image_path(i)).convert("RGB"))
                                                       for i in range(ds.n_images)])))
    for name, entry in sec.items():
        assert res.record.condition(name).meta["kind"] == "sensitivity"
        ps = probes[name]
        rows = {r["item_id"]: r for r in _per_item(res.out_dir, name)}
        app = [i for i, a in enumerate(ps.applicable) if a]
        assert sorted(rows) == sorted(ds.caption_ids[i] for i in app) and entry["n_applicable"] == len(app)
        if entry["effect"] == "false":
            wins = []
            for i in app:
                g = int(ds.caption_to_image[i])
                a, b = _normalized(model.encode_texts([ds.captions[i], ps.texts[i]])) @ img[g]
                wins.append(bool(a > b))
                assert int(rows[ds.caption_ids[i]]["correct"]) == int(a > b)
            assert entry["accuracy"] == pytest.approx(100.0 * np.mean(wins), abs=1e-9)
            continue
        for k in (1, 5):
            for label, texts in (("denied_share", ps.texts), ("original_denied_share", ds.captions)):
                shares = []
                for i in app:
                    s = img @ _normalized(model.encode_texts([texts[i]]))[0]
                    top = sorted(range(len(s)), key=lambda j: (-s[j], j))[:k]
                    word = ps.meta[i]["denied"]
                    shares.append(np.mean([any(w in (word, word + "s", word + "es") for c in ds.captions_of(j)
                                               for w in _words(ds.captions[c])) for j in top]))
                assert entry[f"{label}@{k}"] == pytest.approx(float(np.mean(shares)), abs=1e-9), (label, k)
    assert "meaning-changing probes" in res.table()
    blind = res.results["sensitivity"]["blind"]
    assert blind["available"] is False and "coco5k_test.jsonl" in blind["why"]  # no COCO captions in this data folder
    assert "blind text-only: unavailable" in res.table()


@pytest.mark.slow
def test_explain_shows_a_probes_caption_its_probe_and_both_scores(probe_run):
    from vlbench.explain import explain

    res, _ = probe_run
    page = explain(res.out_dir, per_perturbation=3).read_text()
    rows = _per_item(res.out_dir, "negation-present")
    misses = [r for r in rows if not int(r["correct"])]
    assert 'data-condition="negation-present"' in page and "not shown: a sensitivity" not in page
    assert f'data-probe-misses="{len(misses)}"' in page
    worst = max(misses, key=lambda r: json.loads(r["scores"])[1] - json.loads(r["scores"])[0])
    a, b = json.loads(worst["scores"])
    assert f"({a:.4f} vs {b:.4f})" in page  # the largest miss, with both scores


@pytest.mark.slow
def test_analyze_finds_which_captions_probes_a_model_misses(probe_run, tmp_path):
    from vlbench.analyze.join import join_run
    from vlbench.cli import main

    res, _ = probe_run
    table, _info = join_run(res.out_dir, conditions={"negation-present", "half-truth-object"})
    for name in ("negation-present", "half-truth-object"):
        rows = table[table["condition"] == name]
        entry = res.results["sensitivity"]["conditions"][name]
        miss = rows["probe_miss"].dropna()
        assert len(miss) == entry["n_applicable"]  # empty where the probe did not apply
        assert float(miss.mean()) == pytest.approx(1 - entry["accuracy"] / 100, abs=1e-5)  # %.6g cells
        per_item = {r["item_id"]: int(r["correct"]) for r in _per_item(res.out_dir, name)}
        assert {q: int(1 - m) for q, m in zip(rows["query_id"], rows["probe_miss"]) if m == m} == per_item
    assert main(["analyze", str(res.out_dir), "--out", str(tmp_path / "an"), "--outcome", "probe_miss",
                 "--conditions", "negation-present", "--n-boot", "50", "--no-plots"]) == 0
    assert any(p.suffix == ".md" for p in (tmp_path / "an").iterdir())


def test_per_item_rows_are_written_only_with_probes(tmp_path):
    assert S.write_per_item(tmp_path, []) is None and not (tmp_path / "per_item.csv.gz").exists()
    S.write_per_item(tmp_path, [{"condition": "c", "item_id": "1", "correct": 1}, {"condition": "d", "tie": 0}])
    with gzip.open(tmp_path / "per_item.csv.gz", "rt") as fh:
        rows = list(csv.DictReader(fh))
    assert rows[0]["correct"] == "1" and rows[1]["tie"] == "0" and rows[1]["correct"] == ""
    assert json.dumps(rows)
