"""Leaderboards: real runs (two toy models x two datasets x clean + perturbations) built into tables whose
cells are checked against the runs' own results.json; order independence; refusal of mixed results;
duplicate and corrupt runs; formula injection; publishing; the CLI."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.data import ROOT, SHARED_CAPTIONS, excerpt_rows, write_images
from support.runs import reseal

MODELS = ["counting:dim=16", "counting:dim=24"]
PERTURB = "distraction-true,shuffle-all-words"
TOL = 6e-7  # CSV numbers have 6 decimals


# ----------------------------------------------------------------------------------------------
# fixtures: the runs are made once for the module (they are fast with the counting model)

def _fg_captions(rows: list[dict]) -> list[list[str]]:
    """Flickr30k-FG captions of the excerpt's images when the shared caption files are here; otherwise
    the excerpt's captions rewritten in the FG files' style (lower case, no final period, reversed)."""
    fg_file = SHARED_CAPTIONS / "flickr30k_fg_test.jsonl"
    if fg_file.is_file():
        fg = {}
        for line in fg_file.read_text().splitlines():
            r = json.loads(line)
            fg[r["image"]] = r["captions"]
        if all(r["image"] in fg for r in rows):
            return [fg[r["image"]] for r in rows]
    return [[c.lower().rstrip(". ") for c in reversed(r["captions"])] for r in rows]


def _write_manifest(path: Path, names: list[str], captions: list[list[str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        for name, caps in zip(names, captions):
            fh.write(json.dumps({"image": f"images/{name}", "captions": caps}) + "\n")
    return path


@pytest.fixture(scope="module")
def board(tmp_path_factory, counting_plugin):
    """Four runs (2 models x flickr-mini / flickr-mini-fg, clean + 2 perturbations), and one run on a
    flickr-mini whose captions changed (same dataset name, other content hash)."""
    from vlbench.pipeline.runner import run

    root = tmp_path_factory.mktemp("board")
    rows = excerpt_rows(12)
    names = write_images(root / "data" / "images", len(rows))
    coarse = _write_manifest(root / "data" / "flickr-mini.jsonl", names, [r["captions"] for r in rows])
    fine = _write_manifest(root / "data" / "flickr-mini-fg.jsonl", names, _fg_captions(rows))
    changed_caps = [list(r["captions"]) for r in rows]
    changed_caps[0][0] = "A man in a bright orange hat and glasses looks at something."
    write_images(root / "changed" / "images", len(rows))
    changed = _write_manifest(root / "changed" / "flickr-mini.jsonl", names, changed_caps)

    runs = {}
    for m in MODELS:
        for ds in (coarse, fine):
            key = (m, ds.stem)
            out = root / "runs" / f"{m.split('=')[1]}-{ds.stem}"
            runs[key] = run(model=m, dataset=f"custom:{ds}", perturb=PERTURB, out=str(out), quiet=True,
                            num_workers=0, n_boot=50, no_cache=True).out_dir
    changed_run = run(model=MODELS[0], dataset=f"custom:{changed}", out=str(root / "changed-run"), quiet=True,
                      num_workers=0, n_boot=50, no_cache=True).out_dir
    return {"root": root, "runs": runs, "dirs": sorted(runs.values()), "changed": changed_run}


def _res(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "results.json").read_text())


def _val(res: dict, cond: str, d: str, metric: str, k=None):
    got = [r["value"] for r in res["results"] if (r["condition"], r["direction"], r["metric"], r["k"]) ==
           (cond, d, metric, k)]
    assert len(got) == 1, (cond, d, metric, k)
    return got[0]


def _csv(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _by_run_id(dirs) -> dict:
    return {_res(d)["run_id"]: _res(d) for d in dirs}


def _copy_run(src: Path, dst: Path, edit=None) -> Path:
    shutil.copytree(src, dst)
    if edit:
        doc = _res(dst)
        edit(doc)
        (dst / "results.json").write_text(json.dumps(reseal(doc), indent=2))  # the edit alone is what is tested
    return dst


@pytest.fixture(scope="module")
def built(board, tmp_path_factory):
    from vlbench.leaderboards import build_leaderboard

    out = tmp_path_factory.mktemp("built") / "lb"
    res = build_leaderboard(board["dirs"], out)
    return out, res


# ----------------------------------------------------------------------------------------------
# the cells are the runs' values

def test_clean_retrieval_cells_equal_results_json(board, built):
    out, _ = built
    rows = _csv(out / "clean_retrieval.csv")
    by_id = _by_run_id(board["dirs"])
    assert len(rows) == 4  # 2 models x 2 datasets
    assert {(r["model"], r["dataset"]) for r in rows} == {
        (m, f"custom:{d}.jsonl") for m in MODELS for d in ("flickr-mini", "flickr-mini-fg")}
    assert list(rows[0]) == ["dataset", "model", "i2t_recall@1", "i2t_recall@5", "i2t_recall@10", "i2t_ndcg",
                             "t2i_recall@1", "t2i_recall@5", "t2i_recall@10", "t2i_ndcg", "i2t_rsum", "t2i_rsum",
                             "dcg_p", "run_id", "model_hash", "dataset_hash", "flags"]
    for row in rows:
        res = by_id[row["run_id"]]
        assert row["model"] == res["model"]["spec"] and row["model_hash"] == res["model"]["hash"]
        assert row["dataset"] == res["dataset"]["name"] and row["dataset_hash"] == res["dataset"]["hash"]
        p = res["settings"]["p"]
        assert int(row["dcg_p"]) == p
        for d in ("i2t", "t2i"):
            for k in (1, 5, 10):
                assert float(row[f"{d}_recall@{k}"]) == pytest.approx(_val(res, "clean", d, "recall", k), abs=TOL)
            # the nDCG the run prints (bounded, in [0, 1]), not the signed DCG_CM
            assert float(row[f"{d}_ndcg"]) == pytest.approx(_val(res, "clean", d, "ndcg", p), abs=TOL)
            assert 0 <= float(row[f"{d}_ndcg"]) <= 1
            assert float(row[f"{d}_rsum"]) == pytest.approx(_val(res, "clean", d, "rsum"), abs=TOL)
            # an independent property: RSUM is the sum of the three recalls shown beside it
            assert float(row[f"{d}_rsum"]) == pytest.approx(sum(float(row[f"{d}_recall@{k}"]) for k in (1, 5, 10)),
                                                            abs=3 * TOL)
        assert row["flags"] == ""


@pytest.mark.parametrize("name,direction", [("rsum_per_perturbation", "t2i"), ("rsum_per_perturbation_total", "both")])
def test_rsum_per_perturbation_cells_equal_results_json(board, built, name, direction):
    out, _ = built
    rows = _csv(out / f"{name}.csv")
    datasets = ["custom:flickr-mini-fg.jsonl", "custom:flickr-mini.jsonl"]
    assert list(rows[0]) == ["model", "condition", "family", "rsum"] + sorted(datasets) + ["flags"]
    assert len(rows) == 2 * 3  # 2 models x (clean + 2 perturbations)
    assert [r["condition"] for r in rows[:3]] == ["clean", "distraction-true", "shuffle-all-words"]
    assert [r["family"] for r in rows[:3]] == ["", "distraction", "word-order"]
    for row in rows:
        assert row["rsum"] == direction
        for ds in datasets:
            stem = ds.split(":")[1].removesuffix(".jsonl")
            res = _res(board["runs"][(row["model"], stem)])
            assert float(row[ds]) == pytest.approx(_val(res, row["condition"], direction, "rsum"), abs=TOL)


def test_model_input_similarity_and_rsum_changes_equal_results_json(board, built):
    out, _ = built
    by_id = _by_run_id(board["dirs"])
    rows = _csv(out / "model_input_similarity.csv")
    assert len(rows) == 4
    for row in rows:
        mia = by_id[row["run_id"]]["model_input_analysis"]
        for g in ("decreased", "increased", "unchanged"):
            want = mia["jaccard"][g]
            assert (row[g] == "") if want is None else float(row[g]) == pytest.approx(want, abs=TOL)
        assert int(row["pairs"]) == mia["pairs"] == 1
        assert row["perturbations"] == "distraction-true shuffle-all-words"
    changes = _csv(out / "rsum_changes.csv")
    assert len(changes) == 4 * 2 * 3  # runs x perturbations x (i2t, t2i, both)
    for row in changes:
        res = by_id[row["run_id"]]
        boot = [b for b in res["bootstrap"]
                if b["condition"] == row["condition"] and b["direction"] == row["direction"]]
        delta = [x for x in res["deltas"] if (x["condition"], x["direction"], x["metric"]) ==
                 (row["condition"], row["direction"], "rsum")]
        assert float(row["delta"]) == pytest.approx(delta[0]["abs"], abs=TOL)
        assert float(row["ci_low"]) == pytest.approx(boot[0]["ci_low"], abs=TOL)
        assert float(row["ci_high"]) == pytest.approx(boot[0]["ci_high"], abs=TOL)
        # independent: delta = perturbed RSUM - clean RSUM of the same run
        assert float(row["delta"]) == pytest.approx(
            _val(res, row["condition"], row["direction"], "rsum") - _val(res, "clean", row["direction"], "rsum"),
            abs=3 * TOL)


def test_values_csv_holds_every_value(board, built):
    out, _ = built
    rows = _csv(out / "values.csv")
    by_id = _by_run_id(board["dirs"])
    assert list(rows[0])[:8] == ["dataset", "model", "condition", "family", "direction", "metric", "k", "value"]
    assert len(rows) == sum(len(r["results"]) for r in by_id.values())
    for row in rows:
        res = by_id[row["run_id"]]
        k = int(row["k"]) if row["k"] else None
        assert float(row["value"]) == pytest.approx(_val(res, row["condition"], row["direction"], row["metric"], k),
                                                    abs=TOL)
        assert row["model_hash"] == res["model"]["hash"] and row["dataset_hash"] == res["dataset"]["hash"]
        assert row["metric_version"] == res["metric_version"] and row["created"] == res["created"]
    # fixed float format everywhere
    assert all(len(r["value"].split(".")[1]) == 6 for r in rows)


def test_markdown_html_and_plots_are_written(built):
    out, res = built
    md = (out / "leaderboard.md").read_text()
    assert "## Clean retrieval" in md and "text-to-image RSUM" in md and "total RSUM" in md
    html = (out / "index.html").read_text()
    assert "http://" not in html.replace("http-equiv", "") and "https://" not in html  # nothing to fetch
    assert html.count('<table class="lb"') == 9  # the ranking of the models + the seven tables + flips (flips.csv)
    pngs = sorted(p.name for p in (out / "plots").glob("*.png"))
    assert len([p for p in pngs if p.startswith("rsum_change--")]) == 4
    assert len([p for p in pngs if p.startswith("clean_vs_fg--")]) == 2  # flickr-mini vs flickr-mini-fg
    for p in (out / "plots").glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    m = json.loads((out / "build_manifest.json").read_text())
    assert m["skipped"] == [] and m["superseded"] == [] and len(m["runs"]) == 4
    assert set(m["files"]) == {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()} - {"build_manifest.json"}


# ----------------------------------------------------------------------------------------------
# determinism

def test_same_inputs_in_any_order_give_identical_files(board, tmp_path):
    from vlbench.leaderboards import build_leaderboard

    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    build_leaderboard(board["dirs"], a)
    build_leaderboard(list(reversed(board["dirs"])), b)
    build_leaderboard([str(board["root"] / "runs")], c)  # the parent folder, searched recursively
    files = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file())
    assert any(f.endswith(".png") for f in files) and "index.html" in files
    for other in (b, c):
        assert sorted(str(p.relative_to(other)) for p in other.rglob("*") if p.is_file()) == files
        for f in files:
            assert (a / f).read_bytes() == (other / f).read_bytes(), f


# ----------------------------------------------------------------------------------------------
# refusing incomparable results

def test_changed_captions_are_refused_unless_allow_mixed(board, tmp_path):
    from vlbench.errors import VlbenchError
    from vlbench.leaderboards import build_leaderboard

    changed_id = _res(board["changed"])["run_id"]
    same_name = [_res(board["runs"][(m, "flickr-mini")])["run_id"] for m in MODELS]
    with pytest.raises(VlbenchError) as exc:
        build_leaderboard(board["dirs"] + [board["changed"]], tmp_path / "x", plots=False)
    msg = str(exc.value)
    assert "custom:flickr-mini.jsonl" in msg and "content hash" in msg and "--allow-mixed" in msg
    assert changed_id in msg and all(i in msg for i in same_name)
    assert str(board["changed"]) in msg
    assert not (tmp_path / "x").exists()  # nothing written

    with pytest.warns(UserWarning, match="allow-mixed"):
        res = build_leaderboard(board["dirs"] + [board["changed"]], tmp_path / "mixed", allow_mixed=True, plots=False)
    rows = _csv(tmp_path / "mixed" / "clean_retrieval.csv")
    assert len(rows) == 5
    ch = _res(board["changed"])
    mixed = [r for r in rows if r["dataset"].startswith("custom:flickr-mini.jsonl [")]
    assert len(mixed) == 3 and all(r["flags"].startswith("mixed: dataset hash") for r in mixed)
    # (the changed run may share its run id with the original: same model and dataset name, same second)
    (row,) = [r for r in rows if r["dataset_hash"] == ch["dataset"]["hash"]]
    assert row["run_id"].split("~")[0] == changed_id
    assert row["dataset"] == f"custom:flickr-mini.jsonl [{ch['dataset']['hash'][:8]}]"
    assert float(row["t2i_recall@1"]) == pytest.approx(_val(ch, "clean", "t2i", "recall", 1), abs=TOL)
    assert all(r["flags"] == "" for r in rows if "-fg" in r["dataset"])
    assert res.manifest["mixed"][0]["dataset"] == "custom:flickr-mini.jsonl"


def test_cli_refuses_mixed_and_names_runs(board, tmp_path, capsys):
    from vlbench.cli import main

    rc = main(["leaderboard", "build", *map(str, board["dirs"]), str(board["changed"]), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and _res(board["changed"])["run_id"] in err and "--allow-mixed" in err
    rc = main(["leaderboard", "build", *map(str, board["dirs"]), str(board["changed"]), "--out", str(tmp_path / "o"),
               "--allow-mixed", "--no-plots"])
    assert "warning: building with --allow-mixed" in capsys.readouterr().err
    assert rc == 0 and (tmp_path / "o" / "clean_retrieval.csv").is_file()


def test_different_metric_version_is_refused(board, tmp_path):
    from vlbench.errors import VlbenchError
    from vlbench.leaderboards import build_leaderboard

    src = board["runs"][(MODELS[1], "flickr-mini-fg")]
    other = _copy_run(src, tmp_path / "v2", lambda d: d.update(metric_version="2.0"))
    rest = [d for d in board["dirs"] if d != src]
    with pytest.raises(VlbenchError) as exc:
        build_leaderboard(rest + [other], tmp_path / "x", plots=False)
    assert "metric version" in str(exc.value) and str(other) in str(exc.value)
    build_leaderboard(rest + [other], tmp_path / "ok", allow_mixed=True, plots=False, warn=lambda m: None)
    flags = {r["run_id"]: r["flags"] for r in _csv(tmp_path / "ok" / "clean_retrieval.csv")}
    from vlbench.metrics.compute import METRIC_VERSION
    assert set(flags.values()) == {f"mixed: metric version {METRIC_VERSION}", "mixed: metric version 2.0"}


# ----------------------------------------------------------------------------------------------
# duplicates, bad input, schema versions

def test_duplicate_runs_newest_wins_per_condition(board, tmp_path):
    from vlbench.util.io import sha256_json
    from vlbench.leaderboards import build_leaderboard

    src = board["runs"][(MODELS[0], "flickr-mini")]
    orig = _res(src)

    def newer_clean_only(doc):  # a later re-run of the clean condition only, with a different R@1
        doc["run_id"] = "rerun-clean"
        doc["created"] = "2099-01-01T00:00:00+00:00"
        doc["results"] = [r for r in doc["results"] if r["condition"] == "clean"]
        for r in doc["results"]:
            if (r["direction"], r["metric"], r["k"]) == ("t2i", "recall", 1):
                r["value"] = 99.0
        doc["conditions"] = {"clean": {"perturbation": None}}
        doc["deltas"], doc["bootstrap"], doc["model_input_analysis"] = [], [], None
        doc["results_hash"] = sha256_json(doc["results"])

    rerun = _copy_run(src, tmp_path / "rerun", newer_clean_only)
    res = build_leaderboard(board["dirs"] + [rerun], tmp_path / "lb", plots=False)
    row = next(r for r in _csv(tmp_path / "lb" / "clean_retrieval.csv")
               if r["model"] == MODELS[0] and r["dataset"] == "custom:flickr-mini.jsonl")
    assert row["run_id"] == "rerun-clean" and float(row["t2i_recall@1"]) == 99.0
    # the older run still provides the perturbed conditions it alone has
    t53 = {(r["model"], r["condition"]): r for r in _csv(tmp_path / "lb" / "rsum_per_perturbation.csv")}
    assert float(t53[(MODELS[0], "shuffle-all-words")]["custom:flickr-mini.jsonl"]) == pytest.approx(
        _val(orig, "shuffle-all-words", "t2i", "rsum"), abs=TOL)
    (sup,) = res.manifest["superseded"]
    assert sup["run_id"] == orig["run_id"] and not sup["fully"]
    assert sup["conditions"] == [{"condition": "clean", "by": "rerun-clean", "same_values": False}]
    assert any("superseded" in n for n in res.manifest["notes"])


def test_runs_sharing_a_run_id_are_told_apart(board, tmp_path):
    """The runner's run ids have one-second resolution: two runs can share one. Tables then name each
    run as run_id~<sha256 of its results.json>[:8]."""
    from vlbench.util.io import sha256_file
    from vlbench.leaderboards import build_leaderboard

    src = board["runs"][(MODELS[0], "flickr-mini")]
    twin = _copy_run(src, tmp_path / "twin", lambda d: d["dataset"].update(name="custom:other.jsonl", hash="f" * 64))
    run_id = _res(src)["run_id"]
    res = build_leaderboard([src, twin], tmp_path / "lb", plots=False)
    refs = sorted(r["run_id"] for r in _csv(tmp_path / "lb" / "clean_retrieval.csv"))
    want = sorted(f"{run_id}~{sha256_file(d / 'results.json')[:8]}" for d in (src, twin))
    assert refs == want and refs[0] != refs[1]
    assert sorted(r["run_id"] for r in res.manifest["runs"]) == want


def test_one_spec_with_two_hashes_gets_distinct_labels(board, tmp_path):
    from vlbench.leaderboards import build_leaderboard

    src = board["runs"][(MODELS[0], "flickr-mini")]

    def fp16(d):  # the same spec run in another precision: another model hash
        d["model"]["hash"] = "a" * 64
        d["settings"]["precision"] = "fp16"
        d["run_id"] = "fp16-run"

    def other(d):  # the same spec, same precision, another checkpoint content
        d["model"]["hash"] = "b" * 64
        d["run_id"] = "other-run"

    a = _copy_run(src, tmp_path / "a", fp16)
    build_leaderboard([src, a], tmp_path / "lb", plots=False)
    assert sorted(r["model"] for r in _csv(tmp_path / "lb" / "clean_retrieval.csv")) == \
        [f"{MODELS[0]} [fp16]", f"{MODELS[0]} [fp32]"]
    b = _copy_run(src, tmp_path / "b", other)
    build_leaderboard([src, a, b], tmp_path / "lb2", plots=False)
    got = {r["run_id"]: r["model"] for r in _csv(tmp_path / "lb2" / "clean_retrieval.csv")}
    assert got["other-run"] == f"{MODELS[0]} [bbbbbbbb]" and got["fp16-run"] == f"{MODELS[0]} [aaaaaaaa]"


def test_corrupt_and_foreign_results_are_skipped_by_name(board, tmp_path, capsys):
    from vlbench.cli import main

    src = board["runs"][(MODELS[0], "flickr-mini")]
    bad = _copy_run(src, tmp_path / "in" / "truncated")
    data = (bad / "results.json").read_bytes()
    (bad / "results.json").write_bytes(data[: len(data) // 2])
    foreign = tmp_path / "in" / "foreign"
    foreign.mkdir()
    (foreign / "results.json").write_text(json.dumps({"results": {"acc": 0.5}}))  # another tool's file
    edited = _copy_run(board["runs"][(MODELS[1], "flickr-mini")], tmp_path / "in" / "edited",
                       lambda d: d["results"][0].update(value=100.0))  # hash no longer matches
    out = tmp_path / "lb"
    rc = main(["leaderboard", "build", *map(str, board["dirs"]), str(tmp_path / "in"), "--out", str(out),
               "--no-plots"])
    err = capsys.readouterr().err
    assert rc == 0
    for p, why in ((bad, "not valid JSON"), (foreign, "not a vlbench results file"), (edited, "results_hash")):
        assert f"warning: skipped {p / 'results.json'}" in err and why in err
    m = json.loads((out / "build_manifest.json").read_text())
    assert sorted(s["path"] for s in m["skipped"]) == sorted(str(p / "results.json") for p in (bad, edited, foreign))
    assert len(_csv(out / "clean_retrieval.csv")) == 4  # the other rows are all there
    assert "skipped unreadable results file" in (out / "leaderboard.md").read_text()


def test_only_unreadable_inputs_is_an_error(tmp_path):
    from vlbench.errors import VlbenchError
    from vlbench.leaderboards import build_leaderboard

    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "results.json").write_text("{")
    with pytest.raises(VlbenchError, match="no readable results"):
        build_leaderboard([tmp_path / "r"], tmp_path / "o", warn=lambda m: None)
    with pytest.raises(VlbenchError, match="does not exist"):
        build_leaderboard([tmp_path / "nope"], tmp_path / "o")
    (tmp_path / "empty").mkdir()
    with pytest.raises(VlbenchError, match="no results.json found"):
        build_leaderboard([tmp_path / "empty"], tmp_path / "o")


def test_schema_versions(board, tmp_path, monkeypatch):
    from vlbench.leaderboards import SchemaTooNew, read_run, store

    src = board["runs"][(MODELS[0], "flickr-mini")]
    newer = _copy_run(src, tmp_path / "v2", lambda d: d.update(schema_version=2))
    with pytest.raises(SchemaTooNew) as exc:
        read_run(newer / "results.json")
    assert str(newer / "results.json") in str(exc.value) and "upgrade vlbench" in str(exc.value)
    # a newer minor version of the current major only adds fields: readable
    minor = _copy_run(src, tmp_path / "v1.3", lambda d: d.update(schema_version="1.3", new_field={"x": 1}))
    assert read_run(minor / "results.json").original_schema == "1.3"

    # older versions go through the upgrade chain, one step per version
    def from_v0(doc):
        doc = dict(doc, schema_version=1, metric_version=doc.pop("metrics_version"))
        return doc

    monkeypatch.setitem(store.UPGRADES, 0, from_v0)
    old = _copy_run(src, tmp_path / "v0", lambda d: d.update(schema_version=0, metrics_version=d.pop("metric_version")))
    run = read_run(old / "results.json")
    assert run.metric_version == _res(src)["metric_version"] and run.original_schema == "0"
    monkeypatch.delitem(store.UPGRADES, 0)
    from vlbench.leaderboards import UnreadableResults

    with pytest.raises(UnreadableResults, match="schema version 0 is not supported"):
        read_run(old / "results.json")


def test_newer_schema_stops_the_build(board, tmp_path, capsys):
    from vlbench.cli import main

    newer = _copy_run(board["runs"][(MODELS[0], "flickr-mini")], tmp_path / "v9", lambda d: d.update(schema_version=9))
    rc = main(["leaderboard", "build", str(newer), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and str(newer / "results.json") in err and "schema version 9" in err


# ----------------------------------------------------------------------------------------------
# user-controlled text

def test_formula_injection_and_markup_are_neutralized(board, tmp_path):
    from vlbench.leaderboards import build_leaderboard

    names = {"=HYPERLINK(\"http://evil\",\"x\")": "'=HYPERLINK(\"http://evil\",\"x\")", "+1+2": "'+1+2",
             "-3": "'-3", "@SUM(A1)": "'@SUM(A1)", "<script>alert(1)</script>|x": "<script>alert(1)</script>|x"}
    dirs = []
    for i, name in enumerate(names):
        def edit(d, name=name, i=i):
            d["model"]["spec"] = name
            d["model"]["label"] = name  # --model-name: user-controlled text too
            d["model"]["hash"] = f"{i:064d}"
            d["run_id"] = f"evil-{i}"
        dirs.append(_copy_run(board["runs"][(MODELS[0], "flickr-mini")], tmp_path / f"r{i}", edit))
    build_leaderboard(dirs, tmp_path / "lb", plots=False)
    text = (tmp_path / "lb" / "clean_retrieval.csv").read_text()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert sorted(r["model"] for r in rows) == sorted(names.values())
    # numbers are not touched: negative changes stay numbers
    lows = [r["ci_low"] for r in _csv(tmp_path / "lb" / "rsum_changes.csv")]
    assert any(d.startswith("-") for d in lows) and all(_is_number(d) for d in lows)
    for line in text.splitlines():
        for cell in next(csv.reader([line])):
            assert not cell.startswith(("=", "+", "@")) and not (cell.startswith("-") and not _is_number(cell))
    html = (tmp_path / "lb" / "index.html").read_text()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;|x" in html
    md = (tmp_path / "lb" / "clean_retrieval.md").read_text()
    assert "<script>" not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\\|x" in md  # the pipe cannot split the row


def _is_number(s: str) -> bool:
    try:
        return math.isfinite(float(s))
    except ValueError:
        return False


# ----------------------------------------------------------------------------------------------
# Python API

def test_load_results_dataframe(board):
    import pandas as pd

    import vlbench
    from vlbench.leaderboards import RESULT_COLUMNS, load_results

    df = vlbench.load_results(board["dirs"])
    assert isinstance(df, pd.DataFrame) and list(df.columns) == RESULT_COLUMNS
    by_id = _by_run_id(board["dirs"])
    assert len(df) == sum(len(r["results"]) for r in by_id.values())
    assert df["kept"].all() and str(df["k"].dtype) == "Int64"
    for row in df.sample(40, random_state=0).itertuples():
        res = by_id[row.run_id]
        k = None if pd.isna(row.k) else int(row.k)
        assert row.value == _val(res, row.condition, row.direction, row.metric, k)  # exact, not rounded
    one = load_results(board["dirs"][0] / "results.json")
    assert one["run_id"].nunique() == 1
    sub = df[(df.condition == "clean") & (df.direction == "t2i") & (df.metric == "rsum")]
    assert sub.set_index(["model", "dataset"])["value"].notna().all() and len(sub) == 4


def test_import_is_light():
    code = ("import sys, vlbench.leaderboards, vlbench.leaderboards.cli; "
            "bad = [m for m in ('torch', 'matplotlib', 'pandas') if m in sys.modules]; "
            "assert not bad, bad")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr


# ----------------------------------------------------------------------------------------------
# publishing

def test_publish_from_build_and_from_results(board, built, tmp_path, capsys):
    from vlbench.cli import main

    out, res = built
    pub = tmp_path / "pub"
    assert main(["leaderboard", "publish", "--from", str(out), "--out", str(pub)]) == 0
    for folder in ("clean_retrieval", "rsum_per_perturbation", "rsum_per_perturbation_total", "model_input_similarity", "rsum_changes", "values"):
        assert (pub / folder / f"{folder}.csv").read_bytes() == (out / f"{folder}.csv").read_bytes()
        assert (pub / folder / "README.md").is_file()
    assert (pub / "index.html").is_file() and list((pub / "plots").glob("*.png"))
    readme = (pub / "README.md").read_text()
    for d in board["dirs"]:
        r = _res(d)
        for s in (r["run_id"], r["model"]["hash"], r["dataset"]["hash"], r["created"], r["vlbench_version"]):
            assert s in readme
        assert r["model"]["spec"] in readme and f"| {r['metric_version']} |" in readme
    assert "| metric version |" in readme
    assert str(board["root"]) not in (pub / "build_manifest.json").read_text()  # no local paths published
    # straight from results: the same files
    pub2 = tmp_path / "pub2"
    assert main(["leaderboard", "publish", *map(str, board["dirs"]), "--out", str(pub2)]) == 0
    files = sorted(str(p.relative_to(pub)) for p in pub.rglob("*") if p.is_file())
    assert files == sorted(str(p.relative_to(pub2)) for p in pub2.rglob("*") if p.is_file())
    assert all((pub / f).read_bytes() == (pub2 / f).read_bytes() for f in files)
    # re-publishing without plots removes the stale plots; an unrelated non-empty folder is refused
    assert main(["leaderboard", "publish", *map(str, board["dirs"]), "--out", str(pub2), "--no-plots"]) == 0
    assert not (pub2 / "plots").exists()
    assert main(["leaderboard", "publish", "--from", str(out), "--out", str(board["root"] / "data")]) == 2
    assert "not empty" in capsys.readouterr().err


def test_publish_refuses_an_edited_build(board, tmp_path, capsys):
    from vlbench.cli import main
    from vlbench.leaderboards import build_leaderboard

    build_leaderboard(board["dirs"][:1], tmp_path / "b", plots=False)
    with open(tmp_path / "b" / "clean_retrieval.csv", "a") as fh:
        fh.write("x,y\n")
    assert main(["leaderboard", "publish", "--from", str(tmp_path / "b"), "--out", str(tmp_path / "p")]) == 2
    assert "changed after the build" in capsys.readouterr().err


def test_rebuild_replaces_old_files(board, tmp_path):
    from vlbench.leaderboards import build_leaderboard

    out = tmp_path / "lb"
    build_leaderboard(board["dirs"], out)
    assert list((out / "plots").glob("*.png"))
    build_leaderboard(board["dirs"][:1], out, plots=False)
    assert not (out / "plots").exists()
    assert len(_csv(out / "clean_retrieval.csv")) == 1


def test_different_protocols_are_refused_unless_allow_mixed(board, tmp_path):
    """Runs of different evaluation protocols (--protocol) never stand side by side unmarked."""
    from vlbench.errors import VlbenchError
    from vlbench.leaderboards import build_leaderboard

    src = board["runs"][(MODELS[1], "flickr-mini-fg")]
    proto = {"name": "hendriksen2024", "base": "hendriksen2024"}
    other = _copy_run(src, tmp_path / "h", lambda d: d["settings"].update(protocol=proto))
    rest = [d for d in board["dirs"] if d != src]
    with pytest.raises(VlbenchError) as exc:
        build_leaderboard(rest + [other], tmp_path / "x", plots=False)
    assert "evaluation protocols" in str(exc.value) and "protocol hendriksen2024" in str(exc.value)
    res = build_leaderboard(rest + [other], tmp_path / "ok", allow_mixed=True, plots=False, warn=lambda m: None)
    flags = {r["run_id"]: r["flags"] for r in _csv(tmp_path / "ok" / "clean_retrieval.csv")}
    assert set(flags.values()) == {"mixed: protocol standard", "mixed: protocol hendriksen2024"}
    manifest = json.loads((tmp_path / "ok" / "build_manifest.json").read_text())
    assert {r.get("protocol", "standard") for r in manifest["runs"]} == {"standard", "hendriksen2024"}
    # one protocol alone is no mix; the build names it in its notes
    build_leaderboard([other], tmp_path / "one", plots=False, warn=lambda m: None)
    notes = json.loads((tmp_path / "one" / "build_manifest.json").read_text())["notes"]
    assert any(n.startswith("Evaluation protocol: hendriksen2024") for n in notes)
