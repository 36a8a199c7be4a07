"""Naming datasets and models: two custom datasets whose manifests share a file name can go on
one leaderboard once named; a model label replaces the spec in tables."""

from __future__ import annotations

import csv
import json

import pytest

from support.data import excerpt_rows, write_images


def _dataset(folder, rows):
    names = write_images(folder, len(rows))
    man = folder / "manifest.jsonl"
    man.write_text("\n".join(json.dumps({"image": n, "captions": r["captions"]}) for n, r in zip(names, rows)))
    return man


@pytest.fixture
def two_manifests(tmp_path):
    rows = excerpt_rows(12)
    return _dataset(tmp_path / "a", rows[:6]), _dataset(tmp_path / "b", rows[6:])


def _run(man, out, **kw):
    from vlbench.pipeline.runner import run

    return run(model="counting:dim=16", dataset=f"custom:{man}", out=str(out), quiet=True, num_workers=0,
               n_boot=20, no_cache=True, **kw)


def test_same_file_name_unnamed_is_refused_with_the_naming_hint(counting_plugin, two_manifests, tmp_path):
    from vlbench.errors import VlbenchError
    from vlbench.leaderboards import build_leaderboard

    a, b = two_manifests
    runs = [_run(a, tmp_path / "ra").out_dir, _run(b, tmp_path / "rb").out_dir]
    with pytest.raises(VlbenchError, match="custom:manifest.jsonl") as err:
        build_leaderboard(runs, tmp_path / "lb", plots=False)
    assert "--dataset-name" in err.value.hint


def test_named_datasets_and_model_share_one_leaderboard(counting_plugin, two_manifests, tmp_path):
    from vlbench.leaderboards import build_leaderboard

    a, b = two_manifests
    ra = _run(a, tmp_path / "ra", dataset_name="flickr-part-a", model_name="Counting (16-d)")
    rb = _run(b, tmp_path / "rb", dataset_name="flickr-part-b", model_name="Counting (16-d)")
    assert ra.results["dataset"]["name"] == "flickr-part-a" and ra.results["model"]["label"] == "Counting (16-d)"
    build_leaderboard([ra.out_dir, rb.out_dir], tmp_path / "lb", plots=False)
    with open(tmp_path / "lb" / "clean_retrieval.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert sorted((r["dataset"], r["model"]) for r in rows) == [("flickr-part-a", "Counting (16-d)"),
                                                               ("flickr-part-b", "Counting (16-d)")]


@pytest.mark.parametrize("bad", ["", "   ", "two\nlines"])
def test_unusable_names_are_refused(counting_plugin, two_manifests, tmp_path, bad):
    from vlbench.errors import OptionError

    # raised from Python, so the message names the keyword argument, not the flag
    with pytest.raises(OptionError, match="dataset_name .* is not a usable name") as err:
        _run(two_manifests[0], tmp_path / "r", dataset_name=bad)
    assert err.value.option == "dataset_name"
    assert not (tmp_path / "r" / "results.json").exists()


def test_a_local_folder_that_shadows_a_hub_id_is_said_even_under_quiet(tiny_models, tmp_path, monkeypatch, capsys):
    """Issue 44: ./openai/clip-vit-base-patch32 in the working directory was loaded for clip:openai/clip-vit-base-
    patch32 without a word. The run says where the weights came from (the local folder, by content hash, not the
    Hub's), under --quiet too, and its identity records the folder's content hash (which `vlbench check` compares)."""
    import shutil

    from support.data import write_manifest

    from vlbench.cli import main

    shutil.copytree(tiny_models("clip"), tmp_path / "work" / "openai" / "clip-vit-base-patch32")
    man = write_manifest(tmp_path / "d", 4)
    monkeypatch.chdir(tmp_path / "work")
    assert main(["run", "--model", "clip:openai/clip-vit-base-patch32", "--dataset", f"custom:{man}", "--quiet",
                 "--num-workers", "0", "--validity", "off", "--out", str(tmp_path / "run"),
                 "--cache-dir", str(tmp_path / "cache")]) == 0
    err = capsys.readouterr().err
    assert "warning: model weights: the local folder" in err and "not the Hub's openai/clip-vit-base-patch32" in err
    ident = json.loads((tmp_path / "run" / "results.json").read_text())["model"]["identity"]
    assert ident["local"]["content_sha256"][:16] in err
