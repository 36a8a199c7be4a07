"""The rows of a choice set released as Hub parquet files (ColorSwap, BiVLC), their images written out as files.

Where the files are looked for, in order: ``<data-dir>/<task>/`` and ``<data-dir>/`` (``*.parquet`` or
``data/*.parquet`` there, as ``hf download REPO --repo-type dataset --local-dir <data-dir>/<task>`` leaves them),
then the Hugging Face cache (or the Hub itself when online: HF_TOKEN, HF_ENDPOINT, HF_HUB_OFFLINE apply, through
:func:`vlbench.datasets.hub.fetch`). A split's files are the ones the Hub's naming gives that split
(``data/test-00000-of-00002-<hash>.parquet``: ``test``).

Every image cell (a ``{"bytes", "path"}`` struct, as the ``datasets`` library writes an Image) is written once,
atomically, under ``<data-dir>/<task>/images/`` named by the sha256 of its bytes (an image used by several items
is one file, encoded once) and checked by content on every load; images are never shipped with vlbench. A file
that lacks a column, a row whose text field is not a non-empty string or whose image field holds no bytes, and
an image cell over the decoder's bound are refused naming the file, the row and the field.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ...datasets import hub
from ...datasets.captions import LENGTH_HINT, caption_refusal
from ...datasets.parquet.limits import (
    batches,
    check_cell_sizes,
    check_declared_caption_sizes,
    check_declared_sizes,
    max_image_bytes,
    open_file,
)
from ...errors import DataError
from ...util import paths
from ...util.io import atomic_write_bytes, sha256_file

_MAGIC = ((b"\xff\xd8\xff", ".jpg"), (b"\x89PNG", ".png"), (b"GIF8", ".gif"), (b"BM", ".bmp"))


@dataclass(frozen=True)
class HubSet:
    """A set's released columns: ``images`` (image structs), ``texts`` (required strings), ``optional`` (read
    when present: ids, tags)."""

    task: str  # the task's name: the folder under the data folder
    repo: str  # the Hub dataset
    name: str  # how messages name the set
    images: tuple[str, ...]
    texts: tuple[str, ...]
    optional: tuple[str, ...] = ()

    def fix(self, base: Path) -> str:
        return (f"use the unmodified parquet files of {self.repo} on the Hub: 'hf download {self.repo} --repo-type "
                f"dataset --local-dir {base / self.task}' (accept its terms on the Hub first if it is gated, and set "
                "HF_TOKEN), or pass --data-dir naming the folder that holds them")


@dataclass
class HubRows:
    """The rows read (column -> value; image columns -> the image's file name under ``image_dir``), the files
    (shown name -> sha256) and where they came from."""

    rows: list[dict]
    image_dir: Path
    files: dict
    source: dict


def _split_files(folder: Path, split: str) -> list[Path]:
    if not folder.is_dir():
        return []
    found = [*folder.glob("*.parquet"), *folder.glob("data/*.parquet")]
    return sorted(p for p in found if hub.split_of(p.relative_to(folder).as_posix())[1] == split)


def locate(hs: HubSet, split: str, data_dir=None) -> tuple[Path, list[Path], dict]:
    """(the folder, its parquet files of ``split``, the source record): a local folder first, else the
    Hugging Face cache or the Hub; a DataError naming the folder looked in and the fix when neither has them."""
    base = Path(data_dir).expanduser() if data_dir else paths.default_data_dir()
    for cand in (base / hs.task, base):
        files = _split_files(cand, split)
        if files:
            return cand, files, {"folder": str(cand), "split": split,
                                 "repository": f"huggingface.co/datasets/{hs.repo}"}
    try:
        folder, config, got, names = hub.fetch(hub.HubSpec(hs.repo, split=split), None)
    except DataError as exc:
        raise DataError(f"{hs.name}'s parquet files of split {split!r} are not in {base / hs.task}, and the Hugging "
                        f"Face cache has none ({exc.message})", hs.fix(base)) from None
    return folder, [folder / n for n in names], {"folder": str(folder), "split": got, "config": config,
                                                 "repository": f"huggingface.co/datasets/{hs.repo}",
                                                 "revision": folder.name}


def _suffix(data: bytes) -> str:
    return next((e for magic, e in _MAGIC if data.startswith(magic)), ".img")


def _write_image(folder: Path, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    name = f"{digest}{_suffix(data)}"
    path = folder / name
    if not (path.is_file() and not path.is_symlink() and sha256_file(path) == digest):
        atomic_write_bytes(path, data)
    return name


def _row(hs: HubSet, row: dict, where: str, fix: str, image_dir: Path) -> dict:
    out = {}
    for col in hs.texts:
        value = row.get(col)
        refused = caption_refusal(value)
        if refused or not str(value).strip():
            raise DataError(f"{where}: field {col!r} {refused or 'is an empty string'}",
                            LENGTH_HINT if isinstance(value, str) and refused else fix)
        out[col] = value
    for col in hs.images:
        cell = row.get(col)
        data = cell.get("bytes") if isinstance(cell, dict) else cell
        if not isinstance(data, bytes) or not data:
            raise DataError(f"{where}: field {col!r} holds no image bytes", fix)
        out[col] = _write_image(image_dir, data)
    for col in hs.optional:
        if col in row:
            out[col] = row[col]
    return out


def read_rows(hs: HubSet, split: str, data_dir=None) -> HubRows:
    """Every row of ``split`` in file order (files sorted by name), images written under
    ``<data-dir>/<task>/images``."""
    base = Path(data_dir).expanduser() if data_dir else paths.default_data_dir()
    folder, files, source = locate(hs, split, data_dir)
    fix = hs.fix(base)
    image_dir = base / hs.task / "images"
    bound = max_image_bytes()
    rows, digests = [], {}
    for f in files:
        shown = f.relative_to(folder).as_posix()
        pf = open_file(hs.repo, f, shown)
        label = f"{hs.name} file {f}"
        names = pf.schema_arrow.names
        missing = [c for c in (*hs.images, *hs.texts) if c not in names]
        if missing:
            raise DataError(f"{label}: field {missing[0]!r} is missing (its columns: {', '.join(names)})", fix)
        for col in hs.images:
            check_declared_sizes(pf, col, label, bound)
        check_declared_caption_sizes(pf, list(hs.texts), label)
        cols = [*hs.images, *hs.texts, *(c for c in hs.optional if c in names)]
        n = 0
        for batch in batches(hs.repo, f, shown, cols, pf):
            for i, _ in enumerate(hs.images):
                check_cell_sizes(batch.column(i), lambda k, at=label: f"{at} row {k}", n + 1, bound)
            for row in batch.to_pylist():
                n += 1
                rows.append(_row(hs, row, f"{label} row {n}", fix, image_dir))
        digests[shown] = sha256_file(f)
    if not rows:
        raise DataError(f"{hs.name}: the parquet files of split {split!r} in {folder} hold no rows", fix)
    return HubRows(rows, image_dir, digests, {**source, "files": digests, "images": str(image_dir)})
