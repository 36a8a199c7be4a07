"""Issue #32 item 2: resume and overwrite that cannot mix or lose a run. ``resume`` returns a finished run only
when every option that changes a number, the dataset's content and the run's files are what this run would
have; each differing option is named. ``overwrite`` replaces only a folder holding a vlbench run (proved by its
record) and removes what that run wrote (its explain page and rescore files included), nothing else."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support.data import write_manifest
from vlbench.errors import OptionError
from vlbench.pipeline.runner import run


def _kw(**more):
    return dict(quiet=True, num_workers=0, n_boot=20, validity="off", perturb="char-swap", **more)


@pytest.fixture(scope="module")
def finished(tmp_path_factory, counting_plugin):
    root = tmp_path_factory.mktemp("resume")
    man = write_manifest(root / "data", 6)
    out = root / "run"
    first = run(model="counting", dataset=f"custom:{man}", out=str(out), cache_dir=str(root / "cache"), **_kw())
    return {"root": root, "manifest": man, "out": out, "run_id": first.record.run_id}


def _resume(f, **options):
    kw = _kw(cache_dir=str(f["root"] / "cache"))
    kw.update(options)
    return run(model=kw.pop("model", "counting"), dataset=kw.pop("dataset", f"custom:{f['manifest']}"),
               out=str(kw.pop("out", f["out"])), resume=True, **kw)


def test_resume_returns_the_run_when_every_option_is_the_same(finished):
    same = _resume(finished, batch_size=3, model_name="a label", quiet=False)  # neither changes a number
    assert same.record.run_id == finished["run_id"]


@pytest.mark.parametrize("options, named", [
    ({"k": (1, 5)}, "k [1, 5, 10], not [1, 5]"),
    ({"seed": 1}, "seed 0, not 1"),
    ({"p": 5}, "p 10, not 5"),
    ({"n_boot": 30}, "n_boot 20, not 30"),
    ({"perturb": "char-swap,shuffle-all-words"}, "perturb ['char-swap'], not ['char-swap', 'shuffle-all-words']"),
    ({"perturb_images": "gaussian_noise:3"}, "perturb_images None, not 'gaussian_noise:3'"),
    ({"corrupt_at": "original"}, "corrupt_at 'input', not 'original'"),
    ({"truncate_chars": 20}, "truncate_chars None, not 20"),
    ({"precision": "fp16"}, "precision 'fp32', not 'fp16'"),
    ({"validity": "sample"}, "validity 'off', not 'sample'"),
])
def test_resume_refuses_each_option_that_changes_a_number_naming_it(finished, options, named):
    with pytest.raises(OptionError) as info:
        _resume(finished, **options)
    assert info.value.option == "resume" and named in str(info.value), str(info.value)
    assert "every option that changes a number" in str(info.value) and "overwrite" in str(info.value)


def test_resume_refuses_distractors_asked_for_but_absent(finished, tmp_path):
    extra = tmp_path / "adv.txt"
    extra.write_text("a red bicycle leaning on a wall\n")
    with pytest.raises(OptionError, match=r"distractors None, not 'captions:.*adv.txt'"):
        _resume(finished, distractors=f"captions:{extra}")


def test_resume_refuses_another_dataset_with_the_same_file_name(finished, tmp_path):
    """Same name (custom:manifest.jsonl), other captions: the content hash differs."""
    other = write_manifest(tmp_path / "data", 6, start=6)
    assert other.name == finished["manifest"].name
    with pytest.raises(OptionError, match=r"dataset content .* now has other captions, images or gallery"):
        _resume(finished, dataset=f"custom:{other}")


def test_resume_refuses_a_run_whose_files_changed(finished, tmp_path):
    out = shutil.copytree(finished["out"], tmp_path / "copy", ignore=shutil.ignore_patterns(".vlbench.lock"))
    (out / "flips.csv").write_text("edited\n")
    with pytest.raises(OptionError, match=r"flips.csv is not the file run .* wrote"):
        _resume(finished, out=out)


def test_resume_refuses_a_run_without_recorded_options(finished, tmp_path):
    out = shutil.copytree(finished["out"], tmp_path / "old", ignore=shutil.ignore_patterns(".vlbench.lock"))
    doc = json.loads((out / "results.json").read_text())
    del doc["settings"]["options"]
    doc.pop("record_hash")  # a run written before the options were recorded was not sealed either
    (out / "results.json").write_text(json.dumps(doc))
    with pytest.raises(OptionError, match="no record of its options"):
        _resume(finished, out=out)


@pytest.mark.parametrize("how", ["truncated", "folder"])
def test_resume_and_overwrite_of_an_unreadable_results_json_are_clear_errors(finished, tmp_path, how, capsys):
    """A truncated results.json, or a folder named results.json: a message naming the file, never a traceback
    (and overwrite deletes nothing)."""
    from vlbench.cli import main

    out = tmp_path / how
    out.mkdir()
    if how == "truncated":
        (out / "results.json").write_text((finished["out"] / "results.json").read_text()[:500])
    else:
        (out / "results.json").mkdir()
    (out / "table.md").write_text("kept")
    for flag in ("--resume", "--overwrite"):
        capsys.readouterr()
        assert main(["run", "--model", "counting", "--dataset", f"custom:{finished['manifest']}", "--out", str(out),
                     "--quiet", flag]) == 2
        err = capsys.readouterr().err
        assert f"{flag}: {out / 'results.json'} is not a readable vlbench run record" in err and "Traceback" not in err
    assert (out / "table.md").read_text() == "kept" and (out / "results.json").exists()


def test_overwrite_of_a_folder_with_a_users_own_results_json_deletes_nothing(finished, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    files = {"results.json": '{"accuracy": 0.93, "notes": "my own experiment"}\n', "table.md": "| my | table |\n",
             "per_query.csv.gz": "not vlbench's", "notes.txt": "keep me"}
    for name, text in files.items():
        (out / name).write_text(text)
    with pytest.raises(OptionError, match="overwrite: .*results.json is not a readable vlbench run record") as info:
        run(model="counting", dataset=f"custom:{finished['manifest']}", out=str(out), overwrite=True, **_kw())
    assert info.value.option == "overwrite"
    assert {p.name: p.read_text() for p in out.iterdir()} == files


def test_overwrite_removes_what_the_run_wrote_and_nothing_else(finished, tmp_path, capsys):
    """The replaced run's explain page and rescore files go with it; a user's files beside them stay."""
    from vlbench.explain import explain
    from vlbench.rescore import rescore

    out = shutil.copytree(finished["out"], tmp_path / "nb", ignore=shutil.ignore_patterns(".vlbench.lock"))
    explain(out)
    rescore(out, ["clip_benchmark"])
    (out / "rescore" / "mine.json").write_text('{"run_id": "someone else"}')
    (out / "notes.txt").write_text("keep me")
    (tmp_path / "elsewhere.html").write_text("<title>vlbench failure browser: x</title>")
    new = run(model="counting", dataset=f"custom:{finished['manifest']}", out=str(out), overwrite=True,
              cache_dir=str(finished["root"] / "cache"), **dict(_kw(), quiet=False))
    assert new.record.run_id != finished["run_id"]
    line = next(x for x in capsys.readouterr().err.splitlines() if "(overwrite)" in x)
    assert "removed explain.html, rescore/clip_benchmark.json, table.md" in line and line.endswith("results.json")
    left = sorted(str(p.relative_to(out)) for p in Path(out).rglob("*") if p.name != ".vlbench.lock")
    assert "explain.html" not in left and "rescore/clip_benchmark.json" not in left
    assert {"notes.txt", "rescore/mine.json"} <= set(left)
    assert (out / "notes.txt").read_text() == "keep me"
