"""Built-in datasets from the real caption files, custom manifests, hashes, folds."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from vlbench.datasets.core import load_dataset
from vlbench.errors import DataError, UnknownNameError


@pytest.mark.parametrize("name,n_images", [("flickr30k", 1000), ("flickr30k-fg", 1000), ("coco", 5000),
                                           ("coco-fg", 5000)])
def test_builtin_captions(shared_captions, name, n_images):
    ds = load_dataset(name, data_dir=shared_captions, require_images=False, download=False)
    assert ds.n_images == n_images and ds.n_captions == 5 * n_images
    assert np.array_equal(ds.caption_to_image, np.repeat(np.arange(n_images), 5))
    assert ds.caption_ids[:2] == [f"{ds.images[0]}#0", f"{ds.images[0]}#1"]
    assert len(ds.content_hash()) == 64


def test_fg_shares_images_but_not_captions(shared_captions):
    a = load_dataset("flickr30k", data_dir=shared_captions, require_images=False, download=False)
    b = load_dataset("flickr30k-fg", data_dir=shared_captions, require_images=False, download=False)
    assert a.images == b.images
    assert a.captions != b.captions and a.content_hash() != b.content_hash()


def test_coco_1k_folds(shared_captions):
    ds = load_dataset("coco-1k", data_dir=shared_captions, require_images=False, download=False)
    assert len(ds.folds) == 5 and all(len(f) == 1000 for f in ds.folds)
    assert np.array_equal(np.concatenate(ds.folds), np.arange(5000))
    sub = ds.subset(ds.folds[1])
    assert sub.n_images == 1000 and sub.n_captions == 5000
    assert sub.images[0] == ds.images[1000] and sub.captions[0] == ds.captions[5000]
    assert np.array_equal(sub.caption_to_image, np.repeat(np.arange(1000), 5))


def test_checksum_mismatch_is_refused(shared_captions, tmp_path):
    bad = tmp_path / "flickr30k_test.jsonl"
    lines = (shared_captions / "flickr30k_test.jsonl").read_text().splitlines()
    lines[3] = lines[3].replace("a", "A", 1)
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match="sha256"):
        load_dataset("flickr30k", data_dir=tmp_path, require_images=False, download=False)


def test_missing_caption_file_offline_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("VLBENCH_OFFLINE", "1")
    with pytest.raises(DataError) as err:
        load_dataset("coco-fg", data_dir=tmp_path, require_images=False)
    assert "coco5k_fg_test.jsonl" in str(err.value) and "vlbench download coco-fg" in str(err.value)


def test_missing_images_offline_names_files_and_source(shared_captions, tmp_path, monkeypatch):
    monkeypatch.setenv("VLBENCH_OFFLINE", "1")
    shutil.copy(shared_captions / "flickr30k_test.jsonl", tmp_path)
    with pytest.raises(DataError) as err:
        load_dataset("flickr30k", data_dir=tmp_path)
    msg = str(err.value)
    assert "1000 image file(s)" in msg and "1007129816.jpg" in msg
    assert "nlphuji/flickr_1k_test_image_text_retrieval" in msg


def test_unknown_dataset_has_close_matches():
    with pytest.raises(UnknownNameError) as err:
        load_dataset("flikr30k-fg", require_images=False)
    assert "flickr30k-fg" in str(err.value)


def test_custom_manifest_ragged_and_hash(tmp_path):
    (tmp_path / "a.png").write_bytes(b"x")
    (tmp_path / "b.png").write_bytes(b"x")
    man = tmp_path / "m.jsonl"
    man.write_text(json.dumps({"image": "a.png", "captions": ["one", "two", "three"]}) + "\n\n" +
                   json.dumps({"image": "b.png", "captions": ["four"]}) + "\n")
    ds = load_dataset(f"custom:{man}")
    assert ds.n_images == 2 and ds.captions == ["one", "two", "three", "four"]
    assert ds.caption_to_image.tolist() == [0, 0, 0, 1]
    h = ds.content_hash()
    man.write_text(man.read_text().replace("four", "five"))
    assert load_dataset(f"custom:{man}").content_hash() != h


def test_malformed_manifest_line_is_named(tmp_path):
    man = tmp_path / "m.jsonl"
    man.write_text('{"image": "a.png", "captions": ["x"]}\n{"image": "b.png", "captions": [\n')
    with pytest.raises(DataError, match="line 2 is not valid JSON"):
        load_dataset(f"custom:{man}", require_images=False)


def test_manifest_path_escape_is_refused(tmp_path):
    man = tmp_path / "m.jsonl"
    man.write_text('{"image": "../../etc/passwd", "captions": ["x"]}\n')
    with pytest.raises(DataError, match="line 1: image path '../../etc/passwd' points outside"):
        load_dataset(f"custom:{man}", require_images=False)


def test_missing_image_is_named(tmp_path):
    man = tmp_path / "m.jsonl"
    man.write_text('{"image": "nope.jpg", "captions": ["x"]}\n')
    with pytest.raises(DataError, match="nope.jpg"):
        load_dataset(f"custom:{man}")


@pytest.mark.slow  # reads the real COCO 5k captions and the ECCV / CxC files (~1 s CPU)
@pytest.mark.parametrize("kind", ["eccv-all", "cxc-union"])
def test_extended_positives_map_coco_ids(shared_captions, kind):
    """The union variants: extra positives mapped to dataset indices (the official ones: test_eccv_official.py)."""
    ds = load_dataset("coco", data_dir=shared_captions, require_images=False, download=False,
                      extra_positives=kind)
    ep = ds.extra_positives
    assert ds.extra_positives_name == kind and ep["i2t"] and ep["t2i"]
    if kind == "eccv-all":
        assert len(ep["t2i"]) == 1332 and len(ep["i2t"]) == 1261
        assert ds.source["extra_positives"]["dropped_ids"] >= 2  # two caption ids outside the 25k test set
    ids = [json.loads(x) for x in (shared_captions / "coco5k_test_ids.jsonl").read_text().splitlines()]
    # spot-check one mapping by hand through the raw files
    raw = json.loads((shared_captions / "eccv_caption" / f"{kind.split('-')[0]}_caption_to_image.json").read_text())
    cap_id, img_ids = next(iter(raw.items()))
    where = {cid: (i, j) for i, r in enumerate(ids) for j, cid in enumerate(r["caption_ids"])}
    i, j = where[int(cap_id)]
    img_index = {r["image_id"]: n for n, r in enumerate(ids)}
    assert sorted(ep["t2i"][5 * i + j]) == sorted(img_index[x] for x in img_ids if x in img_index)
    assert ds.content_hash() != load_dataset("coco", data_dir=shared_captions, require_images=False,
                                             download=False).content_hash()


def test_extended_positives_only_for_coco(shared_captions):
    with pytest.raises(DataError, match="use it with --dataset coco"):
        load_dataset("flickr30k", data_dir=shared_captions, require_images=False, download=False,
                     extra_positives="eccv")


def test_fg_pool_adds_distractor_images(shared_captions, tmp_path):
    shutil.copy(shared_captions / "flickr30k_fg_test.jsonl", tmp_path)
    (tmp_path / "fg_pool").mkdir()
    (tmp_path / "fg_pool" / "Flickr30K_FG_img_filenames.txt").write_text(
        "\n".join(["000000000001.jpg", "000000000002.jpg", "1007129816.jpg"]) + "\n")  # a test image is not added twice
    with pytest.warns(UserWarning, match="6867"):
        ds = load_dataset("flickr30k-fg", data_dir=tmp_path, gallery="fg-pool", require_images=False,
                          download=False)
    assert ds.distractors == ["000000000001.jpg", "000000000002.jpg"]
    assert len(ds.gallery_images) == 1002 and ds.n_images == 1000
    assert ds.image_path(1001) == (tmp_path / "images" / "coco-unlabeled2017" / "000000000002.jpg").resolve()
    plain = load_dataset("flickr30k-fg", data_dir=tmp_path, require_images=False, download=False)
    assert ds.content_hash() != plain.content_hash()


def test_fg_pool_missing_list_says_where_to_get_it(shared_captions, tmp_path):
    shutil.copy(shared_captions / "coco5k_fg_test.jsonl", tmp_path)
    with pytest.raises(DataError, match="MSCOCO_FG_img_filenames.npy"):
        load_dataset("coco-fg", data_dir=tmp_path, gallery="fg-pool", require_images=False, download=False)
