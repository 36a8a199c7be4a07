"""A multilingual set in one run: an XM3600-shaped captions.jsonl with 3 languages (written here, tiny images).
Every language's recall in both directions equals a plain-NumPy recomputation from the model's own vectors, the
run's values are their mean, the selection is recorded, and the images are encoded once for all languages."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from support.language_sets import CAPTIONS, write_xm3600

import vlbench
from vlbench.encoding.session import EncodingSession


def _ranks(scores: np.ndarray) -> np.ndarray:
    """1-based rank of every candidate of every row: higher score first, a tie to the lower index (the tie rule)."""
    n = scores.shape[1]
    out = np.empty(scores.shape, dtype=np.int64)
    for q, row in enumerate(scores):
        for c in range(n):
            out[q, c] = 1 + int(np.sum(row > row[c])) + int(np.sum((row == row[c]) & (np.arange(n) < c)))
    return out


def oracle_recall(img: np.ndarray, txt: np.ndarray, owner: list[int], k: int) -> dict:
    """R@k in percent from the definitions: t2i, a caption's image within its top k; i2t, any of an image's
    captions within its top k."""
    t2i = _ranks(txt @ img.T)
    i2t = _ranks(img @ txt.T)
    hits_t = [t2i[j, owner[j]] <= k for j in range(len(owner))]
    hits_i = [min(i2t[i, j] for j in range(len(owner)) if owner[j] == i) <= k for i in range(len(img))]
    return {"t2i": 100.0 * np.mean(hits_t), "i2t": 100.0 * np.mean(hits_i)}


@pytest.fixture(scope="module")
def xm_run(tmp_path_factory):
    """One counting-model run of the XM3600-shaped fixture (de, fr, ja), with the images-encoded count."""
    from vlbench import registry

    if "counting" not in registry.models:  # as the counting_plugin fixture does (that one is function-scoped)
        registry.models.register("counting", "vlbench_counting_plugin:load", source="plugin:test")
    root = tmp_path_factory.mktemp("xm3600-run")
    data = root / "data"
    names = write_xm3600(data)
    count = root / "count.jsonl"
    mp = pytest.MonkeyPatch()
    mp.setenv("VLBENCH_COUNT_FILE", str(count))
    try:
        res = vlbench.run(model="counting:dim=16", dataset="xm3600?languages=de,fr,ja", data_dir=str(data),
                          out=str(root / "run"), quiet=True, num_workers=0, validity="off", n_boot=20,
                          cache_dir=str(root / "cache"), k=(1, 2, 3), perturb="char-swap")
    finally:
        mp.undo()
    return root, names, res, count


def test_each_language_recall_equals_a_numpy_recomputation_in_one_run(xm_run):
    root, names, res, count = xm_run
    data = root / "data"
    doc = json.loads((root / "run" / "results.json").read_text())
    assert doc["languages"]["selected"] == ["de", "fr", "ja"]
    assert doc["dataset"]["source"]["languages"] == ["de", "fr", "ja"]
    assert doc["dataset"]["source"]["spec"] == "xm3600?languages=de,fr,ja"
    image_batches = [json.loads(x)["n"] for x in count.read_text().splitlines() if json.loads(x)["kind"] == "images"]
    assert sum(image_batches) == len(names)  # 5 images encoded once for 3 languages

    session = EncodingSession.open("counting:dim=16", cache_dir=root / "cache")
    iv = session.images([data / "images" / "xm3600" / n for n in names], num_workers=0, progress=False)
    img = np.stack([iv[i] for i in range(len(names))])
    got = {(r["language"], r["direction"], r["k"]): r["value"] for r in doc["languages"]["values"]
           if r["condition"] == "clean" and r["metric"] == "recall"}
    run_values = {(v.key.direction, v.key.k): v.value for v in res.record.values
                  if v.condition == "clean" and v.key.metric == "recall"}
    per_lang: dict = {}
    for lang in ("de", "fr", "ja"):
        texts = [c for caps in CAPTIONS[lang] for c in caps]
        owner = [i for i, caps in enumerate(CAPTIONS[lang]) for _ in caps]
        tv = session.texts(texts, progress=False)
        txt = np.stack([tv[j] for j in range(len(texts))])
        for k in (1, 2, 3):
            want = oracle_recall(img, txt, owner, k)
            for d in ("t2i", "i2t"):
                assert got[(lang, d, k)] == pytest.approx(want[d], abs=1e-9), (lang, d, k)
                per_lang.setdefault((d, k), []).append(want[d])
    for (d, k), vals in per_lang.items():
        assert run_values[(d, k)] == pytest.approx(np.mean(vals), abs=1e-9)  # the run's value: the mean
    assert len({tuple(v) for v in per_lang.values()}) > 1  # the case has teeth: not every language scores alike
    assert any(0 < v < 100 for vals in per_lang.values() for v in vals)


def test_a_perturbed_condition_has_its_own_per_language_values_and_the_dataset_reads_back(xm_run):
    from vlbench.runread import load_run_dataset

    root, names, res, _ = xm_run
    doc = json.loads((root / "run" / "results.json").read_text())
    rows = [r for r in doc["languages"]["values"] if r["condition"] == "char-swap" and r["metric"] == "recall"]
    assert {r["language"] for r in rows} == {"de", "fr", "ja"}
    run_values = {(v.key.direction, v.key.k): v.value for v in res.record.values
                  if v.condition == "char-swap" and v.key.metric == "recall"}
    for (d, k), value in run_values.items():
        assert value == pytest.approx(np.mean([r["value"] for r in rows if (r["direction"], r["k"]) == (d, k)]))
    ds = load_run_dataset(doc, data_dir=root / "data")  # from the recorded spec; its content hash checked
    assert ds.source["languages"] == ["de", "fr", "ja"] and ds.images == names * 3


def test_the_leaderboard_multilingual_table_shows_each_language_and_the_mean(xm_run, tmp_path):
    from vlbench.leaderboards import build_leaderboard

    root, _, res, _ = xm_run
    build_leaderboard([root / "run"], tmp_path / "lb")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "lb" / "multilingual.csv").read_text())))
    assert [(r["condition"], r["direction"]) for r in rows] == [("clean", "i2t"), ("clean", "t2i"),
                                                                ("char-swap", "i2t"), ("char-swap", "t2i")]
    doc = json.loads((root / "run" / "results.json").read_text())
    want = {(r["language"], r["direction"]): r["value"] for r in doc["languages"]["values"]
            if r["condition"] == "clean" and r["metric"] == "recall" and r["k"] == 1}
    for r in rows[:2]:
        for lang in ("de", "fr", "ja"):
            assert float(r[lang]) == pytest.approx(want[(lang, r["direction"])], abs=1e-6)
        assert float(r["mean"]) == pytest.approx(np.mean([want[(x, r["direction"])] for x in ("de", "fr", "ja")]),
                                                 abs=1e-6)
        assert r["languages"] == "3"
    md = (tmp_path / "lb" / "leaderboard.md").read_text()
    assert "| dataset | model | condition | direction | de | fr | ja | mean R@1 | languages |" in md


def test_the_printed_result_lists_r1_per_language(xm_run):
    root, _, res, _ = xm_run
    doc = json.loads((root / "run" / "results.json").read_text())
    r1 = {(r["language"], r["direction"]): r["value"] for r in doc["languages"]["values"]
          if r["condition"] == "clean" and r["metric"] == "recall" and r["k"] == 1}
    printed = res.printed()
    assert "R@1 per language" in printed
    for lang in ("de", "fr", "ja"):
        assert f"{lang}  {r1[(lang, 'i2t')]:6.2f}  {r1[(lang, 't2i')]:6.2f}" in printed


def test_the_xm3600_console_counts_distinct_images_and_notes_the_subset(counting_plugin, tmp_path, capsys):
    """It said "encoding 10 images" for 5 images in 2 languages (then a bar of 5/5), and nothing about the
    5-image set not being the released 3,600."""
    from vlbench.cli import main

    write_xm3600(tmp_path / "data", n=5, langs=("de", "fr"))
    rc = main(["run", "--model", "counting:dim=16", "--dataset", "xm3600?languages=de,fr", "--data-dir",
               str(tmp_path / "data"), "--out", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"),
               "--num-workers", "0", "--validity", "off"])
    err = capsys.readouterr().err
    assert rc == 0
    assert "encoding 5 images with counting:dim=16" in err and "(10 gallery entries: the same images once per fold)" in err
    assert "note: xm3600: 5 images, not the released 3,600 (a subset or a changed file)" in err
