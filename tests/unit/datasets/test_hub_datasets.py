"""``hf:ORG/NAME`` datasets: the spec, the Hub's parquet layouts, column detection, repeated
images, image files, and the refusals; every case read through huggingface_hub's own snapshot_download from a
cache filled in its real layout (tests/support/hub_datasets.py), offline."""

from __future__ import annotations

import pytest
from support.hub_datasets import parquet_bytes, png_bytes

from vlbench.datasets.core import limited, load_custom
from vlbench.datasets.hub import canonical_name, choose_files, parse_spec, split_of
from vlbench.errors import DataError

RED, GREEN, BLUE = png_bytes((255, 0, 0)), png_bytes((0, 255, 0)), png_bytes((0, 0, 255))




def test_spec_options_in_one_canonical_order_and_duplicates_refused():
    hs = parse_spec("hf:org/set?caption=a,b&split=test&image=img")
    assert (hs.repo, hs.split, hs.image, hs.captions) == ("org/set", "test", "img", ("a", "b"))
    assert canonical_name("hf:org/set?caption=a,b&split=test") == "hf:org/set?split=test&caption=a,b"
    for bad in ("hf:org/set?split=test&split=train", "hf:org/set?splt=test", "hf:org/set?split=",
                "hf:org/set?split", "hf:../x", "hf:org/set?caption=a,a", "hf:"):
        with pytest.raises(DataError):
            parse_spec(bad)


@pytest.mark.parametrize("path,expected", [
    ("data/test-00000-of-00001.parquet", ("default", "test")),
    ("data/validation-00001-of-00004-1f2e3d4c.parquet", ("default", "validation")),
    ("en/test-00000-of-00002.parquet", ("en", "test")),
    ("default/test/0000.parquet", ("default", "test")),
    ("test.parquet", ("default", "test")),
    ("data/test.parquet", ("default", "test")),
])
def test_split_of_the_hubs_layouts(path, expected):
    assert split_of(path) == expected


def test_default_split_is_test_and_others_are_named():
    files = ["data/train-00000-of-00001.parquet", "data/test-00000-of-00002.parquet",
             "data/test-00001-of-00002.parquet"]
    assert choose_files(parse_spec("hf:o/n"), files) == ("default", "test", files[1:])
    with pytest.raises(DataError, match="train, validation"):
        choose_files(parse_spec("hf:o/n"), ["train.parquet", "validation.parquet"])
    with pytest.raises(DataError, match="no split 'dev'"):
        choose_files(parse_spec("hf:o/n?split=dev"), files)
    with pytest.raises(DataError, match="configs"):
        choose_files(parse_spec("hf:o/n"), ["en/test-00000-of-00001.parquet", "de/test-00000-of-00001.parquet"])
    chosen = choose_files(parse_spec("hf:o/n?config=de"), ["en/test.parquet", "de/test.parquet"])
    assert chosen == ("de", "test", ["de/test.parquet"])


def test_list_and_string_caption_columns_in_the_order_named(hub):
    put, load = hub
    put("org/set", {"data/test-00000-of-00001.parquet": parquet_bytes({
        "image": [(RED, "red.png"), (GREEN, "green.png")], "caption": ["a red square", "a green square"],
        "sentences": [["red", "crimson"], ["green"]], "id": [1, 2]})})
    ds = load("hf:org/set")
    assert ds.images == ["red.png", "green.png"]
    assert ds.captions == ["a red square", "red", "crimson", "a green square", "green"]
    assert ds.caption_ids[:2] == ["red.png#0", "red.png#1"] and list(ds.caption_to_image) == [0, 0, 0, 1, 1]
    assert ds.source["detected"] == {"split": "test", "image": "image", "caption": "caption,sentences"}
    assert (ds.image_root / "red.png").read_bytes() == RED
    other = load("hf:org/set?caption=sentences,caption")
    assert other.captions[:3] == ["red", "crimson", "a red square"] and other.source["detected"] == {"split": "test",
                                                                                                      "image": "image"}
    assert other.content_hash() != ds.content_hash()


def test_repeated_images_are_one_image_with_every_caption(hub):
    put, load = hub
    put("org/rep", {"test.parquet": parquet_bytes({
        "image": [(RED, "r.png"), (BLUE, "b.png"), (RED, "r.png"), (RED, "r.png")],
        "text": ["one", "two", "three", "four"]})})
    ds = load("hf:org/rep")
    assert ds.images == ["r.png", "b.png"] and ds.captions == ["one", "three", "four", "two"]
    assert ds.source["repeated_image_rows"] == 2


def test_images_without_usable_names_are_named_by_content(hub):
    put, load = hub
    put("org/anon", {"test.parquet": parquet_bytes({"image": [(RED, None), (GREEN, "x/a.png"), (BLUE, "y/a.png")],
                                                    "caption": ["r", "g", "b"]})})
    ds = load("hf:org/anon")
    import hashlib

    assert ds.images == [hashlib.sha256(b).hexdigest() + ".png" for b in (RED, GREEN, BLUE)]
    assert ds.source["image_names"] == "sha256"


def test_a_replaced_image_file_is_written_again(hub):
    put, load = hub
    put("org/set", {"test.parquet": parquet_bytes({"image": [(RED, "r.png")], "caption": ["r"]})})
    ds = load("hf:org/set")
    (ds.image_root / "r.png").write_bytes(BLUE)
    assert (load("hf:org/set").image_root / "r.png").read_bytes() == RED


def test_raw_binary_image_column_and_null_captions(hub):
    put, load = hub
    put("org/raw", {"test.parquet": parquet_bytes({"jpeg": [RED, GREEN], "caption_a": ["r", None],
                                                   "caption_b": [None, "g"]})})
    with pytest.raises(DataError, match="no image column"):  # a binary column is used only when named
        load("hf:org/raw")
    ds = load("hf:org/raw?image=jpeg")
    assert ds.captions == ["r", "g"] and ds.source["null_captions_skipped"] == 2


def test_a_dataset_without_an_image_column_is_refused_naming_its_columns(hub):
    put, load = hub
    put("org/text", {"test.parquet": parquet_bytes({"caption": ["a"], "score": [0.5]})})
    with pytest.raises(DataError, match=r"no image column; its columns: caption \(string\), score \(double\)"):
        load("hf:org/text")


def test_bad_column_choices_are_refused(hub):
    put, load = hub
    put("org/set", {"test.parquet": parquet_bytes({"image": [(RED, "r.png")], "caption": ["r"], "n": [3],
                                                   "title": ["t"], "alt": ["a"]})})
    with pytest.raises(DataError, match="no column 'captions'"):
        load("hf:org/set?caption=captions")
    with pytest.raises(DataError, match="'n' is int64, not text"):
        load("hf:org/set?caption=n")
    with pytest.raises(DataError, match="'caption' is string, not images"):
        load("hf:org/set?image=caption")
    put("org/empty", {"test.parquet": parquet_bytes({"image": [(RED, "r.png"), (BLUE, "b.png")],
                                                     "caption": [None, "b"]})})
    with pytest.raises(DataError, match="row 1 has no caption"):
        load("hf:org/empty")
    put("org/unclear", {"test.parquet": parquet_bytes({"image": [(RED, "r.png")], "title": ["t"], "alt": ["a"]})})
    with pytest.raises(DataError, match="title, alt"):
        load("hf:org/unclear")


def test_a_dataset_not_in_the_cache_offline_says_how_to_get_it(hub):
    _, load = hub
    with pytest.raises(DataError, match="not in the Hugging Face cache") as err:
        load("hf:org/missing")
    assert "HF_ENDPOINT" in err.value.hint


def test_hub_dataset_equals_the_same_manifest(hub, tmp_path):
    from support.data import write_manifest
    from support.hub_datasets import manifest_as_parquet

    put, load = hub
    man = write_manifest(tmp_path / "m", 4, images="")
    put("org/m", {"data/test-00000-of-00001.parquet": manifest_as_parquet(man)})
    a, b = load("hf:org/m"), load_custom(man)
    assert (a.images, a.captions, a.caption_ids) == (b.images, b.captions, b.caption_ids)
    assert a.content_hash() == b.content_hash()


def test_limit_keeps_the_first_images_with_their_captions(hub, tmp_path):
    from support.data import write_manifest

    ds = load_custom(write_manifest(tmp_path / "m", 6))
    cut = limited(ds, 2)
    assert cut.images == ds.images[:2] and cut.captions == ds.captions[:10] and cut.limit == 2
    assert cut.describe()["limit"] == 2 and "limit" not in ds.describe() and limited(ds, None) is ds
    assert limited(cut, 2) is cut


def test_a_damaged_parquet_file_is_named_not_a_traceback(hub):
    put, load = hub
    good = parquet_bytes({"image": [(RED, "r.png")], "caption": ["r"]})
    put("org/bad", {"test.parquet": good[: len(good) // 2]})
    with pytest.raises(DataError, match="cannot be read") as err:
        load("hf:org/bad")
    assert "HF_HUB_CACHE" in err.value.hint

