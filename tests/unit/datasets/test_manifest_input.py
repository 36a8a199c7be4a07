"""Manifest input that used to be accepted silently: the same image under two spellings,
captions that are not text, and links into a shared image store (allowed only when named)."""

from __future__ import annotations

import json

import pytest

from support.data import write_images
from vlbench.datasets.core import load_custom
from vlbench.errors import DataError


def _manifest(folder, rows):
    man = folder / "m.jsonl"
    man.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return man


@pytest.mark.parametrize("spelling", ["images/./img000.png", "images//img000.png", "images/sub/../img000.png"])
def test_one_image_under_two_spellings_is_an_error(tmp_path, spelling):
    write_images(tmp_path / "images", 2)
    man = _manifest(tmp_path, [{"image": "images/img000.png", "captions": ["a red square"]},
                               {"image": "images/img001.png", "captions": ["a blue square"]},
                               {"image": spelling, "captions": ["a red square again"]}])
    with pytest.raises(DataError, match=r"line 3: image 'images/img000.png' is listed twice \(first at line 1\)"):
        load_custom(str(man))


@pytest.mark.parametrize("bad, what", [(5, "int"), (None, "null"), (["a", "b"], "list"), ({"t": "x"}, "dict"),
                                       (True, "bool"), (1.5, "float")])
def test_non_string_caption_is_an_error_naming_line_and_caption(tmp_path, bad, what):
    write_images(tmp_path / "images", 2)
    man = _manifest(tmp_path, [{"image": "images/img000.png", "captions": ["a red square"]},
                               {"image": "images/img001.png", "captions": ["fine", bad]}])
    with pytest.raises(DataError, match=rf"line 2: caption 1 is {what} .*not a string") as err:
        load_custom(str(man))
    assert "fix or remove" in err.value.hint


def test_lone_surrogate_is_an_error(tmp_path):
    write_images(tmp_path / "images", 1)
    (tmp_path / "m.jsonl").write_text('{"image": "images/img000.png", "captions": ["a dog \\ud800 runs"]}\n')
    with pytest.raises(DataError, match=r"line 1: caption 0 contains an unpaired UTF-16 surrogate \(U\+D800\)"):
        load_custom(str(tmp_path / "m.jsonl"))


def test_links_into_a_named_image_store_are_allowed(tmp_path, monkeypatch):
    store = tmp_path / "store"
    write_images(store, 2)
    data = tmp_path / "data"
    (data / "images").mkdir(parents=True)
    for n in ("img000.png", "img001.png"):
        (data / "images" / n).symlink_to(store / n)
    man = _manifest(data, [{"image": f"images/img00{i}.png", "captions": [f"square {i}"]} for i in range(2)])
    monkeypatch.delenv("VLBENCH_IMAGE_ROOTS", raising=False)
    with pytest.raises(DataError, match="points outside the data folder") as err:
        load_custom(str(man))
    assert "VLBENCH_IMAGE_ROOTS" in err.value.hint
    monkeypatch.setenv("VLBENCH_IMAGE_ROOTS", str(store))
    ds = load_custom(str(man))
    assert ds.image_path(0).resolve() == (store / "img000.png").resolve()


def test_named_store_does_not_open_dotdot_paths(tmp_path, monkeypatch):
    """Naming a store trusts links in the data folder, not manifest paths that climb out of it."""
    store = tmp_path / "store"
    write_images(store, 1)
    data = tmp_path / "data"
    data.mkdir()
    man = _manifest(data, [{"image": "../store/img000.png", "captions": ["a square"]}])
    monkeypatch.setenv("VLBENCH_IMAGE_ROOTS", str(store))
    with pytest.raises(DataError, match="points outside the data folder"):
        load_custom(str(man))


def test_download_of_an_unknown_name_is_a_clear_error(capsys):
    from vlbench.cli import main

    code = main(["download", "flickr30"])  # in-process: an escaping exception would fail the test outright
    err = capsys.readouterr().err
    assert code == 2, err
    assert "not a built-in dataset" in err and "did you mean 'flickr30k'" in err
    assert "Traceback" not in err


def test_image_download_with_the_network_down_is_a_clear_error(tmp_path, monkeypatch):
    import urllib.error
    import urllib.request

    from vlbench.datasets import download
    from vlbench.datasets.core import Dataset

    def down(*a, **k):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    for var in ("VLBENCH_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(urllib.request, "urlopen", down)
    ds = Dataset(name="flickr30k", images=["1.jpg"], captions=["a"], caption_to_image=__import__("numpy").zeros(1, int),
                 caption_ids=["1.jpg#0"])
    with pytest.raises(DataError, match="could not download the images of 'flickr30k'") as err:
        download.fetch_images("flickr30k", ds, tmp_path)
    assert "unzip its images into" in err.value.hint


def test_captions_given_as_a_string_is_an_error_naming_the_line(tmp_path):
    write_images(tmp_path / "images", 2)
    man = _manifest(tmp_path, [{"image": "images/img000.png", "captions": ["a red square"]},
                               {"image": "images/img001.png", "captions": "a blue square"}])
    with pytest.raises(DataError, match=r"line 2: 'captions' is a string, not a list of strings") as err:
        load_custom(str(man))
    assert '"captions": ["a blue square"]' in err.value.hint


def test_misspelt_key_is_an_error_naming_the_line_and_key(tmp_path):
    write_images(tmp_path / "images", 2)
    man = _manifest(tmp_path, [{"image": "images/img000.png", "captions": ["a red square"]},
                               {"image": "images/img001.png", "captions": ["a blue square"], "imgae": "x.png"}])
    with pytest.raises(DataError, match=r"line 2 has the key\(s\) 'imgae', close to") as err:
        load_custom(str(man))
    assert "check the spelling" in err.value.hint


def test_other_extra_keys_are_metadata_and_ignored(tmp_path):
    write_images(tmp_path / "images", 1)
    man = _manifest(tmp_path, [{"image": "images/img000.png", "captions": ["a red square"], "id": 7,
                                "source": "my crawl"}])
    assert load_custom(str(man)).captions == ["a red square"]
