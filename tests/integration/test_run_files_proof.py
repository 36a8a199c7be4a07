"""Issue #32 items 1 and 3: run files prove what they claim. Every reader of a run's files (compare, rescore,
explain, the leaderboard's --comparison records) refuses, by name and without a traceback, a file changed after
the run, a path leading out of the run folder, another run's file, values out of range, replaced images, and
records that do not hold what they say. Each test is named after what it protects; most edit a copy of a real
run and, where the edit must get past the file hashes to reach the check behind them, re-hash it as a forger
would (support.runs.rehash)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from support.runs import counting_run, rehash, reseal
from vlbench.cli import main
from vlbench.compare import compare_runs
from vlbench.errors import VlbenchError

N = 200  # compare resamples: small, the checks here come before any statistics


@pytest.fixture(scope="module")
def pair(tmp_path_factory, counting_plugin):
    """Two finished runs of two models on one dataset (clean + char-swap), their embeddings kept in a cache."""
    root = tmp_path_factory.mktemp("proof")
    kw = dict(perturb="char-swap", no_cache=False, cache_dir=str(root / "cache"), validity="off")
    a = counting_run(root / "a", model="counting:dim=16", **kw)
    b = counting_run(root / "b", model="counting:dim=24", **kw)
    return a, b, root / "cache"


def _copy(run: Path, dst: Path) -> Path:
    shutil.copytree(run, dst, ignore=shutil.ignore_patterns(".vlbench.lock"))
    return dst


def _edit_results(run: Path, **fields) -> None:
    doc = json.loads((run / "results.json").read_text())
    doc.update(fields)
    (run / "results.json").write_text(json.dumps(reseal(doc)))  # the forger reseals: the field checks must see it


def _set_rsum(run: Path, value, rows=slice(None)) -> None:
    df = pd.read_csv(run / "per_query.csv.gz")
    idx = df[(df.condition == "clean") & (df.direction == "t2i")].index[rows]
    df.loc[idx, "rsum"] = value
    df.to_csv(run / "per_query.csv.gz", index=False)


def _err(capsys, argv) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


# ---------------------------------------------------------------------------------------------------------
# compare


def test_compare_refuses_per_query_values_edited_after_the_run(pair, tmp_path, capsys):
    """RSUM -1e9 written into a run's per_query.csv.gz: its sha256 is no longer the one results.json lists."""
    a, b, _ = pair
    c = _copy(b, tmp_path / "c")
    _set_rsum(c, -1e9)
    with pytest.raises(VlbenchError, match=r"c/per_query.csv.gz is not the file run .* wrote: its sha256 differs"):
        compare_runs([a, c], n_resamples=N)
    assert "re-run the same 'vlbench run' command" in _err(capsys, ["compare", str(a), str(c)])


def test_compare_refuses_per_query_values_that_disagree_with_results_json(pair, tmp_path):
    """Re-hashed edits reach the check behind the hashes: the per-query means must be the values results.json
    reports (RSUM -1e9 everywhere, and one query's RSUM lowered by 100 out of 30)."""
    a, b, _ = pair
    c = _copy(b, tmp_path / "c")
    _set_rsum(c, -1e9)
    rehash(c)
    with pytest.raises(VlbenchError, match=r"per-query rsum of clean t2i in per_query.csv.gz averages -1e\+09, but "
                                           r"its results.json reports"):
        compare_runs([a, c], n_resamples=N)
    d = _copy(b, tmp_path / "d")
    df = pd.read_csv(d / "per_query.csv.gz")
    first = df[(df.condition == "clean") & (df.direction == "t2i")].index[0]
    _set_rsum(d, float(df.loc[first, "rsum"]) - 100, slice(0, 1))
    rehash(d)
    with pytest.raises(VlbenchError, match=r"does not hold the values the run reported"):
        compare_runs([a, d], n_resamples=N)
    assert compare_runs([a, b], n_resamples=N)["rows"]  # the intact runs compare


def test_compare_never_follows_a_per_query_path_out_of_the_run(pair, tmp_path, capsys):
    """results.json's `per_query` is not covered by results_hash: an absolute or ../ path naming another run's
    file is refused, never read as this run's."""
    a, b, _ = pair
    for i, named in enumerate((str(a / "per_query.csv.gz"), "../a/run/per_query.csv.gz")):
        c = _copy(b, tmp_path / f"c{i}")
        _edit_results(c, per_query=named)
        with pytest.raises(VlbenchError, match="names .*per_query.csv.gz' as its per-query file; a run keeps it as "
                                               "per_query.csv.gz inside its own folder"):
            compare_runs([a, c], n_resamples=N)
    _err(capsys, ["compare", str(a), str(c)])


def test_compare_refuses_a_run_without_file_hashes_saying_how_to_rerun(pair, tmp_path, capsys):
    """Runs written before the manifest cannot prove their files: refused, with the re-run as the fix."""
    a, b, _ = pair
    c = _copy(b, tmp_path / "old")
    doc = json.loads((c / "results.json").read_text())
    del doc["files"]
    doc.pop("record_hash")  # a run written before the manifest was not sealed either
    (c / "results.json").write_text(json.dumps(doc))
    err = _err(capsys, ["compare", str(a), str(c)])
    assert "has no file hashes in its results.json" in err and "re-run the same 'vlbench run' command" in err


def _as_image_condition(run: Path, **meta) -> None:
    doc = json.loads((run / "results.json").read_text())
    doc["conditions"]["char-swap"] = {"perturbation": "img:gaussian_noise:3", "kind": "image",
                                      "corruption": "gaussian_noise", "severity": 3, **meta}
    (run / "results.json").write_text(json.dumps(reseal(doc)))


def test_compare_refuses_image_corruptions_made_at_another_geometry_or_seed(pair, tmp_path):
    """As the leaderboard: one image condition corrupted at the model's input size in one run and at the original
    size in the other (or with another seed) is not the same condition; two models' input sizes are."""
    a, b, _ = pair
    pairs = {"geometry": ({"corrupted_at": 224, "seed": 0}, {"corrupted_at": "original size", "seed": 0}),
             "seed": ({"corrupted_at": 224, "seed": 0}, {"corrupted_at": 224, "seed": 1})}
    for what, (ma, mb) in pairs.items():
        x, y = _copy(a, tmp_path / f"{what}-a"), _copy(b, tmp_path / f"{what}-b")
        _as_image_condition(x, **ma)
        _as_image_condition(y, **mb)
        with pytest.raises(VlbenchError, match=f"both have image condition 'char-swap', but its corrupted images were "
                                               f"made differently \\({what}: "):
            compare_runs([x, y], n_resamples=N)
    x, y = _copy(a, tmp_path / "ok-a"), _copy(b, tmp_path / "ok-b")
    _as_image_condition(x, corrupted_at=224, seed=0)
    _as_image_condition(y, corrupted_at=336, seed=0)
    assert compare_runs([x, y], n_resamples=N)["rows"]


def test_two_compares_into_one_out_never_mix_their_files(pair, tmp_path, capsys):
    from vlbench.util.io import FolderLock

    a, b, _ = pair
    out = tmp_path / "cmp"
    assert main(["compare", str(a), str(b), "--n-resamples", str(N), "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    err = _err(capsys, ["compare", str(b), str(a), "--n-resamples", str(N), "--out", str(out)])
    assert "already holds a comparison (comparison.json, comparison.csv, comparison.md)" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    busy = FolderLock(tmp_path / "busy").acquire()  # another compare writing there now
    try:
        err = _err(capsys, ["compare", str(a), str(b), "--n-resamples", str(N), "--out", str(tmp_path / "busy")])
        assert "another vlbench compare (pid" in err
    finally:
        busy.release()
    (tmp_path / "file").write_text("mine")
    assert "exists and is not a folder" in _err(capsys, ["compare", str(a), str(b), "--n-resamples", str(N), "--out",
                                                      str(tmp_path / "file")])
    assert (tmp_path / "file").read_text() == "mine"


# ---------------------------------------------------------------------------------------------------------
# rescore


def _index(run: Path) -> tuple[dict, dict]:
    with np.load(run / "embedding_keys.npz", allow_pickle=False) as z:
        arrays = {n: z[n] for n in z.files}
    return json.loads(str(arrays.pop("meta"))), arrays


def _write_index(run: Path, meta: dict, arrays: dict, *, forge: bool = True) -> None:
    np.savez_compressed(run / "embedding_keys.npz", meta=np.array(json.dumps(meta)), **arrays)
    if forge:
        rehash(run)


def test_rescore_never_renames_files_outside_the_cache_from_a_crafted_model_hash(pair, tmp_path, capsys):
    """A crafted run folder whose index names the model hash '../../victim' (and a cache beside the victim):
    refused before the hash becomes a path; the user's *.npz there is not renamed to *.npz.damaged."""
    a, _, _ = pair
    victim = tmp_path / "c" / "victim" / "image"
    victim.mkdir(parents=True)
    (victim / "mine.npz").write_bytes(b"my own file")
    run = _copy(a, tmp_path / "crafted")
    meta, arrays = _index(run)
    meta.update(model_hash="../../victim", cache_dir=str(tmp_path / "c" / "root"))
    _write_index(run, meta, arrays)
    err = _err(capsys, ["rescore", str(run), "--as", "clip_benchmark"])
    assert "its model hash '../../victim' is not the run's" in err
    assert [p.name for p in victim.iterdir()] == ["mine.npz"]


def test_rescore_refuses_another_runs_embedding_keys(pair, tmp_path):
    a, b, _ = pair
    run = _copy(a, tmp_path / "mixed")
    shutil.copy(b / "embedding_keys.npz", run / "embedding_keys.npz")
    with pytest.raises(VlbenchError, match="embedding_keys.npz is not the file run .* wrote"):
        rescore(run)
    rehash(run)  # a forger's copy: the index itself says whose it is
    with pytest.raises(VlbenchError, match="is not the run's .*: the file belongs to another run or was edited"):
        rescore(run)


def rescore(run, suite="clip_benchmark"):
    from vlbench.rescore import rescore as rescore_run

    return rescore_run(run, [suite], write=False)


def test_rescore_refuses_reversed_keys_and_edited_ground_truth(pair, tmp_path):
    a, _, _ = pair
    for what in ("keys", "truth"):
        run = _copy(a, tmp_path / what)
        meta, arrays = _index(run)
        if what == "keys":
            arrays["text_keys"] = arrays["text_keys"][::-1]
        else:
            c2i = meta["ground_truth"]["caption_to_image"]
            meta["ground_truth"]["caption_to_image"] = c2i[1:] + c2i[:1]
        _write_index(run, meta, arrays, forge=False)
        with pytest.raises(VlbenchError, match="embedding_keys.npz is not the file run .* wrote: its sha256 differs"):
            rescore(run)


@pytest.mark.parametrize("edit, message", [
    (lambda m, a: m.pop("n_captions"), "no field 'n_captions'"),
    (lambda m, a: m.update(n_captions="30"), "n_captions is '30', not a count"),
    (lambda m, a: m["ground_truth"]["caption_to_image"].__setitem__(0, 999), "caption_to_image is not 30 image "
                                                                             "indices below 6"),
    (lambda m, a: m["conditions"][1].update(text_offset=10 ** 6), "names no image keys or an offset out of range"),
    (lambda m, a: a.__setitem__("text_keys", a["text_keys"][:3]), "offset out of range"),
    (lambda m, a: m.update(run_id="another-run"), "it names run 'another-run'"),
])
def test_rescore_refuses_malformed_index_values_by_name(pair, tmp_path, capsys, edit, message):
    """Missing fields, a string count, out-of-range ground truth or offsets: a message, never a traceback."""
    a, _, _ = pair
    run = _copy(a, tmp_path / "run")
    meta, arrays = _index(run)
    edit(meta, arrays)
    _write_index(run, meta, arrays)
    assert message in _err(capsys, ["rescore", str(run), "--as", "clip_benchmark"])


def test_rescore_negative_seed_is_an_option_error(pair, capsys):
    a, _, _ = pair
    assert "--seed must be a whole number from 0" in _err(capsys, ["rescore", str(a), "--as", "mmeb", "--seed", "-1"])


def test_rescore_says_a_damaged_shard_was_damaged(pair, tmp_path):
    """A shard whose vectors changed on disk: the cache moves it aside, and rescore says so (not 'not in the
    cache')."""
    from vlbench.rescore import rescore as rescore_run

    a, _, cache = pair
    mine = shutil.copytree(cache, tmp_path / "cache")
    shard = sorted(mine.rglob(f"{_index(a)[0]['model_hash'][:16]}/image/*.npz"))[0]  # a shard of run a's model
    with np.load(shard, allow_pickle=False) as z:
        parts = {n: z[n] for n in z.files}
    parts["vectors"] = parts["vectors"] * 2
    np.savez(shard, **parts)
    with pytest.raises(VlbenchError, match="are in damaged shard") as e:
        rescore_run(a, ["clip_benchmark"], cache_dir=str(mine), write=False)
    assert "moved aside as <name>.npz.damaged" in e.value.message and "not in the embedding cache" not in \
        e.value.message
    assert shard.with_name(shard.name + ".damaged").is_file()


# ---------------------------------------------------------------------------------------------------------
# explain


def _rig_flip(run: Path) -> None:
    """Query 0 goes hit -> miss under char-swap (so the page shows image 0), recorded as the run's own."""
    z = dict(np.load(run / "retrieved.npz"))
    z["clean|t2i|rank"] = z["clean|t2i|rank"].copy()
    z["clean|t2i|rank"][0] = 1
    z["char-swap|t2i|rank"] = z["char-swap|t2i|rank"].copy()
    z["char-swap|t2i|rank"][0] = 3
    np.savez_compressed(run / "retrieved.npz", **z)
    rehash(run)


def test_explain_refuses_images_replaced_after_the_run_by_name(pair, tmp_path, capsys):
    a, _, _ = pair
    run = _copy(a, tmp_path / "run")
    _rig_flip(run)
    images = shutil.copytree(a.parent / "data" / "images", tmp_path / "images")
    assert main(["explain", str(run), "--images-dir", str(images), "--out", str(tmp_path / "ok.html")]) == 0
    (images / "img000.png").write_bytes((images / "img001.png").read_bytes())
    err = _err(capsys, ["explain", str(run), "--images-dir", str(images), "--out", str(tmp_path / "x.html")])
    assert "are not the ones the run evaluated" in err and "img000.png" in err and "replaced after the run" in err
    assert not (tmp_path / "x.html").exists()


def test_explain_refuses_retrieved_indices_beyond_the_gallery(pair, tmp_path, capsys):
    a, _, _ = pair
    run = _copy(a, tmp_path / "run")
    z = dict(np.load(run / "retrieved.npz"))
    z["char-swap|t2i"] = z["char-swap|t2i"].copy()
    z["char-swap|t2i"][0, 0] = 999
    np.savez_compressed(run / "retrieved.npz", **z)
    assert "retrieved.npz is not the file run" in _err(capsys, ["explain", str(run)])
    rehash(run)
    err = _err(capsys, ["explain", str(run)])
    assert "the t2i lists or ranks of condition 'char-swap' are out of range" in err and "6 candidates" in err


def test_explain_out_an_existing_folder_is_an_option_error(pair, tmp_path, capsys):
    a, _, _ = pair
    err = _err(capsys, ["explain", str(a), "--out", str(tmp_path)])
    assert f"--out {str(tmp_path)!r} is a folder" in err


def test_explain_a_run_with_no_condition_is_refused_not_an_empty_page(tmp_path, capsys, counting_plugin):
    run = counting_run(tmp_path / "clean-only", perturb=None)
    err = _err(capsys, ["explain", str(run)])
    assert "has no condition besides clean" in err and "--perturb" in err
    assert not (run / "explain.html").exists()


# ---------------------------------------------------------------------------------------------------------
# leaderboard build --comparison


def test_leaderboard_shows_only_comparison_records_that_prove_themselves(pair, tmp_path, capsys):
    """Records that are not an object, lack a key, have a row naming a run they do not list, were edited after
    compare wrote them, or were computed from other runs than the ones built: each left out with a warning
    naming it and why (was a traceback, or rows shown as measured); the intact record's rows are shown."""
    from vlbench.runfolder import record_hash

    a, b, _ = pair
    assert main(["compare", str(a), str(b), "--n-resamples", str(N), "--out", str(tmp_path / "good")]) == 0
    rec = json.loads((tmp_path / "good" / "comparison.json").read_text())

    def sealed(r):
        return dict(r, record_hash=record_hash(r))

    bad = {
        "list": [rec],
        "nokey": {k: v for k, v in rec.items() if k != "rows"},
        "norun": sealed(dict(rec, rows=[dict(rec["rows"][0], run_a="not-built")])),
        "rowtype": sealed(dict(rec, rows=["a row"])),
        "edited": dict(rec, rows=[dict(rec["rows"][0], diff=99.0)] + rec["rows"][1:]),
        "other": sealed(dict(rec, runs=[dict(rec["runs"][0], results_hash="0" * 64)] + rec["runs"][1:])),
    }
    args = ["leaderboard", "build", str(a), str(b), "--out", str(tmp_path / "lb"), "--no-plots", "--comparison",
            str(tmp_path / "good")]
    for name, r in bad.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(r))
        args += ["--comparison", str(tmp_path / f"{name}.json")]
    capsys.readouterr()
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for name, why in (("list", "not a JSON object"), ("nokey", "no 'rows'"), ("norun", "row 0 names a run the "
                      "record does not list"), ("rowtype", "row 0 is not an object"), ("edited", "its record_hash "
                      "does not match its content"), ("other", "results_hash differs from the one the comparison "
                      "was computed from")):
        assert any(f"{name}.json" in line and why in line for line in err.splitlines()), (name, err)
    shown = pd.read_csv(tmp_path / "lb" / "paired_comparisons.csv")
    assert len(shown) == len(rec["rows"]) and set(shown["record"]) == {"good/comparison.json"}
