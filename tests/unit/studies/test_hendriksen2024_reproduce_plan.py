"""`vlbench reproduce --plan-only` checks every run at once, the chapter protocol's
folder gallery is checked against its published size (refused, or labelled when allowed), and explicit
options win over the protocol's defaults."""

from __future__ import annotations

import json

import pytest

from support.data import write_images
from vlbench.cli import main
from vlbench.errors import VlbenchError
from vlbench.pipeline import galleries as PS
from vlbench.pipeline.runner import RunConfig, run


@pytest.fixture
def no_nltk_data(monkeypatch):
    from vlbench import lang

    monkeypatch.setattr(lang, "nltk_search_dirs", lambda: [lang.nltk_data_dir()])


def test_plan_only_on_an_empty_data_folder_lists_every_missing_item_of_every_run(tmp_path, capsys, no_nltk_data):
    rc = main(["reproduce", "hendriksen2024", "--plan-only", "--data-dir", str(tmp_path / "empty")])  # no --out
    assert rc == 2
    cap = capsys.readouterr()
    assert "16 run(s), 0 already done (reused), 16 to do" in cap.out  # the plan is printed first
    err = cap.err
    assert err.count("vlbench: error:") == 1 and "Traceback" not in err  # one message
    for hub_id in ("kakaobrain/align-base", "BAAI/AltCLIP", "openai/clip-vit-base-patch32", "nvidia/groupvit-gcc-yfcc"):
        assert f"'{hub_id}' is not in the local Hugging Face cache" in err
    assert ("relevance model 'clip:openai/clip-vit-base-patch32' (the hendriksen2024 protocol's fixed relevance "
            "model for DCG)") in err and "--relevance self" in err
    for name, caption_file in (("coco", "coco5k_test.jsonl"), ("coco-fg", "coco5k_fg_test.jsonl"),
                               ("flickr30k", "flickr30k_test.jsonl"), ("flickr30k-fg", "flickr30k_fg_test.jsonl")):
        assert f"caption file '{caption_file}' for '{name}'" in err and f"images of '{name}'" in err
        assert f"t2i gallery of {name} (hendriksen2024)" in err
    assert f"{tmp_path / 'empty' / 'images' / 'coco'}" in err and "40,504 images" in err and "31,783 images" in err
    assert "NLTK data: punkt_tab, averaged_perceptron_tagger_eng" in err
    assert "vlbench setup-language-data --from <folder copied from a machine with nltk_data>" in err
    assert "reproduce: 18 thing(s) the 16 run(s) to do need are missing" in err  # 4+1+4*3+1
    assert "[4 run(s): hendriksen2024-align-coco, hendriksen2024-align-coco-fg" in err  # which runs need it


def test_plan_only_refuses_an_unknown_perturbation(tmp_path, capsys):
    assert main(["reproduce", "hendriksen2024", "--plan-only", "--perturb", "typoz"]) == 2
    err = capsys.readouterr().err
    assert "reproduce --perturb 'typoz'" in err and "typoz" in err
    assert main(["reproduce", "hendriksen2024", "--perturb", "typos", "--data-dir", str(tmp_path)]) == 2
    assert "needs --out" in capsys.readouterr().err


def test_plan_only_names_the_relevance_model_as_given(tmp_path, capsys):
    main(["reproduce", "hendriksen2024", "--plan-only", "--relevance", "self", "--data-dir", str(tmp_path)])
    cap = capsys.readouterr()
    assert "clip-vit-base-patch32 for the chapter" not in cap.out and "--relevance self" in cap.out
    assert "relevance model" not in cap.err
    main(["reproduce", "hendriksen2024", "--plan-only", "--relevance", f"clip:{tmp_path}/rel", "--data-dir",
          str(tmp_path)])
    cap = capsys.readouterr()
    assert f"plus the relevance model clip:{tmp_path}/rel for the chapter protocol's DCG" in cap.out
    assert f"relevance model 'clip:{tmp_path}/rel' (the relevance model given by --relevance (DCG gains))" in cap.err
    assert "openai/clip-vit-base-patch32' (the hendriksen2024" not in cap.err


def test_plan_only_refuses_a_small_gallery_folder_unless_allowed(tmp_path, capsys):
    write_images(tmp_path / "data" / "images" / "flickr30k", 12)
    args = ["reproduce", "hendriksen2024", "--plan-only", "--data-dir", str(tmp_path / "data"), "--dataset",
            "coco=flickr30k", "--dataset", "coco-fg=flickr30k", "--dataset", "flickr30k-fg=flickr30k"]
    main(args)
    err = capsys.readouterr().err
    assert (f"the chapter protocol ranks every image of {tmp_path / 'data' / 'images' / 'flickr30k'} (12 there now) "
            "and needs the whole flickr30k-images folder: 31,783 images") in err
    main(args + ["--allow-partial-gallery"])
    assert "t2i gallery of" not in capsys.readouterr().err


def test_a_run_refuses_a_small_folder_gallery_and_labels_it_when_allowed(tmp_path, folder_manifest, colour_models,  # noqa: F811
                                                                         monkeypatch):
    """The folder of the manifest holds 5 images; the protocol's size for this 'dataset' is set to 8."""
    vec, rel = colour_models
    monkeypatch.setattr(PS, "expected_gallery", lambda cfg: 8)
    kw = dict(model=vec, dataset=f"custom:{folder_manifest}", protocol="hendriksen2024", relevance=rel, k=(1, 2, 5),
              perturb="distraction-true", n_boot=5, quiet=True, validity="off")
    with pytest.raises(VlbenchError) as e:
        run(RunConfig(out=str(tmp_path / "refused"), **kw))
    assert "holds 5 images, the protocol's t2i gallery is the whole" in str(e.value)
    assert "--allow-partial-gallery" in e.value.hint and not (tmp_path / "refused").exists()
    res = run(RunConfig(out=str(tmp_path / "allowed"), allow_partial_gallery=True, **kw))
    proto = res.record.settings["protocol"]
    assert proto["name"] == "hendriksen2024+relevance=colour-rel[gallery=5]"
    assert proto["gallery_size"] == 5 and proto["gallery_expected"] == 8
    assert "protocol: hendriksen2024+relevance=colour-rel[gallery=5]" in (tmp_path / "allowed" / "table.md").read_text()
    # the reproduction's tables say so too
    from vlbench.studies.hendriksen2024.reproduce import run as H

    job = H.Job("hendriksen2024", "clip", vec, "coco", "custom")
    H.write_tables(tmp_path / "repro", {job: res.record})
    assert "hendriksen2024+relevance=colour-rel[gallery=5]" in (tmp_path / "repro" / "hendriksen2024" /
                                                               "table_5_2.md").read_text()
    comp = json.loads((tmp_path / "repro" / "hendriksen2024" / "comparison.json").read_text())
    assert comp["run_protocols"] == {"clip-coco": "hendriksen2024+relevance=colour-rel[gallery=5]"}


def test_explicit_options_win_over_the_protocol(tmp_path, folder_manifest, colour_models):  # noqa: F811
    vec, _ = colour_models
    # --relevance self: the fixed model (not in the cache offline) is not demanded
    res = run(RunConfig(model=vec, dataset=f"custom:{folder_manifest}", protocol="hendriksen2024", relevance="self",
                        out=str(tmp_path / "a"), k=(1, 2, 5), n_boot=5, quiet=True))
    proto = res.record.settings["protocol"]
    assert proto["relevance"] == "self" and proto["name"] == "hendriksen2024+relevance=self"
    assert res.record.settings["relevance"] == "self"
    # --gallery test on the command line: the 3 test images, not the folder's 5
    rc = main(["run", "--model", vec, "--dataset", f"custom:{folder_manifest}", "--protocol", "hendriksen2024",
               "--relevance", "self", "--gallery", "test", "--out", str(tmp_path / "b"), "--k", "1,2,5",
               "--bootstrap", "5", "--quiet"])
    assert rc == 0
    doc = json.loads((tmp_path / "b" / "results.json").read_text())
    assert doc["settings"]["protocol"]["name"] == "hendriksen2024+gallery=test,relevance=self"
    assert doc["dataset"]["gallery"] == "test" and doc["dataset"]["gallery_size"] == 3
    # left out: the protocol's folder gallery
    res = run(RunConfig(model=vec, dataset=f"custom:{folder_manifest}", protocol="hendriksen2024", relevance="self",
                        out=str(tmp_path / "c"), k=(1, 2, 5), n_boot=5, quiet=True))
    assert res.record.settings["protocol"]["gallery"] == "folder" and res.record.dataset.fields["gallery_size"] == 5


def test_a_local_model_under_the_chapter_protocol_names_the_relevance_model(tmp_path, folder_manifest,  # noqa: F811
                                                                            colour_models):
    vec, _ = colour_models
    with pytest.raises(VlbenchError) as e:
        run(RunConfig(model=vec, dataset=f"custom:{folder_manifest}", protocol="hendriksen2024",
                      out=str(tmp_path / "r"), quiet=True))
    text = str(e.value) + (e.value.hint or "")
    assert "relevance model 'clip:openai/clip-vit-base-patch32' (the hendriksen2024 protocol's fixed relevance " \
           "model for DCG)" in text
    assert "--relevance self" in text and "--relevance clip:<folder>" in text


def test_a_real_reproduce_checks_every_run_before_the_first_starts(tmp_path, folder_manifest, colour_models,  # noqa: F811
                                                                    capsys):
    vec, rel = colour_models
    args = ["reproduce", "hendriksen2024", "--out", str(tmp_path / "r"), "--perturb", "distraction", "--relevance",
            rel, "--bootstrap", "5"]
    for key in ("align", "altclip", "clip", "groupvit"):
        args += ["--model", f"{key}={vec}"]
    for key in ("coco", "coco-fg", "flickr30k"):
        args += ["--dataset", f"{key}=custom:{folder_manifest}"]
    args += ["--dataset", f"flickr30k-fg=custom:{tmp_path / 'missing.jsonl'}"]  # the last dataset of every model
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "missing.jsonl" in err and "[4 run(s): hendriksen2024-align-flickr30k-fg" in err
    assert not (tmp_path / "r" / "runs").exists()  # no run was started
