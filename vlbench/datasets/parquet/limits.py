"""Bounds on what a parquet file may make the reader hold: image and caption cells checked against the file's
footer before anything is decompressed where it can be, and batch by batch otherwise; files pyarrow cannot
open are named with the fix (:mod:`.read` reads the split)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...errors import DataError
from ..captions import LENGTH_HINT, MAX_CAPTION_CHARS


def max_image_bytes() -> int | None:
    """The most bytes one image cell may hold: 4 bytes (8-bit RGBA, stored uncompressed) per pixel of PIL's
    decompression-bomb limit ``PIL.Image.MAX_IMAGE_PIXELS`` (the largest image the encode step decodes, 89,478,485
    pixels by default), plus 64 KiB of headers: 357,979,476 bytes by default. None when that limit is switched off
    (``MAX_IMAGE_PIXELS = None``), as for image files."""
    from PIL import Image  # lazy: only a Hub dataset reads parquet

    pixels = Image.MAX_IMAGE_PIXELS
    return None if pixels is None else 4 * int(pixels) + (64 << 10)


def _too_big_hint(bound: int) -> str:
    return (f"an image file of the largest size vlbench decodes (PIL.Image.MAX_IMAGE_PIXELS pixels) is at most "
            f"{bound:,} bytes, so this is no image it could read (it may be a decompression bomb): remove the row "
            "from the dataset; for trusted huge images raise PIL.Image.MAX_IMAGE_PIXELS")


def unreadable(repo: str, shown: str, path: Path, exc: BaseException) -> DataError:
    """A parquet file pyarrow cannot read (a damaged footer, a truncated download), named with the fix."""
    real = Path(os.path.realpath(path))
    why = " ".join(str(exc).split())[:200]
    return DataError(f"Hub dataset {repo!r}: parquet file {shown} ({real}) cannot be read ({type(exc).__name__}: "
                     f"{why})", f"the cached file is damaged: delete it ({real}), or the whole dataset from the "
                     f"Hugging Face cache ('hf cache rm dataset/{repo}', or its folder under HF_HUB_CACHE), and load "
                     "the dataset again to download it anew")


def open_file(repo: str, path: Path, shown: str) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:  # "Couldn't deserialize thrift" (a garbled footer) is an OSError
        raise unreadable(repo, shown, path, exc) from None


def batches(repo: str, path: Path, shown: str, columns: list[str],
             pf: pq.ParquetFile | None = None) -> Iterator[pa.RecordBatch]:
    """The file's record batches; pyarrow's failures (a damaged page) become the error naming the file, while
    errors of the caller's own work between batches (writing images) stay what they are."""
    try:
        it = (pf or open_file(repo, path, shown)).iter_batches(batch_size=256, columns=columns)
    except (pa.ArrowException, OSError) as exc:
        raise unreadable(repo, shown, path, exc) from None
    while True:
        try:
            batch = next(it)
        except StopIteration:
            return
        except (pa.ArrowException, OSError) as exc:
            raise unreadable(repo, shown, path, exc) from None
        yield batch


def _image_leaf(pf: pq.ParquetFile, image: str) -> int | None:
    """The index of the parquet leaf column holding the image bytes (``image.bytes`` of a struct, or ``image``)."""
    schema = pf.metadata.schema
    for i in range(len(schema)):
        if schema.column(i).path in (f"{image}.bytes", image):
            return i
    return None


def check_declared_sizes(pf: pq.ParquetFile, image: str, where: str, bound: int | None) -> None:
    """Refuse, from the file's footer alone (nothing decompressed), a row group whose image bytes decompress to
    more than ``bound`` bytes per row: at least one of its images is over the bound (the row itself when the group
    has one row). A 33 KiB file can hold a 1 GiB cell; it used to be decompressed, copied and written (3.2 GB peak)
    before PIL said it was no image."""
    leaf = _image_leaf(pf, image)
    if bound is None or leaf is None:
        return
    md, start = pf.metadata, 0
    for r in range(md.num_row_groups):
        group = md.row_group(r)
        n, size = group.num_rows, group.column(leaf).total_uncompressed_size
        if n and size > n * bound + (64 << 10):  # 64 KiB: page headers and null flags, beside the values
            rows = f"row {start + 1}" if n == 1 else f"one of rows {start + 1}-{start + n}"
            raise DataError(f"{where}: {rows} holds an image cell over the limit of {bound:,} bytes per image (the "
                            f"file's footer gives {size:,} bytes of image data for {n} row(s), {size / 1e9:,.2f} GB "
                            "once decompressed); nothing was decompressed", _too_big_hint(bound))
        start += n


#: the most bytes one caption may take in a file: 4 UTF-8 bytes per character of the caption bound
MAX_CAPTION_BYTES = 4 * MAX_CAPTION_CHARS


def check_declared_caption_sizes(pf: pq.ParquetFile, captions: list[str], where: str) -> None:
    """Refuse, from the footer alone, a row group whose caption column decompresses to more than
    :data:`MAX_CAPTION_BYTES` per value it holds: at least one caption there is over the caption bound. The same
    bomb as an image cell's (a few KB of zstd holding a 1 GiB string) is then never decompressed."""
    schema, md = pf.metadata.schema, pf.metadata
    leaves = {col: [i for i in range(len(schema)) if schema.column(i).path == col or
                    schema.column(i).path.startswith(col + ".")] for col in captions}
    start = 0
    for r in range(md.num_row_groups):
        group = md.row_group(r)
        for col, indices in leaves.items():
            for i in indices:
                chunk = group.column(i)
                if chunk.total_uncompressed_size > max(chunk.num_values, 1) * MAX_CAPTION_BYTES + (64 << 10):
                    n = group.num_rows
                    rows = f"row {start + 1}" if n == 1 else f"one of rows {start + 1}-{start + n}"
                    raise DataError(f"{where}: {rows}, column {col!r}, holds a caption over the limit of "
                                    f"{MAX_CAPTION_CHARS:,} characters (the file's footer gives "
                                    f"{chunk.total_uncompressed_size:,} bytes of text for {chunk.num_values} "
                                    f"value(s), over {MAX_CAPTION_BYTES:,} bytes, 4 per character, each); nothing "
                                    "was decompressed", LENGTH_HINT)
        start += group.num_rows


def check_cell_sizes(column: pa.Array, where_row, first_row: int, bound: int | None) -> None:
    """Refuse an image cell of a record batch over ``bound`` bytes from the Arrow lengths, before any cell becomes
    a Python object or a file; ``where_row(n)`` names row ``n`` (1-based, within its file)."""
    if bound is None:
        return
    values = column.field("bytes") if pa.types.is_struct(column.type) else column
    lengths = pc.fill_null(pc.binary_length(values), 0)
    if (pc.max(lengths).as_py() or 0) > bound:
        big = int(pc.index(pc.greater(lengths, bound), True).as_py())
        raise DataError(f"{where_row(first_row + big)}: the image cell is {lengths[big].as_py():,} bytes, over the "
                        f"limit of {bound:,} bytes per image", _too_big_hint(bound))


