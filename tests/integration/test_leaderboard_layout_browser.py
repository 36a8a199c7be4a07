"""The leaderboard page's layout at the size the chapter's study has (4 models x 2 datasets x 14 conditions):
it fits a 1,400 px wide window without horizontal scrolling and opens with the ranking of the models,
checked in a real headless browser (a screenshot is kept for a person to look at). The ranking's
numbers are checked against the results files; publishing never writes through a symbolic link.

The runs are synthesized from one real counting-model run (same schema, values changed per model and
condition) so the test stays fast. Needs Chromium for the browser part (skipped with the reason)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support.data import excerpt_rows, write_images
from support.runs import reseal
from support.browser import BROWSER, NEEDS_BROWSER

PERTURBATIONS = ["char-swap", "missing-char", "extra-char", "nearby-char", "synonym-noun", "synonym-adjective",
                 "distraction-true", "distraction-false", "shuffle-nouns-adjectives", "shuffle-all-words",
                 "shuffle-all-but-nouns-adjectives", "shuffle-within-trigrams", "shuffle-trigrams"]
FAMILY = {p: ("typos" if i < 4 else "lexical" if i < 6 else "distraction" if i < 8 else "word-order")
          for i, p in enumerate(PERTURBATIONS)}
DATASETS = {"custom:flickr30k-test-excerpt.jsonl": "a" * 64, "custom:mscoco-5k-test-excerpt.jsonl": "b" * 64}
MODELS = [f"hf:example-org/clip-vit-large-patch14-variant-{i}" for i in range(4)]


def _synth(doc: dict, model_i: int, dataset: str) -> dict:
    """A run of model ``model_i`` on ``dataset``: clean recalls (of the real run, mapped to 20 + 0.6 x R) +
    2 * model_i (so model 3 ranks first); perturbation j lowers every recall by (j + 1) * (model_i + 1) / 4
    from clean."""
    from vlbench.leaderboards.store import records_hash

    d = copy.deepcopy(doc)
    d["model"].update(spec=MODELS[model_i], name="hf", hash=f"{model_i + 1}" * 64)
    d["dataset"].update(name=dataset, hash=DATASETS[dataset])
    d["run_id"] = f"20261123T0000{model_i}{len(dataset) % 10}.000000Z-{MODELS[model_i].replace('/', '-')}-" \
                  f"{dataset}-{d['model']['hash'][:12]}-{model_i}{len(dataset)}"
    clean = [r for r in doc["results"] if r["condition"] == "clean"]
    template = dict(doc["conditions"]["distraction-true"])
    results, conds, boot = [], {"clean": {"perturbation": None}}, []
    for j, cond in enumerate(["clean"] + PERTURBATIONS):
        drop = 0.0 if cond == "clean" else j * (model_i + 1) / 4
        for r in clean:
            v = r["value"]
            if r["metric"] in ("recall", "rsum"):
                n = 3 if r["metric"] == "rsum" else 1
                # recalls mapped into [20, 80] first, so that every value stays within its metric's range
                # (the leaderboard refuses R@k outside [0, 100]); the differences are unchanged
                m = 1 if r["metric"] == "recall" else 6 if r["direction"] == "both" else 3
                v = 20 * m + 0.6 * v + n * (2 * model_i - drop)
            results.append(dict(r, condition=cond, value=v))
        if cond != "clean":
            conds[cond] = dict(template, perturbation=cond, name=cond, family=FAMILY[cond])
            for direc, n in (("i2t", 3), ("t2i", 3), ("both", 6)):
                boot.append({"condition": cond, "direction": direc, "metric": "rsum", "delta": -n * drop,
                             "ci_low": -n * drop - 2, "ci_high": -n * drop + 2, "n_boot": 20, "alpha": 0.05,
                             "seed": 0})
    d.update(results=results, conditions=conds, bootstrap=boot, deltas=[])
    d["results_hash"] = records_hash(results)
    return reseal(d)  # made from a real run's sealed record: sealed again as a run would be


@pytest.fixture(scope="module")
def runs(tmp_path_factory, counting_plugin):
    from vlbench.pipeline.runner import run

    root = tmp_path_factory.mktemp("layout")
    rows = excerpt_rows(12)
    names = write_images(root / "data" / "images", len(rows))
    with open(root / "data" / "mini.jsonl", "w") as fh:
        for name, row in zip(names, rows):
            fh.write(json.dumps({"image": f"images/{name}", "captions": row["captions"]}) + "\n")
    real = run(model="counting:dim=16", dataset=f"custom:{root / 'data' / 'mini.jsonl'}", perturb="distraction-true",
               out=str(root / "real"), quiet=True, num_workers=0, n_boot=20, no_cache=True).out_dir
    doc = json.loads((Path(real) / "results.json").read_text())
    dirs = []
    for i in range(len(MODELS)):
        for ds in DATASETS:
            out = root / "runs" / f"m{i}-{ds.split(':')[1]}"
            out.mkdir(parents=True)
            (out / "results.json").write_text(json.dumps(_synth(doc, i, ds), indent=1))
            dirs.append(out)
    return root, dirs


@pytest.fixture(scope="module")
def built(runs):
    from vlbench.leaderboards import build_leaderboard

    root, dirs = runs
    build_leaderboard(dirs, root / "lb")
    return root / "lb"


def test_ranking_is_first_and_its_numbers_come_from_the_results(runs, built):
    from support.browser import Tables as _Tables

    _, dirs = runs
    page = _Tables()
    page.feed((built / "index.html").read_text())
    assert list(page.tables)[0] == "ranking"
    head, *rows = page.tables["ranking"]
    keys = [a["data-key"] for a, _ in head]
    # independently: clean RSUM (i2t + t2i) per model, averaged over the two datasets, from the files
    want: dict[str, list[float]] = {}
    for d in dirs:
        res = json.loads((d / "results.json").read_text())
        tot = sum(r["value"] for r in res["results"] if r["condition"] == "clean" and r["metric"] == "rsum"
                  and r["direction"] in ("i2t", "t2i"))
        want.setdefault(res["model"]["spec"], []).append(tot)
    order = sorted(want, key=lambda m: -sum(want[m]) / 2)
    assert [r[keys.index("model")][1] for r in rows] == order == MODELS[::-1]
    for r in rows:
        m = r[keys.index("model")][1]
        assert float(r[keys.index("mean_clean_rsum")][0]["data-v"]) == pytest.approx(sum(want[m]) / 2, abs=1e-6)
        # mean total-RSUM change over 13 perturbations: -6 * (model_i + 1) / 4 * mean(1..13) = -10.5 * (i + 1)
        i = MODELS.index(m)
        assert float(r[keys.index("mean_rsum_change")][0]["data-v"]) == pytest.approx(-10.5 * (i + 1), abs=1e-6)
        assert r[keys.index("worst")][1].startswith("shuffle-trigrams")
    # RSUM per perturbation on the page: a column per model, a row per dataset x condition
    head53, *rows53 = page.tables["rsum_per_perturbation"]
    assert [a["data-key"] for a, _ in head53][3:7] == MODELS[::-1]
    assert len(rows53) == 2 * 14


def _screenshot(page: Path, png: Path, tmp: Path, width: int = 1400) -> str:
    """Screenshot of the top of the page and the DOM after a script that records the widths."""
    common = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--no-first-run", "--disable-extensions", "--hide-scrollbars", f"--window-size={width},2400"]
    shot = subprocess.run(common + [f"--user-data-dir={tmp / 'p1'}", f"--screenshot={png}", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.returncode == 0 and png.is_file(), shot.stderr[-2000:]
    dom = subprocess.run(common + [f"--user-data-dir={tmp / 'p2'}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    return dom.stdout


@NEEDS_BROWSER
def test_page_fits_1400px_and_opens_with_the_ranking(built, tmp_path):
    png = Path(os.environ.get("VLBENCH_SCREENSHOT_DIR", tmp_path)) / "leaderboard-1400.png"
    dom = _screenshot(built / "index.html", png, tmp_path)
    # the page's script writes the document's scroll width into <html data-scroll-width> once laid out
    import re

    m = re.search(r'<html[^>]*data-scroll-width="(\d+)"', dom)
    assert m, "the page's script did not record its width"
    assert int(m.group(1)) <= 1400
    # and no table scrolls sideways inside its own box
    assert re.search(r'<html[^>]*data-overflowing-tables="0"', dom), re.search(r"<html[^>]*>", dom).group(0)
    first = re.search(r'<table[^>]*data-table="([^"]+)"', dom)
    assert first and first.group(1) == "ranking"


@pytest.mark.parametrize("link_kind", ["folder", "file"])
def test_publish_refuses_an_out_folder_holding_a_link(built, tmp_path, capsys, link_kind):
    """A link inside --out (to a folder or a file outside it) is refused before anything is written or
    removed; the link's target is untouched; without the link the same publish succeeds."""
    from vlbench.cli import main

    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "clean_retrieval.csv"
    victim.write_text("precious\n")
    pub = tmp_path / "pub"
    assert main(["leaderboard", "publish", "--from", str(built), "--out", str(pub)]) == 0
    before = sorted(p.relative_to(pub) for p in pub.rglob("*"))
    shutil.rmtree(pub / "clean_retrieval")
    link = pub / "clean_retrieval"
    if link_kind == "folder":
        link.symlink_to(outside, target_is_directory=True)
    else:
        link.mkdir()
        (link / "clean_retrieval.csv").symlink_to(victim)
        link = link / "clean_retrieval.csv"
    capsys.readouterr()
    assert main(["leaderboard", "publish", "--from", str(built), "--out", str(pub)]) == 2
    err = capsys.readouterr().err
    assert str(link) in err and "symbolic link" in err and "rm " in err
    assert victim.read_text() == "precious\n" and sorted(p.name for p in outside.iterdir()) == ["clean_retrieval.csv"]
    link.unlink()
    assert main(["leaderboard", "publish", "--from", str(built), "--out", str(pub)]) == 0
    assert sorted(p.relative_to(pub) for p in pub.rglob("*")) == before


@NEEDS_BROWSER
def test_room_for_validity_columns_beside_each_drop(runs, tmp_path):
    """Applicability rate and semantic drift (issue #10: columns applicable, drift_mean, drift_p95 of
    rsum_changes) fit beside each RSUM change: the page still fits 1,400 px and shows them."""
    import re

    from vlbench.leaderboards import render
    from vlbench.leaderboards.build import PAGE_TABLES
    from vlbench.leaderboards.store import load_runs, select
    from vlbench.leaderboards.all_tables import build_tables
    from vlbench.leaderboards.tables import Column, make_labels

    _, dirs = runs
    loaded = load_runs(dirs)
    selection = select(loaded.runs)
    tables = {t.name: t for t in build_tables(selection, make_labels(loaded.runs, selection, False))}
    ch = tables["rsum_changes"]
    at = ch.column("applicable")
    for i, row in enumerate(ch.rows):  # runs without validity have empty cells: fill them like real ones
        row[at:at + 3] = [0.5 + (i % 5) / 10, 0.0123 * (i % 7), 0.05 + 0.01 * (i % 3)]
    page = tmp_path / "index.html"
    shown = [tables[n] for n in PAGE_TABLES if n in tables]  # paired_comparisons only with --comparison records
    page.write_text(render.to_html("vlbench leaderboard", [], shown, [], []))
    dom = _screenshot(page, tmp_path / "shot.png", tmp_path)
    assert re.search(r'<html[^>]*data-overflowing-tables="0"', dom)
    assert int(re.search(r'<html[^>]*data-scroll-width="(\d+)"', dom).group(1)) <= 1400
    assert 'data-key="applicable"' in dom and 'data-key="drift_mean"' in dom
