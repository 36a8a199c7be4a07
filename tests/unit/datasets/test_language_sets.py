"""The multilingual retrieval sets in their released layouts: an XM3600-shaped captions.jsonl with 3 languages and
an XTD10-shaped folder load (every language one fold of the repeated image list), languages are selectable and
recorded, a language a caption file lacks is named with the file and the languages it has, and a malformed file
is refused naming the file and the field."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support.language_sets import CAPTIONS, XTD10_TEXT, pin_xtd10, write_jsonl, write_xm3600, write_xtd10

from vlbench.datasets.core import load_dataset
from vlbench.errors import DataError


def _load(spec, root, **kw):
    return load_dataset(spec, data_dir=root, download=False, **kw)


def test_xm3600_fixture_with_3_languages_loads_one_fold_per_language(tmp_path):
    names = write_xm3600(tmp_path)
    ds = _load("xm3600", tmp_path)
    assert ds.source["languages"] == ["de", "fr", "ja"]  # every language of the file, in the release's order
    assert ds.images == names * 3 and ds.source["distinct_images"] == 5
    assert [list(f) for f in ds.folds] == [list(range(0, 5)), list(range(5, 10)), list(range(10, 15))]
    de = [c for caps in CAPTIONS["de"] for c in caps]
    assert ds.captions[:len(de)] == de and ds.caption_ids[:2] == ["de/img000.jpg#0", "de/img000.jpg#1"]
    fr_first = len(de)
    assert ds.caption_to_image[fr_first] == 5 and ds.caption_ids[fr_first] == "fr/img000.jpg#0"
    for f, lang in enumerate(("de", "fr", "ja")):
        sub = ds.subset(ds.folds[f])
        assert sub.captions == [c for caps in CAPTIONS[lang] for c in caps]


def test_languages_are_selected_in_the_given_order_and_recorded(tmp_path):
    write_xm3600(tmp_path)
    ds = _load("xm3600?languages=ja,de&captions=first", tmp_path)
    assert ds.source["languages"] == ["ja", "de"] and ds.source["language"] == "mul"
    assert ds.source["spec"] == "xm3600?languages=ja,de&captions=first"  # what a run's dataset is read back from
    assert ds.captions == [c[0] for c in CAPTIONS["ja"]] + [c[0] for c in CAPTIONS["de"]]
    assert _load(ds.source["spec"], tmp_path).content_hash() == ds.content_hash()
    assert ds.name == "xm3600-ja-de-first"  # a selection is named: runs of two selections never share a name
    one = _load("xm3600?languages=fr", tmp_path)
    assert one.source["language"] == "fr" and len(one.folds) == 1


def test_a_language_missing_from_the_caption_file_names_file_language_and_those_present(tmp_path):
    write_xm3600(tmp_path)
    path = tmp_path / "xm3600" / "captions.jsonl"
    with pytest.raises(DataError) as err:
        _load("xm3600?languages=de,sw", tmp_path)
    assert str(path) in err.value.message and "'sw'" in err.value.message and "de, fr, ja" in err.value.message
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    del rows[3]["fr"]  # one image lacks French
    write_jsonl(path, rows)
    (tmp_path / "xm3600" / "captions.jsonl.sha256").unlink()  # the first-use pin of the earlier bytes
    with pytest.raises(DataError) as err:
        _load("xm3600?languages=de,fr", tmp_path)
    assert "line 4" in err.value.message and "'fr'" in err.value.message and "de, ja" in err.value.message


@pytest.mark.parametrize("edit, field", [
    (lambda r: r.pop("image/key"), "image/key"),
    (lambda r: r.update({"fr": {"caption": "un bus"}}), "fr.caption"),
    (lambda r: r.update({"fr": {"caption": ["un bus", 3]}}), "fr.caption"),
    (lambda r: r.update({"image/key": "img000"}), "image/key"),  # the first image's key again
])
def test_a_malformed_xm3600_line_names_the_file_and_the_field(tmp_path, edit, field):
    write_xm3600(tmp_path)
    path = tmp_path / "xm3600" / "captions.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    edit(rows[2])
    write_jsonl(path, rows)
    with pytest.raises(DataError) as err:
        _load("xm3600", tmp_path, require_images=False)
    assert str(path) in err.value.message and "line 3" in err.value.message and repr(field) in err.value.message


def test_the_caption_file_is_pinned_on_first_use_and_a_changed_file_refused(tmp_path):
    write_xm3600(tmp_path)
    ds = _load("xm3600", tmp_path)
    path = tmp_path / "xm3600" / "captions.jsonl"
    assert ds.source["pin"] == "pinned on first use" and (path.parent / "captions.jsonl.sha256").is_file()
    path.write_text(path.read_text().replace("ein Bus fährt", "ein Bus hält"), encoding="utf-8")
    with pytest.raises(DataError, match="sha256"):
        _load("xm3600", tmp_path)


@pytest.mark.parametrize("spec, option", [("xm3600?lang=de", "lang"), ("xm3600?languages=de,de", "languages"),
                                          ("xm3600?captions=one", "captions"), ("xm3600?languages=de,", "languages"),
                                          ("xtd10?captions=first", "captions"), ("flickr30k?languages=de", "?options")])
def test_a_bad_option_is_refused_naming_it(tmp_path, spec, option):
    write_xm3600(tmp_path)
    with pytest.raises(DataError) as err:
        _load(spec, tmp_path, require_images=False)
    assert option in err.value.message


def test_xtd10_fixture_loads_in_the_release_layout(tmp_path, monkeypatch):
    names = write_xtd10(tmp_path)
    pin_xtd10(monkeypatch, tmp_path)
    ds = _load("xtd10?languages=en,de,ja", tmp_path)
    assert ds.images == names * 3 and ds.source["languages"] == ["en", "de", "ja"]
    assert ds.captions == XTD10_TEXT["en"] + XTD10_TEXT["de"] + XTD10_TEXT["ja"]  # CRLF and a last line kept
    assert ds.source["caption_files"]["ja"] == "STAIR/test_1kcaptions_jp.txt"
    np.testing.assert_array_equal(ds.caption_to_image, np.arange(9))


def test_xtd10_missing_language_file_names_it_and_the_languages_present(tmp_path, monkeypatch):
    write_xtd10(tmp_path, langs=("en", "ja"))
    pin_xtd10(monkeypatch, tmp_path)
    with pytest.raises(DataError) as err:
        _load("xtd10?languages=en,de", tmp_path, require_images=False)
    msg = err.value.message
    assert "MIC/test_1kcaptions_de.txt" in msg and "'de'" in msg and "en, ja" in msg
    with pytest.raises(DataError, match="'xx'"):
        _load("xtd10?languages=xx", tmp_path, require_images=False)


def test_xtd10_a_caption_file_out_of_line_with_the_image_list_names_the_file(tmp_path, monkeypatch):
    write_xtd10(tmp_path)
    path = tmp_path / "xtd10" / "MIC" / "test_1kcaptions_de.txt"
    path.write_text("nur eine Zeile\n", encoding="utf-8")
    pin_xtd10(monkeypatch, tmp_path)
    with pytest.raises(DataError) as err:
        _load("xtd10?languages=de", tmp_path, require_images=False)
    assert str(path) in err.value.message and "1 caption lines for the 3 images" in err.value.message


def test_xtd10_files_are_checked_against_the_pinned_release_digests(tmp_path):
    write_xtd10(tmp_path)  # fixture bytes, not the release's
    with pytest.raises(DataError, match="pinned in vlbench"):
        _load("xtd10?languages=en", tmp_path, require_images=False)


def test_missing_images_name_the_folder_and_where_to_get_them(tmp_path):
    names = write_xm3600(tmp_path)
    (tmp_path / "images" / "xm3600" / names[1]).unlink()
    with pytest.raises(DataError) as err:
        _load("xm3600?languages=de", tmp_path)
    assert names[1] in err.value.message and "images.tgz" in err.value.hint


def test_xtd10_downloads_through_the_mirror_pinned_and_loads(mirror, tmp_path, monkeypatch, capsys):
    from vlbench import cli
    from vlbench.datasets.langsets import xtd10

    stage = tmp_path / "stage"
    write_xtd10(stage, langs=())
    for code, src in xtd10.FILES.items():  # every language of the release, 3 lines each
        path = stage / "xtd10" / src.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{code} caption {i}\n" for i in range(3)), encoding="utf-8")
    mirror.add_file(xtd10.IMAGE_LIST.url, (stage / "xtd10" / xtd10.IMAGE_LIST.path).read_bytes())
    for src in xtd10.FILES.values():
        mirror.add_file(src.url, (stage / "xtd10" / src.path).read_bytes())
    data = tmp_path / "data"
    assert cli.main(["download", "xtd10", "--data-dir", str(data)]) != 0  # the release's pins: fixture refused
    assert "504a472dfd40e44f" in capsys.readouterr().err and not (data / "xtd10" / xtd10.IMAGE_LIST.path).exists()
    pin_xtd10(monkeypatch, stage)
    assert cli.main(["download", "xtd10", "--data-dir", str(data)]) == 0
    out = capsys.readouterr().out
    assert "11 languages" in out and "images are not downloaded by vlbench" in out
    assert mirror.gets("XTD10/test_1kcaptions_ko.txt") and mirror.gets("STAIR/test_1kcaptions_jp.txt")
    ds = _load("xtd10?languages=ko,ja", data, require_images=False)
    assert ds.captions == [f"ko caption {i}" for i in range(3)] + [f"ja caption {i}" for i in range(3)]
    assert ds.name == "xtd10-ko-ja" and _load("xtd10", data, require_images=False).name == "xtd10"  # the release


def test_limit_cuts_every_language_to_its_first_images(tmp_path):
    from vlbench.datasets.core import limited

    names = write_xm3600(tmp_path)
    ds = limited(_load("xm3600?languages=de,ja", tmp_path), 2)
    assert ds.images == names[:2] * 2 and [list(f) for f in ds.folds] == [[0, 1], [2, 3]]
    assert ds.captions == [c for caps in CAPTIONS["de"][:2] for c in caps] + \
        [c for caps in CAPTIONS["ja"][:2] for c in caps]
    assert ds.limit == 2 and ds.source["distinct_images"] == 2


def test_english_only_perturbations_are_refused_on_a_multilingual_selection(tmp_path):
    from vlbench.errors import VlbenchError
    from vlbench.perturbations import check_language, dataset_language

    write_xm3600(tmp_path)
    ds = _load("xm3600?languages=de,fr", tmp_path, require_images=False)
    with pytest.raises(VlbenchError, match="multilingual captions"):
        check_language(["synonym-noun"], dataset_language(ds))
    check_language(["char-swap"], dataset_language(ds))  # letters only: any language


def test_download_xm3600_says_where_to_get_the_zip_and_the_images(tmp_path, capsys):
    from vlbench import cli

    assert cli.main(["download", "xm3600", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "web-data/captions.zip" in out and "images.tgz" in out and str(tmp_path / "xm3600") in out


def test_an_xm3600_subset_carries_a_not_the_released_3600_note(tmp_path):
    write_xm3600(tmp_path, n=5, langs=("de", "fr"))
    ds = _load("xm3600?languages=de,fr", tmp_path)
    assert ds.source["note"].startswith("xm3600: 5 images, not the released 3,600 (a subset or a changed file)")
    assert ds.source["distinct_images"] == 5 and len(ds.images) == 10  # each image once per language fold
