"""A file of the Hugging Face cache is named by what the Hub sent (``blobs/<sha256>`` for LFS files): a blob whose
content was changed afterwards is refused by name, never read as the dataset."""

from __future__ import annotations

import pytest
from support.hub_datasets import parquet_bytes, png_bytes, use_hub_cache, write_hub_cache

from vlbench.datasets.core import load_dataset
from vlbench.errors import DataError


def test_a_tampered_parquet_blob_in_the_hub_cache_is_refused_naming_it(tmp_path, monkeypatch):
    use_hub_cache(monkeypatch, tmp_path / "hub")
    table = parquet_bytes({"image": [(png_bytes((255, 0, 0)), "red.png")], "caption": ["a red square"]})
    snapshot = write_hub_cache(tmp_path / "hub", "org/set", {"test.parquet": table})
    assert load_dataset("hf:org/set", data_dir=tmp_path / "data").captions == ["a red square"]
    blob = (snapshot / "test.parquet").resolve()
    blob.write_bytes(parquet_bytes({"image": [(png_bytes((255, 0, 0)), "red.png")], "caption": ["a blue square"]}))
    with pytest.raises(DataError) as info:
        load_dataset("hf:org/set", data_dir=tmp_path / "data2")
    assert str(blob) in info.value.message and "test.parquet" in info.value.message
