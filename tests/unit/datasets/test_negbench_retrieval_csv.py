"""NegBench's COCO retrieval CSVs as datasets (vlbench/datasets/negbench): the released columns (filepath, captions as
a Python list literal) read as the authors' loader reads them, through load_dataset by name with ?options, and bad
input named by its file and row with the fix."""

from __future__ import annotations

import ast
import csv
import shutil
from pathlib import Path

import numpy as np
import pytest

from vlbench.datasets.core import load_dataset
from vlbench.datasets.negbench import FILES, read_rows
from vlbench.errors import DataError

FIXTURE = Path(__file__).parents[2] / "fixtures" / "negbench"
NEGATED = FIXTURE / FILES["negbench-coco"]


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _write(path: Path, rows: list[dict], header=("filepath", "captions")) -> Path:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(header), lineterminator="\n", extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return path


def _images(folder: Path, names) -> Path:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for k, name in enumerate(names):
        Image.fromarray(np.full((6, 6, 3), 30 * k, dtype=np.uint8)).save(folder / name)
    return folder


def test_the_released_rows_load_by_name_with_their_captions_in_order(tmp_path):
    data = tmp_path / "data" / "negbench"
    data.mkdir(parents=True)
    for f in FILES.values():
        shutil.copy(FIXTURE / f, data / f)
    rows = _rows(NEGATED)
    names = [r["filepath"].rsplit("/", 1)[1] for r in rows]
    images = _images(tmp_path / "val2017", names)
    ds = load_dataset(f"negbench-coco?images={images}", data_dir=str(tmp_path / "data"))
    assert ds.name == "negbench-coco" and ds.images == names and ds.image_root == images
    want = [c for r in rows for c in ast.literal_eval(r["captions"])]
    assert ds.captions == want and "A man's pizza on a plate with no fork in sight." in want  # a quoted apostrophe
    assert ds.caption_to_image.tolist() == [i for i, r in enumerate(rows) for _ in ast.literal_eval(r["captions"])]
    assert ds.source["annotations"].endswith(FILES["negbench-coco"])
    orig = load_dataset("negbench-coco-original", data_dir=str(tmp_path / "data"), require_images=False)
    assert orig.images == names and orig.captions[0] == "A dog leaps to catch a frisbee in a park."


@pytest.mark.parametrize("change, said", [
    (lambda r: r.update(captions="['a dog', "), "row 2 (line 3): captions \"['a dog', \" is not a Python list"),
    (lambda r: r.update(captions="[]"), "row 2 (line 3): captions is an empty list"),
    (lambda r: r.update(captions="'a dog'"), "row 2 (line 3): captions is str, not a non-empty list"),
    (lambda r: r.update(captions="['a dog', 3]"), "row 2 (line 3): caption 1 is 3, not a non-empty string"),
    (lambda r: r.update(captions="[__import__('os').getcwd()]"), "is not a Python list of strings"),  # never run
    (lambda r: r.update(filepath="/data/val2017/"), "row 2 (line 3): filepath '/data/val2017/' names no file"),
    (lambda r: r.update(filepath="/other/000000000139.jpg"), "row 2 (line 3): image '000000000139.jpg' is listed "
                                                             "again (first in row 1)"),
])
def test_a_bad_row_is_named_with_its_row_and_the_fix(tmp_path, change, said):
    rows = _rows(NEGATED)
    change(rows[1])
    path = _write(tmp_path / "x.csv", rows)
    with pytest.raises(DataError) as err:
        read_rows(path, "negbench-coco")
    assert said in err.value.message and str(path) in err.value.message and err.value.hint


def test_a_missing_column_a_missing_file_an_unknown_option_and_a_missing_image(tmp_path):
    path = _write(tmp_path / "x.csv", _rows(NEGATED), header=("filepath",))
    with pytest.raises(DataError, match="has no column 'captions'"):
        read_rows(path, "negbench-coco")
    with pytest.raises(DataError) as err:
        load_dataset("negbench-coco", data_dir=str(tmp_path / "empty"))
    assert FILES["negbench-coco"] in err.value.message and "drive.google.com" in err.value.hint
    with pytest.raises(DataError, match="has no option 'languages'"):
        load_dataset("negbench-coco?languages=de", data_dir=str(tmp_path))
    good = shutil.copy(NEGATED, tmp_path / "n.csv")
    images = _images(tmp_path / "img", ["000000000139.jpg"])
    with pytest.raises(DataError) as err:
        load_dataset(f"negbench-coco?file={good}&images={images}")
    assert "4 image file(s) of 'negbench-coco' are missing" in err.value.message
    assert "COCO 2017 validation images" in err.value.hint


def test_negbench_coco_passes_the_dataset_conformance_checks(tmp_path):
    from vlbench.testing import check_dataset

    (tmp_path / "negbench").mkdir()
    shutil.copy(NEGATED, tmp_path / "negbench" / NEGATED.name)
    images = _images(tmp_path / "val2017", [r["filepath"].rsplit("/", 1)[1] for r in _rows(NEGATED)])
    report = check_dataset(f"negbench-coco?images={images}", data_dir=str(tmp_path))
    assert report.passed == ["loads", "images", "captions", "caption ids", "caption issues reported", "gallery",
                             "description", "loads the same twice", "image files"] and not report.skipped


def test_vlbench_download_says_where_to_get_the_file_and_the_images(tmp_path, capsys):
    from vlbench.cli import main

    assert main(["download", "negbench-coco-original", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "get COCO_val_retrieval.csv from https://drive.google.com/" in out and str(tmp_path / "negbench") in out
    assert "COCO 2017 validation images (val2017)" in out and not (tmp_path / "negbench").exists()
