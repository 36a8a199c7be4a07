"""Options refused instead of ignored and messages that say all at once:
extended positives on a dataset without them, an empty custom: path, images in the first offline message,
flat download errors, a checkpoint folder without processor files caught in preflight, the digit-bank
fallback on the console, and `vlbench cache ls` columns that line up."""

from __future__ import annotations

from pathlib import Path

import pytest

from vlbench import cli
from vlbench.datasets.core import load_dataset
from vlbench.errors import DataError, ModelError


def test_extra_positives_on_a_custom_dataset_are_refused(manifest, tmp_path, capsys, counting_plugin):
    for kind in ("eccv", "cxc", "eccv-all", "cxc-union"):
        with pytest.raises(DataError) as info:
            load_dataset(f"custom:{manifest}", extra_positives=kind)
        assert f"--extra-positives {kind}: dataset 'custom:{manifest}' has no extended positives" in str(info.value)
        assert "i.e. coco" in str(info.value) and "use it with --dataset coco" in str(info.value)
    code = cli.main(["run", "--model", "counting", "--dataset", f"custom:{manifest}", "--extra-positives", "cxc",
                     "--quiet", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "has no extended positives" in err and not (tmp_path / "o" / "results.json").exists()


def test_extra_positives_ignored_by_a_dataset_plugin_are_refused(manifest, monkeypatch):
    from vlbench import registry
    from vlbench.datasets.core import load_custom

    monkeypatch.setattr(registry.datasets, "_entries", dict(registry.datasets._entries))  # restored afterwards
    registry.datasets.register("ignores-kwargs", lambda **kw: load_custom(str(manifest), require_images=False),
                               source="plugin:test")
    with pytest.raises(DataError, match="dataset 'ignores-kwargs' has no extended positives"):
        load_dataset("ignores-kwargs", extra_positives="eccv", require_images=False)


def test_extra_positives_on_flickr30k_are_refused(shared_captions):
    with pytest.raises(DataError, match="dataset 'flickr30k' has no extended positives"):
        load_dataset("flickr30k", data_dir=shared_captions, require_images=False, extra_positives="cxc")


@pytest.mark.parametrize("spec", ["custom:", "custom:  "])
def test_an_empty_custom_path_says_so(spec):
    with pytest.raises(DataError) as info:
        load_dataset(spec)
    text = str(info.value)
    assert "the path after 'custom:' is empty" in text and "custom:<path of a JSONL manifest>" in text
    assert "'.'" not in text


def test_first_offline_message_lists_captions_and_images(tmp_path, monkeypatch):
    from vlbench.pipeline import preflight as PF

    monkeypatch.setattr(PF, "network_reachable", lambda *a, **k: False)
    _, problems, _ = PF.check_dataset("flickr30k", data_dir=tmp_path)
    assert [p.item for p in problems] == ["dataset 'flickr30k'", "images of 'flickr30k'"]
    assert problems[1].what == (f"the image folder {tmp_path / 'images' / 'flickr30k'} does not exist; 'flickr30k' "
                                "has 1,000 test images")
    assert "vlbench download flickr30k" in problems[1].fix and "images_flickr_1k_test.zip" in problems[1].fix
    folder = tmp_path / "images" / "coco"
    folder.mkdir(parents=True)
    for i in range(3):
        (folder / f"COCO_val2014_{i:012d}.jpg").write_bytes(b"x")
    (folder / "notes.txt").write_text("not an image")
    _, problems, _ = PF.check_dataset("coco-fg", data_dir=tmp_path)
    assert problems[1].what.endswith("holds 3 image file(s); 'coco-fg' has 5,000 test images")
    with pytest.raises(DataError) as info:  # the whole preflight says both in its first message
        PF.report(problems)
    assert "caption file" in str(info.value) and "holds 3 image file(s)" in str(info.value)


def test_download_errors_are_one_flat_message(tmp_path, monkeypatch):
    from vlbench.datasets.builtin import download_dataset

    monkeypatch.setenv("VLBENCH_OFFLINE", "1")
    with pytest.raises(DataError) as info:
        download_dataset("flickr30k-fg", tmp_path)
    msg = info.value.message
    assert msg.startswith("the captions of 'flickr30k-fg' are made from those of 'flickr30k', and the captions of "
                          f"'flickr30k' are not in {tmp_path} and could not be downloaded: https://")
    assert msg.endswith(": offline mode is on") and msg.count("could not be downloaded") == 1 and "(" not in msg
    assert "'vlbench download flickr30k'" in info.value.hint


def _folder(root: Path, *files: str) -> Path:
    root.mkdir(parents=True)
    for f in files:
        (root / f).write_text("{}")
    return root


def test_a_checkpoint_folder_without_processor_files_is_caught_in_preflight(tmp_path):
    from vlbench.pipeline.preflight import check_model

    bare = _folder(tmp_path / "bare", "config.json", "model.safetensors")
    problems = check_model(f"clip:{bare}")
    assert len(problems) == 1 and problems[0].error is ModelError
    assert problems[0].what == (f"local folder {str(bare)!r} has no tokenizer files, no image-processor config "
                                "(tokenizer.json or vocab.json; preprocessor_config.json or processor_config.json)")
    assert "save_pretrained" in problems[0].fix
    no_weights = _folder(tmp_path / "nw", "config.json", "vocab.json", "merges.txt", "preprocessor_config.json")
    assert "has no weights (model.safetensors or pytorch_model.bin)" in check_model(f"clip:{no_weights}")[0].what
    full = _folder(tmp_path / "full", "config.json", "model.safetensors", "tokenizer.json", "preprocessor_config.json")
    assert check_model(f"clip:{full}") == []
    sharded = _folder(tmp_path / "sh", "config.json", "model.safetensors.index.json", "vocab.txt",
                      "processor_config.json")
    assert check_model(f"align:{sharded}") == []


def test_a_saved_tiny_model_passes_the_folder_check(tiny_models):
    from vlbench.models.hf import folder_problems

    assert folder_problems(tiny_models("clip")) == []


def test_digit_bank_fallback_is_printed(manifest, monkeypatch, capsys, tmp_path):
    import vlbench.shortcuts.digits as S
    from vlbench.pipeline.run_config import RunConfig
    from vlbench.pipeline.variants import plan_variants

    def no_mnist(root, download):
        raise RuntimeError("Error downloading train-images-idx3-ubyte.gz")

    monkeypatch.setattr(S, "_mnist_bank", no_mnist)
    bank = S.load_digit_bank("auto", cache_dir=tmp_path)
    assert bank.source == "sklearn-digits" and "MNIST could not be loaded" in bank.fallback
    ds = load_dataset(f"custom:{manifest}")
    cfg = RunConfig(model="m", dataset=f"custom:{manifest}", shortcuts="matched,mismatched", cache_dir=str(tmp_path))
    variants = plan_variants(cfg, ds)
    err = capsys.readouterr().err.splitlines()
    notes = [x for x in err if x.startswith("note: the shortcut probes use scikit-learn's 8x8 digits, not MNIST")]
    assert len(notes) == 1 and "Error downloading train-images-idx3-ubyte.gz" in notes[0]  # once for two probes
    assert all(v.meta["digit_fallback"] == bank.fallback for v in variants)
    import dataclasses

    plan_variants(dataclasses.replace(cfg, quiet=True), ds)
    assert capsys.readouterr().err == ""
    from vlbench.shortcuts.conditions import shortcut_summary

    assert shortcut_summary(variants)["digit_fallback"] == bank.fallback  # recorded in results.json too


def _starts(line: str, cells: list[str]) -> list[int]:
    pos, out = 0, []
    for c in cells:
        pos = line.index(c, pos)
        out.append(pos)
        pos += len(c)
    return out


def test_cache_ls_columns_line_up(monkeypatch, capsys, tmp_path):
    import vlbench.encoding.cache as C

    rows = [{"model_hash": "1b9373598b307765", "model": "clip:/home/someone/checkpoints/a-very-long-folder/my-clip",
             "modality": "image", "vectors": 40, "shards": 2, "bytes": 81920, "modified": "2026-11-24 05:34"},
            {"model_hash": "1df42bc942fd7b89", "model": "counting", "modality": "text", "vectors": 123456,
             "shards": 12, "bytes": 123_456_789, "modified": "2026-11-24 04:48"}]
    prows = [{"key": "k" * 40, "perturbations": ["char-swap", "missing-char"], "bytes": 2048,
              "modified": "2026-11-24 04:48"}, {"key": "short", "perturbations": ["shuffle-all-but-nouns-adjectives"] * 3,
                                                "bytes": 12_345_678, "modified": "2026-11-24 04:49"}]
    monkeypatch.setattr(C, "list_cache", lambda root: rows)
    monkeypatch.setattr(C, "list_perturbation_cache", lambda root: prows)
    assert cli.main(["cache", "ls", "--cache-dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    head, a, b = lines[0], lines[1], lines[2]
    # left-aligned text columns start where their header starts; numbers end where their header ends
    for col in ("model", "modality", "modified"):
        start = head.index(f" {col}") + 1
        assert a[start - 1] == " " and b[start - 1] == " " and a[start] != " " and b[start] != " ", col
    for col, va, vb in (("vectors", "40", "123456"), ("shards", "2", "12"), ("MB", "0.1", "123.5")):
        end = head.index(col) + len(col)
        assert a[:end].endswith(" " + va) and b[:end].endswith(" " + vb), col
    assert a.index("2026-11-24 05:34") == b.index("2026-11-24 04:48") == head.index("modified")
    p_head = next(i for i, x in enumerate(lines) if x.startswith("perturbed captions: 2"))
    ph, p1, p2 = lines[p_head + 1], lines[p_head + 2], lines[p_head + 3]
    assert p1.index("2026") == p2.index("2026") == ph.index("modified")
    assert p1.index("char-swap") == p2.index("shuffle") == ph.index("perturbations")
    stores_head = next(i for i, x in enumerate(lines) if x.startswith("stores under"))
    table = lines[stores_head + 1:]
    what = table[0].index("what")
    assert all(len(x) > what and x[what - 1] == " " and x[what] != " " for x in table)
    files_end = table[0].index("files") + len("files")
    assert all(x[files_end - 1].isdigit() and x[files_end] == " " for x in table[1:])
