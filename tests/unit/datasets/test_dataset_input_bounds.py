"""Bounds on what a dataset may hold, from every source: a caption is a string of at most MAX_CAPTION_CHARS
characters (custom manifests, ``hf:`` parquet, the long-caption sets and built-ins through core._build, plug-ins);
an ``hf:`` split has rows, a readable footer, and no image cell over the per-image byte bound. Each refusal names
the item (file, row, column, line or image) and says what to do."""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image
from support.hub_datasets import IMAGE_TYPE, parquet_bytes, png_bytes

from vlbench.datasets.captions import MAX_CAPTION_CHARS
from vlbench.datasets.core import Dataset, _build, check_captions, load_custom, load_dataset
from vlbench.datasets.parquet import max_image_bytes
from vlbench.errors import DataError

RED, GREEN = png_bytes((255, 0, 0)), png_bytes((0, 255, 0))




def _table_bytes(table: pa.Table, **kw) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, **kw)
    return buf.getvalue()


# ----------------------------------------------------------------------------------------------
# captions: not text


def test_hub_caption_column_of_lists_of_lists_is_refused_naming_row_and_column(hub):
    put, load = hub
    put("org/nested", {"test.parquet": parquet_bytes({"image": [(RED, "r.png"), (GREEN, "g.png")],
                                                      "captions": [[["a red", "square"]], [["green"]]]})})
    for spec in ("hf:org/nested", "hf:org/nested?caption=captions"):  # detected, or named
        with pytest.raises(DataError) as err:
            load(spec)
        text = err.value.message
        assert "column 'captions'" in text and "list<element: list<element: string>>" in text
        assert "row 1 holds list [['a red', 'square']]" in text and "flatten" in err.value.hint


def test_hub_list_of_strings_caption_column_stays_valid(hub):
    put, load = hub
    put("org/lists", {"test.parquet": parquet_bytes({"image": [(RED, "r.png")], "captions": [["a", "b"]]})})
    assert load("hf:org/lists").captions == ["a", "b"]


@pytest.mark.parametrize("value,shown", [(None, "null"), (["a", "b"], "list ['a', 'b']"), (7, "int 7")])
def test_a_non_string_caption_from_any_source_is_an_error_not_an_empty_query(value, shown):
    """A reader that hands core a null or a list (a DOCCI line with a null description, a plug-in's rows) used to
    get the caption scored as "" with exit 0."""
    rows = [{"image": "a.jpg", "captions": ["fine"]}, {"image": "b.jpg", "captions": ["ok", value]}]
    with pytest.raises(DataError) as err:
        _build("docci", rows, None, {})
    assert err.value.message == f"docci: image 1 (image 'b.jpg'): caption 1 is {shown}, not a string"
    plugin = Dataset(name="plug", images=["a.jpg"], captions=["x", value], caption_to_image=np.zeros(2, np.int64),
                     caption_ids=["a.jpg#0", "a.jpg#1"])
    with pytest.raises(DataError, match=r"plug: caption id 'a\.jpg#1' \(image 'a\.jpg'\): caption 1 is"):
        check_captions(plugin)


def test_a_null_docci_description_is_an_error_naming_its_image(tmp_path):
    """A null DOCCI description used to be scored as "" with exit 0: the loader refuses it, naming the file's
    line and the field (core._build's caption check would name the image otherwise)."""
    root = tmp_path / "docci"
    root.mkdir()
    rows = [{"example_id": "test_1", "split": "test", "image_file": "test_00001.jpg", "description": "A red car."},
            {"example_id": "test_2", "split": "test", "image_file": "test_00002.jpg", "description": None}]
    (root / "docci_descriptions.jsonlines").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError) as err:
        load_dataset("docci", data_dir=tmp_path, require_images=False, download=False)
    assert err.value.message.endswith("docci_descriptions.jsonlines: line 2: field 'description' is null")


# ----------------------------------------------------------------------------------------------
# captions: too long for a tokenizer


def test_a_caption_over_the_length_bound_is_refused_for_every_source(hub, tmp_path):
    long = "word " * (MAX_CAPTION_CHARS // 5) + "x"  # one character over
    assert len(long) == MAX_CAPTION_CHARS + 1
    put, load = hub
    put("org/long", {"test.parquet": parquet_bytes({"image": [(RED, "r.png"), (GREEN, "g.png")],
                                                    "caption": ["short", long]})})
    with pytest.raises(DataError) as err:
        load("hf:org/long")
    assert "test.parquet: row 2, column 'caption'" in err.value.message
    assert f"{MAX_CAPTION_CHARS + 1:,} characters long" in err.value.message
    assert f"{MAX_CAPTION_CHARS:,} characters" in err.value.hint
    man = tmp_path / "m" / "m.jsonl"
    man.parent.mkdir()
    man.write_text(json.dumps({"image": "a.png", "captions": ["ok"]}) + "\n" +
                   json.dumps({"image": "b.png", "captions": ["ok", long]}) + "\n")
    with pytest.raises(DataError, match=r"line 2 \(image 'b\.png'\): caption 1 is 20,001 characters long"):
        load_custom(man, require_images=False)
    with pytest.raises(DataError, match=r"iiw-400: image 0 \(image 'x\.jpg'\): caption 0 is 20,001 characters"):
        _build("iiw-400", [{"image": "x.jpg", "captions": [long]}], None, {})  # the long-caption sets' path
    exactly = _build("ok", [{"image": "x.jpg", "captions": [long[:-1]]}], None, {})  # the bound itself is accepted
    assert len(exactly.captions[0]) == MAX_CAPTION_CHARS


def test_an_hf_caption_bomb_is_refused_from_the_footer_before_decompressing(hub):
    """A caption that decompresses far past the bound (here 8 MiB of one letter in a few KB of zstd) is refused
    from the footer's sizes, naming the row and the column, before pyarrow decompresses it; a list column's
    captions are counted one by one, so many short captions in one row stay valid."""
    put, load = hub
    table = pa.table({"image": pa.array([{"bytes": RED, "path": "r.png"}, {"bytes": GREEN, "path": "g.png"}],
                                        type=IMAGE_TYPE),
                      "caption": ["a red square", "a" * (8 << 20)],
                      "sentences": [["short"] * 2_000, ["x"]]})
    data = _table_bytes(table, compression="zstd")
    assert len(data) < 64 << 10
    put("org/captionbomb", {"test.parquet": data})
    with pytest.raises(DataError) as err:
        load("hf:org/captionbomb")
    assert err.value.message.startswith("Hub dataset 'org/captionbomb': test.parquet: one of rows 1-2, column "
                                        "'caption', holds a caption over the limit of 20,000 characters")
    assert "nothing was decompressed" in err.value.message
    ds = load("hf:org/captionbomb?caption=sentences")
    assert ds.n_captions == 2_001


def test_real_long_caption_sets_stay_well_within_the_caption_bound(shared_captions):
    """ImageInWords (IIW-400), DOCCI and DCI descriptions, the longest captions vlbench reads, are far below the
    bound (the longest: 3,152 characters, DCI)."""
    folder = shared_captions / "iiw"
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        pytest.skip(f"the long-caption files are not in {folder}")
    longest = 0
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            stack = [json.loads(line)] if line.strip() else []
            while stack:
                item = stack.pop()
                if isinstance(item, str):
                    longest = max(longest, len(item))
                elif isinstance(item, (list, dict)):
                    stack.extend(item.values() if isinstance(item, dict) else item)
    assert 2_000 < longest < MAX_CAPTION_CHARS / 4, longest


# ----------------------------------------------------------------------------------------------
# hf: files that cannot be evaluated


def test_hub_split_with_zero_rows_is_refused_naming_dataset_split_and_file(hub):
    put, load = hub
    empty = pa.table({"image": pa.array([], type=IMAGE_TYPE), "caption": pa.array([], type=pa.string())})
    put("org/empty", {"data/test-00000-of-00001.parquet": _table_bytes(empty)})
    with pytest.raises(DataError) as err:
        load("hf:org/empty")
    assert err.value.message == ("Hub dataset 'org/empty', split default/test: its parquet file(s) "
                                 "data/test-00000-of-00001.parquet hold 0 rows, so there is nothing to evaluate")
    assert "split=NAME" in err.value.hint


def test_a_garbled_parquet_footer_names_the_file_and_the_fix(hub):
    put, load = hub
    good = parquet_bytes({"image": [(RED, "r.png")], "caption": ["r"]})
    footer = int.from_bytes(good[-8:-4], "little")
    start = len(good) - 8 - footer
    garbled = good[:start] + bytes((b * 7 + 13) % 256 for b in good[start:-8]) + good[-8:]  # magic and length kept
    with pytest.raises(OSError, match="deserialize thrift"):  # what pyarrow itself says about such a file
        pq.ParquetFile(io.BytesIO(garbled))
    snapshot = put("org/garbled", {"data/test-00000-of-00001.parquet": garbled})
    with pytest.raises(DataError) as err:
        load("hf:org/garbled")
    blob = (snapshot / "data/test-00000-of-00001.parquet").resolve()
    assert err.value.message.startswith(f"Hub dataset 'org/garbled': parquet file data/test-00000-of-00001.parquet "
                                        f"({blob}) cannot be read (OSError: Couldn't deserialize thrift")
    assert f"delete it ({blob})" in err.value.hint and "'hf cache rm dataset/org/garbled'" in err.value.hint


# ----------------------------------------------------------------------------------------------
# hf: image cells over the per-image byte bound


def test_image_byte_bound_follows_pils_decompression_bomb_limit(monkeypatch):
    assert max_image_bytes() == 4 * Image.MAX_IMAGE_PIXELS + 65_536 == 357_979_476
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)
    assert max_image_bytes() is None


def _bomb(rows_before: int, cell: int) -> bytes:
    """A zstd parquet file: ``rows_before`` small images, then a cell of ``cell`` zero bytes, one row group."""
    images = [{"bytes": RED, "path": f"r{i}.png"} for i in range(rows_before)] + [{"bytes": bytes(cell),
                                                                                     "path": "bomb.png"}]
    table = pa.table({"image": pa.array(images, type=IMAGE_TYPE),
                      "caption": [f"caption {i}" for i in range(len(images))]})
    return _table_bytes(table, compression="zstd")


def test_an_image_cell_over_the_byte_bound_is_refused_from_the_footer_before_decompressing(hub, monkeypatch,
                                                                                           tmp_path):
    """A one-row group whose image bytes decompress past the bound is refused from the footer's sizes: the row is
    named, nothing is decompressed and no image file is written (a 33 KiB file with a 1 GiB cell used to be
    decompressed, copied and written, 3.2 GB peak, before PIL said it was no image)."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100_000)  # bound: 465,536 bytes, so a small file shows it
    put, load = hub
    data = _bomb(0, 8 << 20)
    assert len(data) < 10_000  # 8 MiB of zeros in a few KB
    put("org/bomb", {"test.parquet": data})
    with pytest.raises(DataError) as err:
        load("hf:org/bomb")
    assert err.value.message.startswith("Hub dataset 'org/bomb': test.parquet: row 1 holds an image cell over the "
                                        "limit of 465,536 bytes per image")
    assert "nothing was decompressed" in err.value.message and "MAX_IMAGE_PIXELS" in err.value.hint
    assert not (tmp_path / "data").exists() or not any(p.is_file() for p in (tmp_path / "data").rglob("*"))


def test_an_image_cell_over_the_byte_bound_among_small_ones_is_refused_naming_its_row(hub, monkeypatch, tmp_path):
    """When the footer cannot single the cell out (its row group holds small images too), the Arrow lengths do,
    before any cell becomes a Python object or a file."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100_000)
    put, load = hub
    put("org/mixed", {"test.parquet": _bomb(5, 600_000)})  # 6 rows: 600 KB < 6 x bound, so the footer allows it
    with pytest.raises(DataError) as err:
        load("hf:org/mixed")
    assert err.value.message == ("Hub dataset 'org/mixed': test.parquet: row 6: the image cell is 600,000 bytes, "
                                 "over the limit of 465,536 bytes per image")
    assert not (tmp_path / "data").exists() or not any(p.is_file() for p in (tmp_path / "data").rglob("*"))
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1_000_000)  # a bound above the cell: read as usual
    ds = load("hf:org/mixed")
    assert ds.n_images == 2 and ds.captions[-1] == "caption 5"
