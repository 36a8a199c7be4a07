"""Reading an image-text split from parquet files (the Hub's layout, :mod:`.hub`) into manifest rows.

Columns: the image column holds ``{"bytes", "path"}`` structs (as the ``datasets`` library writes an Image
feature) or raw bytes; caption columns hold strings or lists of strings. Detection, when the spec names none:
the image column is the one the file's ``datasets`` metadata declares an Image (else the one struct with a
``bytes`` field; ``image`` when there are several); the caption columns are the text columns whose name says
caption or sentence (else ``text``-like names, else the only text column).

Rows become images: rows with the same image bytes are one image whose captions are all theirs, in row order
(datasets that repeat an image once per caption); a row's captions are its caption columns' values in the order
the columns are named, a list column contributing each element. Null captions are skipped and counted; a
caption that is not a string (a column of lists of lists) or is over ``captions.MAX_CAPTION_CHARS`` characters,
and an image cell over :func:`max_image_bytes` (found from the footer before anything is decompressed when it can
be) are refused naming the file and the row, as are a split of 0 rows and a file pyarrow cannot read. Image
files are named as the parquet ``path`` field names them when those names are plain file names and tell the
images apart (so an ``hf:`` dataset and a manifest of the same files give the same caption ids, and the same
perturbations); otherwise by the sha256 of their bytes. They are written once (atomically) under the data
folder and checked by content on every load.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pyarrow as pa

from ...errors import DataError
from ...util.io import atomic_write_bytes, sha256_file
from ..captions import LENGTH_HINT, caption_refusal, shown_value
from ..folders import IMAGE_SUFFIXES as IMAGE_EXTS
from .limits import (
    batches,
    check_cell_sizes,
    check_declared_caption_sizes,
    check_declared_sizes,
    max_image_bytes,
    open_file,
)

_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,150}$")
CAPTION_WORDS = ("caption", "sentence")
TEXT_NAMES = ("text", "texts", "raw", "alt_text", "txt")
_MAGIC = ((b"\xff\xd8\xff", ".jpg"), (b"\x89PNG", ".png"), (b"GIF8", ".gif"), (b"BM", ".bmp"),
          (b"II*\x00", ".tif"), (b"MM\x00*", ".tif"))


def _hf_features(schema: pa.Schema) -> dict:
    """The ``datasets`` library's feature declarations kept in the file's metadata ({} when absent)."""
    raw = (schema.metadata or {}).get(b"huggingface")
    try:
        info = json.loads(raw) if raw else {}
        feats = info.get("info", {}).get("features") or info.get("features") or {}
        return feats if isinstance(feats, dict) else {}
    except (ValueError, AttributeError):
        return {}


def _is_binary(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t)


def _is_image_type(t: pa.DataType) -> bool:
    """A ``{"bytes", "path"}`` struct (the datasets library's Image) or raw bytes."""
    if pa.types.is_struct(t):
        return t.get_field_index("bytes") >= 0 and _is_binary(t.field("bytes").type)
    return _is_binary(t)


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def _is_text_type(t: pa.DataType) -> bool:
    """A caption column: strings, or lists of strings (one level: a row's captions)."""
    return _is_string(t) or (_is_list(t) and _is_string(t.value_type))


def _is_textish(t: pa.DataType) -> bool:
    """Strings at any depth of lists (lists of lists of strings included): what looks like captions by its type,
    so a nested column named as captions is found and refused by name rather than passed over."""
    return _is_string(t) or (_is_list(t) and _is_textish(t.value_type))


def _columns_shown(schema: pa.Schema) -> str:
    return ", ".join(f"{f.name} ({f.type})" for f in schema)


def image_column(schema: pa.Schema, asked: str | None, where: str) -> str:
    """The image column: the one asked for (checked), else the detected one; refused naming the columns."""
    if asked is not None:
        if asked not in schema.names:
            raise DataError(f"{where} has no column {asked!r}; its columns: {_columns_shown(schema)}",
                            "give image=COLUMN with the column that holds the images")
        if not _is_image_type(schema.field(asked).type):
            raise DataError(f"{where}: column {asked!r} is {schema.field(asked).type}, not images (a struct with "
                            "'bytes', as the datasets library stores an Image, or binary)",
                            "give image=COLUMN with the column that holds the images")
        return asked
    feats = _hf_features(schema)
    declared = [n for n in schema.names if isinstance(feats.get(n), dict) and feats[n].get("_type") == "Image"]
    found = declared or [f.name for f in schema if pa.types.is_struct(f.type) and _is_image_type(f.type)]
    if len(found) > 1 and "image" in found:
        return "image"
    if len(found) == 1:
        return found[0]
    if not found:
        raise DataError(f"{where} has no image column; its columns: {_columns_shown(schema)}",
                        "vlbench evaluates image-text retrieval: choose a dataset that stores images (a struct "
                        "column with 'bytes'), or name a binary column with image=COLUMN")
    raise DataError(f"{where} has {len(found)} image columns ({', '.join(found)})", "choose one with image=COLUMN")


def caption_columns(schema: pa.Schema, asked: tuple, where: str, first_value=None) -> list[str]:
    """The caption columns: those asked for (checked), else the detected ones; refused naming the text columns.
    A column of lists of lists of strings is refused by name, with what its first row holds (``first_value(name)``:
    (row, value)), whether named or detected: its inner lists are not captions, and scored as "" they would add
    queries nobody wrote."""
    texts = [f.name for f in schema if _is_text_type(f.type)]
    if asked:
        for name in asked:
            if name not in schema.names:
                raise DataError(f"{where} has no column {name!r}; its text columns: {', '.join(texts) or 'none'}",
                                "give caption=COLUMN[,COLUMN...] with the caption columns")
            if name not in texts:
                raise _not_text(schema, name, texts, where, first_value)
        return list(asked)
    textish = [f.name for f in schema if _is_textish(f.type)]
    found = [n for n in textish if any(w in n.lower() for w in CAPTION_WORDS)] or \
        [n for n in textish if n.lower() in TEXT_NAMES] or (texts if len(texts) == 1 else [])
    if not found:
        raise DataError(f"{where}: which columns hold the captions is not clear; its text columns: "
                        f"{', '.join(texts) or 'none'} (all columns: {_columns_shown(schema)})",
                        "name them with caption=COLUMN[,COLUMN...]")
    for name in found:
        if name not in texts:
            raise _not_text(schema, name, texts, where, first_value)
    return found


def _not_text(schema: pa.Schema, name: str, texts: list, where: str, first_value) -> DataError:
    held = ""
    if first_value is not None and _is_textish(schema.field(name).type):
        row, value = first_value(name)
        held = f"; row {row} holds {shown_value(value)}" if row else ""
    return DataError(f"{where}: column {name!r} is {schema.field(name).type}, not text (strings or lists of "
                     f"strings){held}; its text columns: {', '.join(texts) or 'none'}",
                     "name the caption columns with caption=COLUMN[,COLUMN...] (each row's captions: a string or a "
                     "list of strings); a column of lists of lists has to be flattened to one list per image first")


def _row_captions(row: dict, columns: list[str], where: str) -> tuple[list[str], int]:
    """A row's captions in column order, and how many null ones were skipped; a caption that is not a string or
    is too long (:mod:`.captions`) is refused naming the row and the column."""
    caps, nulls = [], 0
    for col in columns:
        value = row[col]
        for cap in (value if isinstance(value, list) else [value]):
            if cap is None:
                nulls += 1
                continue
            refused = caption_refusal(cap)
            if refused:
                raise DataError(f"{where}, column {col!r}: a caption {refused}",
                                LENGTH_HINT if isinstance(cap, str) else
                                "each row's captions must be a string or a list of strings: flatten the column "
                                "or name other columns with caption=...")
            caps.append(cap)
    if not caps:
        raise DataError(f"{where} has no caption in column(s) {', '.join(columns)}",
                        "give every image at least one caption, or name other columns with caption=...")
    return caps, nulls


def _image_bytes(value, where: str) -> tuple[bytes, str | None]:
    if isinstance(value, dict):
        data, path = value.get("bytes"), value.get("path")
    else:
        data, path = value, None
    if not data:
        raise DataError(f"{where} holds no image bytes" + (f" (only the path {path!r})" if path else ""),
                        "vlbench reads images stored inside the parquet files (push the dataset with its images "
                        "embedded, as datasets' push_to_hub does)")
    return data, path if isinstance(path, str) else None


def _suffix(name: str | None, data: bytes) -> str:
    ext = Path(name).suffix.lower() if name else ""
    if ext in IMAGE_EXTS:
        return ext
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    return next((e for magic, e in _MAGIC if data.startswith(magic)), ".img")


# ----------------------------------------------------------------------------------------------
# reading with bounds: every file named when pyarrow cannot read it, every image cell's size checked


def _scan(files: list[Path], shown: dict, image: str, captions: list[str], repo: str) -> tuple[list, dict, int, int]:
    """Pass one: every row's image digest, candidate name and captions (images are not kept in memory)."""
    rows: list = []  # (digest, captions)
    names: dict = {}  # digest -> (path name or None, suffix)
    nulls = n = 0
    bound = max_image_bytes()
    for f in files:
        pf = open_file(repo, f, shown[f])

        def where_row(k: int, f=f) -> str:
            return f"Hub dataset {repo!r}: {shown[f]}: row {k}"

        check_declared_sizes(pf, image, f"Hub dataset {repo!r}: {shown[f]}", bound)
        check_declared_caption_sizes(pf, captions, f"Hub dataset {repo!r}: {shown[f]}")
        in_file = 0
        for batch in batches(repo, f, shown[f], [image, *captions], pf):
            check_cell_sizes(batch.column(0), where_row, in_file + 1, bound)
            for row in batch.to_pylist():
                n += 1
                in_file += 1
                where = where_row(in_file)
                data, path = _image_bytes(row[image], where)
                caps, skipped = _row_captions(row, captions, where)
                nulls += skipped
                digest = hashlib.sha256(data).hexdigest()
                base = path.replace("\\", "/").rsplit("/", 1)[-1] if path else None
                names.setdefault(digest, (base, _suffix(base, data)))
                rows.append((digest, caps))
    return rows, names, nulls, n


def _file_names(names: dict) -> tuple[dict, str]:
    """digest -> file name: the parquet path names when plain and one per image, else content hashes."""
    given = [base for base, _ in names.values()]
    if all(b and _PLAIN_NAME.match(b) and Path(b).suffix.lower() in IMAGE_EXTS for b in given) and \
            len(set(given)) == len(given):
        return {d: base for d, (base, _) in names.items()}, "path"
    return {d: f"{d}{suffix}" for d, (_, suffix) in names.items()}, "sha256"


def _write_missing(repo: str, files: list[Path], shown: dict, image: str, root: Path, file_names: dict) -> int:
    """Pass two (only for files missing or changed): write each image once, atomically. Returns how many."""
    todo = {d for d, name in file_names.items() if not _same(root / name, d)}
    written = 0
    for f in files if todo else []:
        for batch in batches(repo, f, shown[f], [image]):
            for value in batch.column(0).to_pylist():
                data, _ = _image_bytes(value, shown[f])
                digest = hashlib.sha256(data).hexdigest()
                if digest in todo:
                    atomic_write_bytes(root / file_names[digest], data)
                    todo.discard(digest)
                    written += 1
    return written


def _same(path: Path, digest: str) -> bool:
    return path.is_file() and not path.is_symlink() and sha256_file(path) == digest


def read_split(files: list[Path], image_base: Path, hs, source: dict) -> tuple[list[dict], Path, dict]:
    """A split's parquet files as manifest rows (``{"image", "captions"}``, images written under their folder),
    that folder and the source record (``hs``: the :class:`~vlbench.datasets.hub.HubSpec`); core.py builds the
    Dataset (this module does not import it: core imports the Hub loader). A file pyarrow cannot read is a
    DataError naming it (:func:`unreadable`); a split of 0 rows, a caption that is not a string or too long, an
    image cell over :func:`max_image_bytes` are DataErrors naming the file and the row."""
    try:
        return _read_split(files, image_base, hs, source)
    except pa.ArrowException as exc:  # a failure outside the named reads: still a message, not a traceback
        raise DataError(f"Hub dataset {hs.repo!r}: a parquet file of {source['config']}/{source['split']} cannot be "
                        f"read ({type(exc).__name__}: {str(exc)[:200]})",
                        "the cached file may be damaged: delete the dataset from the Hugging Face cache ('hf cache "
                        "rm dataset/ORG/NAME', or its folder under HF_HUB_CACHE) and load it again") from None


def _first_value(repo: str, path: Path, shown: str, column: str) -> tuple[int, object]:
    """(row, value) of the first non-null cell of ``column`` (row 0: none), for a message."""
    row = 0
    for batch in batches(repo, path, shown, [column]):
        for value in batch.column(0).to_pylist():
            row += 1
            if value:
                return row, value
    return 0, None


def _read_split(files: list[Path], image_base: Path, hs, source: dict) -> tuple[list[dict], Path, dict]:
    names_given = list(source.get("files") or [])
    shown = dict(zip(files, names_given)) if len(names_given) == len(files) else {f: f.name for f in files}
    split = f"{source['config']}/{source['split']}"
    where = f"Hub dataset {hs.repo!r} ({split}, {shown[files[0]]})"
    opened = [open_file(hs.repo, f, shown[f]) for f in files]  # every footer read (and named) before any row
    if sum(pf.metadata.num_rows for pf in opened) == 0:  # refused here, before anything heavy is loaded
        raise DataError(f"Hub dataset {hs.repo!r}, split {split}: its parquet file(s) "
                        f"{', '.join(shown[f] for f in files)} hold 0 rows, so there is nothing to evaluate",
                        "choose a split that has rows (split=NAME, config=NAME) or another revision (revision=...)")
    schema = opened[0].schema_arrow
    image = image_column(schema, hs.image, where)
    first = files[0]
    captions = caption_columns(schema, hs.captions, where, lambda col: _first_value(hs.repo, first, shown[first], col))
    for f, pf in zip(files[1:], opened[1:]):  # every shard has the chosen columns
        missing = [c for c in (image, *captions) if c not in pf.schema_arrow.names]
        if missing:
            raise DataError(f"Hub dataset {hs.repo!r}: {shown[f]} lacks the column(s) {', '.join(missing)} that "
                            f"{shown[files[0]]} has", "the split's files disagree; report it to the dataset's authors")
    rows, names, nulls, n_rows = _scan(files, shown, image, captions, hs.repo)
    file_names, naming = _file_names(names)
    root = image_base / image
    _write_missing(hs.repo, files, shown, image, root, file_names)
    merged: dict = {}  # digest -> captions, in first-appearance order
    for digest, caps in rows:
        merged.setdefault(digest, []).extend(caps)
    detected = {k: v for k, v in (("split", source["split"] if hs.split is None else None),
                                  ("image", image if hs.image is None else None),
                                  ("caption", ",".join(captions) if not hs.captions else None)) if v}
    source = {**source, "image_column": image, "caption_columns": captions, "rows": n_rows,
              "null_captions_skipped": nulls, "repeated_image_rows": n_rows - len(merged), "image_names": naming,
              "detected": detected,
              "image_hint": f"the images are written from the parquet files into {root}; load the dataset again"}
    return [{"image": file_names[d], "captions": c} for d, c in merged.items()], root, source
