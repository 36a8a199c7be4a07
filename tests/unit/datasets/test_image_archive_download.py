"""The built-in image archives through huggingface_hub against the local mirror (support/mirror.py): a wrong
archive, a missing one and a server error are each one message naming the URL, and nothing is unpacked."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest
from support.mirror import image_archive

from vlbench.datasets import download, specs
from vlbench.errors import DataError

REPO, ZIP = "nlphuji/flickr_1k_test_image_text_retrieval", "images_flickr_1k_test.zip"
NAMES = ["1000092795.jpg", "10002456.jpg", "1000268201.jpg"]


class _Images:  # what fetch_images reads of a Dataset: its image names
    images = NAMES


def _asked(mirror) -> str:
    return f"{mirror.url}/datasets/{REPO}/resolve/main/{ZIP}"


def test_fetch_images_with_a_wrong_checksum_is_a_message_not_a_typeerror(mirror, tmp_path):
    mirror.add_dataset_repo(REPO, {ZIP: image_archive(NAMES, "images")})
    with pytest.raises(DataError) as info:
        download.fetch_images("flickr30k", _Images(), tmp_path / "data")
    assert "the image archive of 'flickr30k'" in info.value.message
    assert f"pinned {specs.IMAGE_SOURCES['flickr30k'].sha256[:16]}" in info.value.message
    assert not list((tmp_path / "data" / "images" / "flickr30k").glob("*.jpg"))


def test_the_archive_comes_with_hf_token_lands_in_the_hub_cache_and_is_unpacked_flat(mirror, tmp_path, monkeypatch):
    archive = image_archive(NAMES + ["not-in-the-test-set.jpg"], "images_flickr_1k_test")
    mirror.add_dataset_repo(REPO, {ZIP: archive})
    monkeypatch.setitem(specs.IMAGE_SOURCES, "flickr30k", dataclasses.replace(
        specs.IMAGE_SOURCES["flickr30k"], sha256=hashlib.sha256(archive).hexdigest()))
    monkeypatch.setenv("HF_TOKEN", "hf_from_the_environment")
    download.fetch_images("flickr30k", _Images(), tmp_path / "data")
    assert mirror.gets(ZIP)[0].headers.get("Authorization") == "Bearer hf_from_the_environment"  # HF_TOKEN applies
    assert sorted(p.name for p in (tmp_path / "data" / "images" / "flickr30k").glob("*.jpg")) == sorted(NAMES)
    assert list((tmp_path / "hf-home" / "hub").glob(f"datasets--nlphuji--*/snapshots/*/{ZIP}"))
    download.fetch_images("flickr30k", _Images(), tmp_path / "data")  # nothing missing: nothing asked
    assert len(mirror.gets(ZIP)) == 1


@pytest.mark.parametrize("code, words", [
    (404, "not found on the Hub"),
    pytest.param(500, "500", marks=pytest.mark.slow),  # the Hub client retries a 5xx with backoff: 20 s
])
def test_a_missing_archive_or_a_server_error_names_the_url(mirror, tmp_path, code, words):
    if code == 404:
        mirror.add_dataset_repo(REPO, {"README.md": b"no archive here"})
    else:
        mirror.add_dataset_repo(REPO, {ZIP: b"zip"})
        mirror.fault(ZIP, "status", code=500, times=20)
    with pytest.raises(DataError) as info:
        download.fetch_images("flickr30k", _Images(), tmp_path / "data")
    assert _asked(mirror) in info.value.message and words in info.value.message
    assert "Traceback" not in info.value.message and len(info.value.message) < 900
    assert "HF_ENDPOINT" in info.value.hint


def test_hub_urls_are_split_into_repo_revision_and_file():
    assert download.hub_file(specs.IMAGE_SOURCES["coco"].url) == (
        "dataset", "nlphuji/mscoco_2014_5k_test_image_text_retrieval", "main", "images_mscoco_2014_5k_test.zip")
    assert download.hub_file("https://huggingface.co/org/model/resolve/v1.0/sub/w.bin") == (
        "model", "org/model", "v1.0", "sub/w.bin")
    with pytest.raises(ValueError):
        download.hub_file("https://example.org/file.zip")


def test_a_dataset_repo_with_parquet_files_serves_snapshot_download(mirror, tmp_path):
    """The mirror serves Hub dataset repositories (repo_type="dataset") to the client's snapshot path too."""
    from huggingface_hub import snapshot_download

    files = {"data/test-00000-of-00001.parquet": b"PAR1 not really PAR1", "README.md": b"---\n---\n"}
    commit = mirror.add_dataset_repo("org/tiny-set", files)
    folder = snapshot_download("org/tiny-set", repo_type="dataset", endpoint=mirror.url, cache_dir=tmp_path / "c")
    assert folder.endswith(commit)
    assert {p: (tmp_path / "c" / folder / p).read_bytes() for p in files} == files
    assert mirror.gets("/api/datasets/org/tiny-set/revision/main") and mirror.gets("/api/datasets/org/tiny-set/tree/")
    from huggingface_hub import HfApi

    info = HfApi(endpoint=mirror.url).get_paths_info("org/tiny-set", ["README.md", "data"], repo_type="dataset")
    assert {(type(i).__name__, i.path) for i in info} == {("RepoFile", "README.md"), ("RepoFolder", "data")}


def test_a_mirror_served_parquet_file_reads_through_hffilesystem(mirror):
    """What a Hub-dataset reader does (list the repository, read a parquet file with ranged requests) works
    against the mirror."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq
    from huggingface_hub import HfFileSystem

    buf = io.BytesIO()
    pq.write_table(pa.table({"caption": ["a dog", "a cat"], "n": [1, 2]}), buf)
    mirror.add_dataset_repo("org/pq", {"data/test-00000-of-00001.parquet": buf.getvalue(), "README.md": b"---\n"})
    fs = HfFileSystem(endpoint=mirror.url)
    assert fs.ls("datasets/org/pq/data", detail=False) == ["datasets/org/pq/data/test-00000-of-00001.parquet"]
    with fs.open("datasets/org/pq/data/test-00000-of-00001.parquet", "rb") as fh:
        assert pq.read_table(fh).to_pydict() == {"caption": ["a dog", "a cat"], "n": [1, 2]}


@pytest.mark.slow  # the Hub client retries a stalled transfer five times before it gives up: about 15 s
def test_a_stalled_hub_transfer_ends_in_a_timeout_message(mirror, tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 1)
    mirror.add_dataset_repo(REPO, {ZIP: image_archive(NAMES, "images")})
    mirror.fault(ZIP, "stall", after=100, seconds=30, times=50)
    with pytest.raises(DataError) as info:
        download.fetch_images("flickr30k", _Images(), tmp_path / "data")
    assert _asked(mirror) in info.value.message and "timed out" in info.value.message
    assert "HF_HUB_DOWNLOAD_TIMEOUT" in info.value.message
    assert not list((tmp_path / "data" / "images" / "flickr30k").glob("*.jpg"))


def test_a_tampered_blob_in_the_hub_cache_is_refused_naming_the_blob(mirror, tmp_path, monkeypatch):
    archive = image_archive(NAMES, "images")
    mirror.add_dataset_repo(REPO, {ZIP: archive})
    monkeypatch.setitem(specs.IMAGE_SOURCES, "flickr30k", dataclasses.replace(specs.IMAGE_SOURCES["flickr30k"],
                                                                              sha256=None))  # nothing pinned
    download.fetch_images("flickr30k", _Images(), tmp_path / "data")
    blob = next((tmp_path / "hf-home" / "hub").glob("datasets--nlphuji--*/blobs/*"))
    assert blob.name == hashlib.sha256(archive).hexdigest()  # the Hub cache names an LFS blob by its sha256
    blob.write_bytes(image_archive(NAMES, "images", seed=1))  # changed after the download
    for p in (tmp_path / "data" / "images" / "flickr30k").glob("*.jpg"):
        p.unlink()
    with pytest.raises(DataError) as info:
        download.fetch_images("flickr30k", _Images(), tmp_path / "data")
    assert str(blob) in info.value.message and "nothing was unpacked" in info.value.message
    assert not list((tmp_path / "data" / "images" / "flickr30k").glob("*.jpg"))


def test_hub_blob_problem_checks_git_blobs_by_their_sha1(tmp_path):
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    body = b"a small config file\n"
    good = blobs / hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()
    good.write_bytes(body)
    assert download.hub_blob_problem(good) is None
    bad = blobs / ("0" * 40)
    bad.write_bytes(body)
    assert str(bad) in (download.hub_blob_problem(bad) or "")
    plain = tmp_path / "a-local-copy.zip"  # not a blob of the Hub cache: nothing is promised about it
    plain.write_bytes(body)
    assert download.hub_blob_problem(plain) is None
