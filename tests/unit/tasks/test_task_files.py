"""SugarCrepe-format task files and the order task on unusable captions: one test per
class of failure, each a clear error (exit 2, no traceback) naming the file and the item."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vlbench.cli import main
from vlbench.errors import DataError
from vlbench.tasks import sugarcrepe_items

SHARED_SC = Path("/work/shared/data/sugarcrepe")
ROW = {"filename": "000000000139.jpg", "caption": "a dog on a sofa", "negative_caption": "a sofa on a dog"}


def _write(folder: Path, name: str, content) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode("utf-8"))
    return path


@pytest.mark.parametrize("filename, said", [
    ("../../etc/passwd.jpg", "has a '..' component (it would leave the images folder)"),
    ("images/../../x.jpg", "has a '..' component"),
    ("/etc/passwd", "is an absolute path"),
    ("C:\\images\\x.jpg", "is an absolute path"),
    (".", "names the images folder itself"),
])
def test_image_names_outside_the_folder_are_refused(tmp_path, filename, said):
    path = _write(tmp_path, "swap_obj", {"0": ROW, "7": {**ROW, "filename": filename}})
    with pytest.raises(DataError) as info:
        sugarcrepe_items(tmp_path, "swap_obj", check_images=False)
    assert info.value.message.startswith(f"SugarCrepe file {path} item '7': image name {filename!r} {said}")
    assert "--images-dir" in info.value.hint


@pytest.mark.parametrize("content, said", [
    ([ROW], "holds a JSON list, not an object of items"),
    ({"0": ROW, "1": ["not", "an", "object"]}, "item '1' is a JSON list, not an object"),
    ({"0": ROW, "1": "text"}, "item '1' is a JSON str, not an object"),
    ({}, "has no items"),
    ({"0": {**ROW, "caption": ""}}, "item '0' lacks filename / caption / negative_caption"),
    (b'{"0": {"filename": "a.jpg", "caption": "caf\xe9", "negative_caption": "x"}}',
     "is not UTF-8 text (byte 0xe9 at offset 43)"),
    (b'{"0": ', "is not valid JSON"),
])
def test_malformed_files_name_the_file_and_item(tmp_path, capsys, content, said):
    path = _write(tmp_path / "sugarcrepe", "swap_obj", content)
    with pytest.raises(DataError) as info:
        sugarcrepe_items(tmp_path / "sugarcrepe", "swap_obj", check_images=False)
    assert info.value.message.startswith(f"SugarCrepe file {path} ") and said in info.value.message
    rc = main(["run", "--task", "sugarcrepe", "--model", "counting", "--dataset", "sugarcrepe:swap_obj",
               "--data-dir", str(tmp_path), "--images-dir", str(tmp_path), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and said in err and "Traceback" not in err and not (tmp_path / "r" / "results.json").exists()


def test_swap_obj_runs_with_only_its_own_file(counting_plugin, tmp_path):
    """Only swap_obj.json in the data folder (not all seven): the run works, and the blind baseline leaves out
    the same 183 COCO test images as with all seven files."""
    from vlbench.tasks.run import run_task

    if not (SHARED_SC / "swap_obj.json").is_file():
        pytest.skip(f"the SugarCrepe files are not at {SHARED_SC}")
    data = tmp_path / "data"
    (data / "sugarcrepe").mkdir(parents=True)
    shutil.copy(SHARED_SC / "swap_obj.json", data / "sugarcrepe" / "swap_obj.json")
    captions = Path("/work/shared/data/captions/coco5k_test.jsonl")
    if captions.is_file():
        (data / "captions").mkdir()
        shutil.copy(captions, data / "captions" / captions.name)
    images = tmp_path / "val2017"
    images.mkdir()
    names = {r["filename"] for r in json.loads((SHARED_SC / "swap_obj.json").read_text()).values()}
    for n in sorted(names):
        Image.fromarray(np.full((8, 8, 3), int(n[-7:-4]) % 256, np.uint8)).save(images / n)
    res = run_task(task="sugarcrepe", model="counting", dataset="sugarcrepe:swap_obj", data_dir=str(data),
                   images_dir=str(images), out=str(tmp_path / "r"), quiet=True, num_workers=0)
    assert res.results["dataset"]["n_items"] == 245 and res.results["dataset"]["subsets"] == ["swap_obj"]
    info = res.results["task"]["blind_baseline"]
    if captions.is_file():
        assert info["available"] and info["excluded_images"] == 183


def test_order_task_on_captions_no_shuffle_changes(counting_plugin, tmp_path, capsys):
    from support.data import write_images

    names = write_images(tmp_path / "d" / "images", 3)
    manifest = tmp_path / "d" / "m.jsonl"
    one_word = [["dog", "Dog."], ["cat", "cat"], ["sky", "tree"]]
    manifest.write_text("".join(json.dumps({"image": f"images/{n}", "captions": c}) + "\n"
                                for n, c in zip(names, one_word)))
    rc = main(["run", "--task", "order", "--model", "counting", "--dataset", f"custom:{manifest}",
               "--num-workers", "0", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and "no word-order shuffle changes any of the 6 captions" in err and "Traceback" not in err
    # some usable captions: the others are skipped, counted and said
    mixed = [["dog", "a brown dog runs on the wet sand"], ["cat", "two cats sleep on a red sofa"], ["sky", "tree"]]
    manifest.write_text("".join(json.dumps({"image": f"images/{n}", "captions": c}) + "\n"
                                for n, c in zip(names, mixed)))
    rc = main(["run", "--task", "order", "--model", "counting", "--dataset", f"custom:{manifest}",
               "--num-workers", "0", "--out", str(tmp_path / "r2")])
    err = capsys.readouterr().err
    assert rc == 0 and "note: --task order skips 4 of 6 captions that no word-order shuffle changes" in err
    cond = json.loads((tmp_path / "r2" / "results.json").read_text())["conditions"]["task:order"]
    assert (cond["items"], cond["captions"], cond["skipped_captions"]) == (2, 6, 4)


def test_sugarcrepe_file_errors_say_where_to_put_the_file(tmp_path, monkeypatch):
    from vlbench.datasets import download
    from vlbench.tasks import run as task_run
    from vlbench.util import paths

    monkeypatch.setattr(paths, "offline", lambda: True)
    with pytest.raises(DataError) as info:
        task_run.sugarcrepe_root(tmp_path, ["swap_obj"])
    assert info.value.message == f"the SugarCrepe file swap_obj.json is not in {tmp_path / 'sugarcrepe'}"
    assert f"in {tmp_path / 'sugarcrepe'}" in info.value.hint and "--data-dir" in info.value.hint
    assert "github.com/RAIVNLab/sugar-crepe" in info.value.hint

    def refuse(url, timeout=60.0):
        raise download.DownloadError(url, "Name or service not known", "check the network")

    monkeypatch.setattr(paths, "offline", lambda: False)
    monkeypatch.setattr(download, "http_get", refuse)
    with pytest.raises(DataError) as info:
        task_run.sugarcrepe_root(tmp_path, ["swap_obj", "swap_att"])
    assert info.value.message == "could not download SugarCrepe's swap_obj.json: Name or service not known"
    assert f"put swap_obj.json, swap_att.json from the data/ folder" in info.value.hint
    assert str(tmp_path / "sugarcrepe") in info.value.hint


def test_missing_images_hint_uses_cli_spelling(tmp_path):
    _write(tmp_path, "swap_obj", {"0": ROW})
    with pytest.raises(DataError) as info:
        sugarcrepe_items(tmp_path, "swap_obj", images_dir=tmp_path / "none")
    assert "--images-dir" in info.value.hint and "images_dir=" in info.value.hint
    assert f"from {tmp_path / 'none'} (first: 000000000139.jpg)" in info.value.message
