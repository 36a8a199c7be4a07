"""Leaderboard integrity (corruption geometry) and names: an edited or
impossible value is refused by name, never shown; parsing is bounded; runs corrupted at different geometries
or made under different protocols are refused (or flagged with --allow-mixed) whichever of them is newer;
an explicit --model-name wins over a newer run's bare spec; warnings name the run folders given.

The runs are typed records (vlbench.results.RunRecord) written with their own results hash, so they are
valid results.json files (tests/support/synthetic_runs.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from support.synthetic_runs import synth_run


def _edit(folder: Path, fn, rehash: bool) -> None:
    from vlbench.results import records_hash

    doc = json.loads((folder / "results.json").read_text())
    fn(doc)
    if rehash:
        doc["results_hash"] = records_hash(doc["results"])
    (folder / "results.json").write_text(json.dumps(doc))


def _set_r1(value):
    def fn(doc):
        for r in doc["results"]:
            if (r["condition"], r["direction"], r["metric"], r["k"]) == ("clean", "t2i", "recall", 1):
                r["value"] = value
    return fn


@pytest.mark.parametrize("value, rehash, reason", [
    (-5, True, "t2i recall@1 of condition 'clean' is -5, outside the range of recall, [0, 100]"),
    (1e300, True, "t2i recall@1 of condition 'clean' is 1e+300, outside the range of recall, [0, 100]"),
    (99, False, "results_hash does not match the result records"),
])
def test_an_edited_value_is_refused_by_name(tmp_path, value, rehash, reason):
    from vlbench.leaderboards import build_leaderboard

    good = synth_run(tmp_path / "runs" / "good", model=0)
    bad = synth_run(tmp_path / "runs" / "bad", model=1)
    _edit(bad, _set_r1(value), rehash)
    with pytest.warns(UserWarning) as caught:
        res = build_leaderboard([tmp_path / "runs"], tmp_path / "lb", plots=False)
    (skip,) = res.skipped
    assert skip["path"] == str(bad / "results.json") and reason in skip["reason"]
    assert any(f"skipped {bad / 'results.json'}" in str(w.message) and reason in str(w.message) for w in caught)
    # the edited run is nowhere in the tables: only model 0's clean t2i R@1 (40 + 1) is shown
    t52 = (tmp_path / "lb" / "clean_retrieval.csv").read_text().splitlines()
    assert len(t52) == 2 and t52[1].split(",")[6] == "41.000000"  # dataset, model, i2t R@1/5/10, DCG, t2i R@1
    assert t52[1].split(",")[1] == "clip:model-0" and good.name == "good"
    assert "clip:model-1" not in (tmp_path / "lb" / "values.csv").read_text()


def test_value_ranges_from_the_metric_registry(tmp_path):
    """rsum's range is 100 x the recalls it sums; DCG_CM@10 is within +-H_10 = 4.5436; NaN / Infinity literals
    and stored changes that do not equal their values' difference are refused."""
    from vlbench.leaderboards.store import UnreadableResults, read_run

    run = synth_run(tmp_path / "r", perturb=["char-swap"])
    rj = run / "results.json"
    original = rj.read_text()

    def refused(fn, rehash=True):
        rj.write_text(original)
        _edit(run, fn, rehash)
        with pytest.raises(UnreadableResults) as exc:
            read_run(rj)
        return exc.value.reason

    def set_value(cond, d, metric, k, value):
        def fn(doc):
            for r in doc["results"]:
                if (r["condition"], r["direction"], r["metric"], r["k"]) == (cond, d, metric, k):
                    r["value"] = value
        return fn

    assert "outside the range of rsum, [0, 300]" in refused(set_value("clean", "t2i", "rsum", None, 300.5))
    assert "outside the range of rsum, [0, 600]" in refused(set_value("clean", "both", "rsum", None, 600.5))
    h10 = sum(1 / math.log2(i + 1) for i in range(1, 11))
    assert f"{h10:g}" == "4.54356"

    def add_dcg(value):
        def fn(doc):
            doc["results"].append({"condition": "clean", "direction": "t2i", "metric": "dcg_cm", "k": 10,
                                   "value": value})
        return fn

    assert "outside the range of dcg_cm, [-4.54356, 4.54356]" in refused(add_dcg(4.6))
    rj.write_text(original)
    _edit(run, add_dcg(4.5), True)
    assert read_run(rj).record.value("clean", "t2i", "dcg_cm", 10) == 4.5  # inside: read
    rj.write_text(original.replace('"value": 41.0', '"value": NaN', 1))
    with pytest.raises(UnreadableResults, match="not strict JSON: NaN is not a JSON number"):
        read_run(rj)

    def bad_delta(doc):
        doc["deltas"] = [{"condition": "char-swap", "direction": "t2i", "metric": "rsum", "k": None,
                          "abs": 7.0, "rel": 5.0}]
    # char-swap is condition 1: every t2i recall 0.5 lower, so its t2i RSUM is 1.5 lower than clean
    assert "the stored change of t2i rsum of condition 'char-swap' is 7 but its values differ by -1.5" in \
        refused(bad_delta, rehash=False)


@pytest.mark.parametrize("depth", [65, 100_000])
def test_deeply_nested_json_is_refused_not_a_traceback(tmp_path, depth):
    from vlbench.leaderboards.store import UnreadableResults, read_run
    from vlbench.results import RunRecord

    p = tmp_path / "results.json"
    p.write_text('{"schema_version": 1, "x": ' + "[" * depth + "]" * depth + "}")
    with pytest.raises(UnreadableResults, match="nested deeper than 64 levels"):
        read_run(p)
    with pytest.raises(UnreadableResults, match="nested deeper than 64 levels"):
        RunRecord.load(p)


def test_a_file_without_results_hash_is_flagged_unverified(tmp_path):
    from vlbench.leaderboards import build_leaderboard

    run = synth_run(tmp_path / "r")
    _edit(run, lambda d: d.pop("results_hash"), rehash=False)
    build_leaderboard([run], tmp_path / "lb", plots=False)
    row = (tmp_path / "lb" / "clean_retrieval.csv").read_text().splitlines()[1]
    assert row.endswith(",unverified: no results_hash")


# ----------------------------------------------------------------------------------------------
# geometry and protocol: the same whichever run is newer

@pytest.mark.parametrize("newer", ["original", "input"])
def test_runs_corrupted_at_different_geometries_are_refused_in_either_order(tmp_path, newer, capsys):
    from vlbench.cli import main

    older = "input" if newer == "original" else "original"
    geo = {"input": 224, "original": "original size"}
    # the older run has clean + gaussian_noise; the newer one the same model, data and conditions
    for which, created in ((older, "2026-11-20T10:00:00"), (newer, "2026-11-21T10:00:00")):
        synth_run(tmp_path / "runs" / f"at-{which}", corrupt=["gaussian_noise"], severities=(1,),
                  geometry=geo[which], created=created)
    rc = main(["leaderboard", "build", str(tmp_path / "runs"), "--out", str(tmp_path / "lb"), "--no-plots"])
    err = capsys.readouterr().err
    assert rc == 2 and "2 different image-corruption geometries (--corrupt-at input / original)" in err
    assert f"corruption geometry input: {tmp_path / 'runs' / 'at-input'} (run run-at-input)" in err
    assert f"corruption geometry original: {tmp_path / 'runs' / 'at-original'} (run run-at-original)" in err
    # --allow-mixed: shown, each row flagged with its geometry, the older run listed as superseded
    rc = main(["leaderboard", "build", str(tmp_path / "runs"), "--out", str(tmp_path / "lb"), "--no-plots",
               "--allow-mixed"])
    assert rc == 0
    rows = (tmp_path / "lb" / "image_corruptions.csv").read_text().splitlines()
    assert len(rows) == 2 and rows[1].endswith(f"run-at-{newer},mixed: images corrupted at {newer} geometry")
    manifest = json.loads((tmp_path / "lb" / "build_manifest.json").read_text())
    assert [s["run_id"] for s in manifest["superseded"]] == [f"run-at-{older}"]
    assert {m["what"] for m in manifest["mixed"]} == {"corruption_geometry"}


@pytest.mark.parametrize("newer", ["hendriksen2024", "standard"])
def test_a_protocol_clash_is_reported_the_same_way_in_either_order(tmp_path, newer, capsys):
    """The older run has clean + a perturbation, the newer only clean: before, one order refused (both
    used) and the other passed silently (the older run fully superseded)."""
    from vlbench.cli import main

    older = "standard" if newer == "hendriksen2024" else "hendriksen2024"
    synth_run(tmp_path / "runs" / "old", perturb=["char-swap"], protocol=None if older == "standard" else older,
              created="2026-11-20T10:00:00")
    synth_run(tmp_path / "runs" / "new", protocol=None if newer == "standard" else newer,
              created="2026-11-21T10:00:00")
    rc = main(["leaderboard", "build", str(tmp_path / "runs"), "--out", str(tmp_path / "lb"), "--no-plots"])
    err = capsys.readouterr().err
    assert rc == 2 and "the runs use 2 different evaluation protocols (--protocol)" in err
    assert f"protocol {older}: {tmp_path / 'runs' / 'old'} (run run-old)" in err
    assert f"protocol {newer}: {tmp_path / 'runs' / 'new'} (run run-new)" in err


# ----------------------------------------------------------------------------------------------
# names

def test_explicit_model_name_wins_over_a_newer_bare_spec(tmp_path):
    from vlbench.leaderboards import build_leaderboard

    synth_run(tmp_path / "runs" / "named", spec="clip:/home/alice/ckpt/my-clip", label="My CLIP (ours)",
              perturb=["char-swap"], created="2026-11-20T10:00:00")
    synth_run(tmp_path / "runs" / "bare", spec="clip:/home/alice/ckpt/my-clip", created="2026-11-21T10:00:00")
    build_leaderboard([tmp_path / "runs"], tmp_path / "lb", plots=False)
    rows = (tmp_path / "lb" / "clean_retrieval.csv").read_text().splitlines()
    assert rows[1].split(",")[1] == "My CLIP (ours)"
    # without any --model-name the label is the spec with its local path shortened to the folder's name
    build_leaderboard([tmp_path / "runs" / "bare"], tmp_path / "lb2", plots=False)
    assert (tmp_path / "lb2" / "clean_retrieval.csv").read_text().splitlines()[1].split(",")[1] == "clip:my-clip"


def test_warnings_name_the_run_folders_given(tmp_path, monkeypatch):
    from vlbench.leaderboards import build_leaderboard

    monkeypatch.chdir(tmp_path)
    synth_run(tmp_path / "runs" / "first", perturb=["char-swap"], created="2026-11-20T10:00:00",
              run_id="20261120T100000.000000Z-clip-x-aaaaaa")
    synth_run(tmp_path / "runs" / "second", created="2026-11-21T10:00:00", run_id="20261121T100000.000000Z-clip-x-bbb")
    synth_run(tmp_path / "runs" / "broken")
    (tmp_path / "runs" / "broken" / "results.json").write_text("{")
    msgs = []
    res = build_leaderboard(["runs"], "lb", plots=False, warn=msgs.append)
    assert msgs == ["skipped runs/broken/results.json: not valid JSON, truncated or corrupt (Expecting property "
                    "name enclosed in double quotes at line 1 column 2)"]
    notes = res.manifest["notes"]
    assert "run runs/first is superseded for clean by newer run(s) runs/second" in notes
    assert not any("20261120T" in n for n in notes)
