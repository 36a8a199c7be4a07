"""Long-caption sets given hostile or broken inputs: pins, split entries and rows that would write outside the data
folder, read without bound or end in a traceback are refused with a message naming the file (and line)."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from PIL import Image

from vlbench.datasets import longcaptions
from vlbench.datasets.builtin import download_dataset
from vlbench.datasets.core import load_dataset
from vlbench.errors import DataError, UnknownNameError

DOCCI = "docci_descriptions.jsonlines"


def _docci(tmp_path, lines) -> os.PathLike:
    root = tmp_path / "docci"
    root.mkdir(parents=True, exist_ok=True)
    (root / DOCCI).write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return root


def _row(n: int, **kw) -> dict:
    return dict({"example_id": f"test_{n}", "split": "test", "image_file": f"test_{n}.jpg",
                 "description": f"A long description of picture {n}."}, **kw)


def test_a_pin_file_that_is_a_dangling_link_is_not_written_through(tmp_path):
    root = _docci(tmp_path, [_row(1)])
    outside = tmp_path / "outside" / "pin.txt"  # the link's target does not exist: writing through it creates it
    (root / f"{DOCCI}.sha256").symlink_to(outside)
    with pytest.raises(DataError) as info:
        load_dataset("docci", data_dir=tmp_path, require_images=False)
    assert f"{DOCCI}.sha256" in info.value.message and "link" in info.value.message
    assert not outside.exists() and not outside.parent.exists()


def test_a_pin_file_that_is_a_folder_is_an_error_naming_it(tmp_path):
    root = _docci(tmp_path, [_row(1)])
    (root / f"{DOCCI}.sha256").mkdir()
    with pytest.raises(DataError) as info:
        load_dataset("docci", data_dir=tmp_path, require_images=False)
    assert f"{DOCCI}.sha256" in info.value.message and "folder" in info.value.message


def test_a_first_use_pin_is_a_plain_file_written_atomically(tmp_path):
    root = _docci(tmp_path, [_row(1)])
    ds = load_dataset("docci", data_dir=tmp_path, require_images=False)
    pin = root / f"{DOCCI}.sha256"
    assert not pin.is_symlink() and pin.read_text().strip() == hashlib.sha256((root / DOCCI).read_bytes()).hexdigest()
    assert ds.source["text"]["sha256"] == pin.read_text().strip()
    assert not [p for p in root.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("line, words", [
    (_row(2, image_file=None), "'image_file' is null"),
    ({"example_id": "test_2", "split": "test", "description": "no image"}, "'image_file' is missing"),
    ('["test", "test_2.jpg", "a list, not an object"]', "not an object"),
    (_row(2, description=None), "'description' is null"),
    (_row(2, description=["a", "list"]), "'description' is a JSON list"),
    ("{not json", "not JSON"),
])
def test_a_broken_docci_row_is_an_error_naming_its_line(tmp_path, line, words):
    _docci(tmp_path, [_row(1), "", line])
    with pytest.raises(DataError) as info:
        load_dataset("docci", data_dir=tmp_path, require_images=False)
    assert ": line 3" in info.value.message and words in info.value.message and DOCCI in info.value.message


def test_an_overlong_docci_line_is_refused_with_its_number_without_reading_it_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(longcaptions, "MAX_LINE_BYTES", 4096)
    _docci(tmp_path, [_row(1), _row(2, description="word " * 10_000)])
    reads = []
    real_open = open

    def counting_open(path, mode="r", *a, **kw):  # what the reader asks of the file, at the OS boundary
        fh = real_open(path, mode, *a, **kw)
        if str(path).endswith(DOCCI) and "b" in mode:
            readline = fh.readline
            fh = _Spy(fh, lambda limit=-1: reads.append(limit) or readline(limit))
        return fh

    monkeypatch.setattr("builtins.open", counting_open)
    with pytest.raises(DataError) as info:
        load_dataset("docci", data_dir=tmp_path, require_images=False)
    assert ": line 2 is over 4,096 bytes" in info.value.message
    assert reads and all(0 < limit <= 4097 for limit in reads)  # every read bounded: a line never sits whole


class _Spy:
    def __init__(self, fh, readline):
        self._fh, self.readline = fh, readline

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()

    def __getattr__(self, name):
        return getattr(self._fh, name)


def _dci(tmp_path, entries, annotations: dict) -> os.PathLike:
    root = tmp_path / "dci" / "densely_captioned_images"
    (root / "annotations").mkdir(parents=True)
    (root / "splits.json").write_text(json.dumps({"test": entries}))
    for name, body in annotations.items():
        (root / "annotations" / name).write_text(body if isinstance(body, str) else json.dumps(body))
    return root


def test_a_dci_split_entry_outside_the_annotation_folder_is_refused(tmp_path):
    secret = json.dumps({"image": "sa_1.jpg", "extra_caption": "A user's secret text."})
    (tmp_path / "outside.json").write_text(secret)
    for i, entry in enumerate(("../../../outside.json", "../../../../outside.json", str(tmp_path / "outside.json"),
                               "a/../../../../outside.json")):
        folder = tmp_path / str(i)
        folder.mkdir()
        (folder / "outside.json").write_text(secret)  # what the entry reaches when followed
        _dci(folder, [entry], {})
        with pytest.raises(DataError) as info:
            load_dataset("dci-extra", data_dir=folder, require_images=False)
        assert repr(entry) in info.value.message and "annotations" in info.value.message


@pytest.mark.parametrize("body, words", [(None, "does not exist"), ("{not json", "is not JSON"),
                                         ("[1, 2]", "not an object"), ({"extra_caption": "no image"}, "'image'")])
def test_a_missing_or_broken_dci_annotation_names_the_file(tmp_path, body, words):
    _dci(tmp_path, ["sa_1.json"], {} if body is None else {"sa_1.json": body})
    with pytest.raises(DataError) as info:
        load_dataset("dci-extra", data_dir=tmp_path, require_images=False)
    assert "sa_1.json" in info.value.message and words in info.value.message


def test_a_dci_annotation_inside_the_folder_still_loads(tmp_path):
    root = _dci(tmp_path, ["sa_1.json"], {"sa_1.json": {"image": "sa_1.jpg", "short_caption": "A dog.",
                                                         "extra_caption": "It  runs."}})
    Image.new("RGB", (8, 8)).save(root / "photos.jpg")
    ds = load_dataset("dci-short-extra", data_dir=tmp_path, require_images=False)
    assert ds.captions == ["A dog. It runs."]


def test_an_html_page_saved_as_the_captions_is_not_pinned(tmp_path):
    root = _docci(tmp_path, [])
    (root / DOCCI).write_text("<!doctype html><html><body>Please sign in</body></html>\n")
    with pytest.raises(DataError) as info:
        load_dataset("docci", data_dir=tmp_path, require_images=False)
    assert "HTML" in info.value.message and not (root / f"{DOCCI}.sha256").exists()


def test_download_dci_names_its_two_variants(tmp_path):
    with pytest.raises(UnknownNameError) as info:
        download_dataset("dci", tmp_path)
    assert "'dci-extra', 'dci-short-extra'" in str(info.value)


def test_an_html_login_page_served_for_the_docci_captions_is_not_installed(mirror, tmp_path, capsys):
    from vlbench import cli

    text = longcaptions.SETS["docci"].text
    assert text is not None and text.url is not None and text.sha256 is None  # unpinned: only a sniff can tell
    mirror.add_file(text.url, b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body></body></html>\n")
    assert cli.main(["download", "docci", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "HTML page" in err and "proxy" in err and "Traceback" not in err
    assert not (tmp_path / "docci" / DOCCI).exists() and not (tmp_path / "docci" / f"{DOCCI}.sha256").exists()
