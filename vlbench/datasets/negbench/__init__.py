"""NegBench's COCO retrieval sets (Alhamoud et al., CVPR 2025) as retrieval datasets, read in their released layout.

``--dataset negbench-coco`` is NegBench's retrieval with negation: the COCO val2017 images, each with captions that
an LLM rewrote to also deny an object the image does not show
(``COCO_val_negated_retrieval_llama3.1_rephrased_affneg_true.csv``); ``negbench-coco-original`` is the same images
with their original COCO captions (``COCO_val_retrieval.csv``), the paper's reference point. Each file has one row
per image with the columns ``filepath`` (the authors' own path of the image) and ``captions`` (a Python list
literal of strings), as the authors' loader reads it (``CsvImageCaptionDataset`` in
benchmarks/src/training/data.py of github.com/m1k2zoo/negbench); other columns are ignored. vlbench keeps the file
name of ``filepath`` and finds it in the COCO val2017 folder. Being datasets, they get every retrieval metric,
perturbation and report of the suite; the paper reports text-to-image R@1 and R@5 (``t2i`` R@1, R@5 here).

Options (``--dataset "negbench-coco?file=PATH&images=DIR"``): ``file``, a CSV of this layout elsewhere than
``<data-dir>/negbench/``; ``images``, the images folder (default ``$VLBENCH_COCO_VAL2017``, else the cache's
``coco/val2017``).
"""

from __future__ import annotations

import ast
import csv
import io
import os
from pathlib import Path, PurePosixPath
from urllib.parse import parse_qsl

from ... import stores
from ...errors import DataError
from ...registry import datasets as DATASETS
from ...util.io import sha256_file
from ...util.paths import default_data_dir
from ..core import Dataset, _build, check_images

REPOSITORY = "github.com/m1k2zoo/negbench@2ac009b5adfb18d1d7c185c466b2bced10f43f6a"
DOWNLOAD = "https://drive.google.com/drive/folders/1kSEq0mkV1t1T8GuOAM65iz_iAA7e5gxB (datasets.md of " \
           "github.com/m1k2zoo/negbench)"
#: registered name -> the released file it reads
FILES = {"negbench-coco": "COCO_val_negated_retrieval_llama3.1_rephrased_affneg_true.csv",
         "negbench-coco-original": "COCO_val_retrieval.csv"}
COLUMNS = ("filepath", "captions")
OPTIONS = ("file", "images")
#: the longest field a file may hold (the released rows are a few hundred bytes)
MAX_FIELD = 1 << 20


def _fix(name: str) -> str:
    return f"use the unmodified {FILES[name]} of NegBench ({DOWNLOAD}), or a CSV with the columns filepath and " \
           "captions (a Python list of strings)"


def parse_options(name: str, query: str | None) -> dict:
    """``file=PATH&images=DIR`` -> {"file": ..., "images": ...}; an unknown key is an error naming the known ones."""
    got = dict(parse_qsl(query or "", keep_blank_values=True))
    bad = [k for k in got if k not in OPTIONS]
    if bad:
        raise DataError(f"dataset {name!r} has no option {bad[0]!r}", f"its options are {', '.join(OPTIONS)} "
                        f"(e.g. {name}?file=/data/{FILES[name]}&images=/data/coco/val2017)")
    empty = [k for k, v in got.items() if not v.strip()]
    if empty:
        raise DataError(f"dataset {name!r}: option {empty[0]!r} is empty", f"write {empty[0]}=<path>")
    return got


def find_file(name: str, data_dir, given: str | None) -> Path:
    """The CSV: ``given`` (the ``file`` option), else <data-dir>/negbench/<file> or <data-dir>/<file>."""
    if given:
        path = Path(given).expanduser()
        if not path.is_file():
            raise DataError(f"dataset {name!r}: the file {path} does not exist", _fix(name))
        return path
    base = Path(data_dir).expanduser() if data_dir else default_data_dir()
    for cand in (base / "negbench" / FILES[name], base / FILES[name]):
        if cand.is_file():
            return cand
    raise DataError(f"the NegBench file {FILES[name]} is not in {base / 'negbench'}",
                    f"download it from {DOWNLOAD} into {base / 'negbench'}, pass --data-dir naming the folder that "
                    f"holds it, or name it: --dataset \"{name}?file=PATH\"")


def _captions(raw: str, where: str, name: str) -> list[str]:
    """The ``captions`` field: a Python list literal of non-empty strings (read as data, never evaluated)."""
    try:
        caps = ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise DataError(f"{where}: captions {raw[:60]!r} is not a Python list of strings", _fix(name)) from None
    if not isinstance(caps, (list, tuple)) or not caps:
        raise DataError(f"{where}: captions is {'an empty list' if caps == [] else type(caps).__name__}, not a "
                        "non-empty list of strings", _fix(name))
    for j, cap in enumerate(caps):
        if not isinstance(cap, str) or not cap.strip():
            raise DataError(f"{where}: caption {j} is {cap!r}, not a non-empty string", _fix(name))
    return list(caps)


def read_rows(path: Path, name: str) -> tuple[list[dict], list[int]]:
    """The rows ({"image": file name, "captions"}) and their line numbers; a DataError naming the file and row on
    a missing column, a bad captions field, an empty filepath, or two rows of one image."""
    what = f"NegBench file {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{what} is not UTF-8 text (offset {exc.start})", _fix(name)) from None
    csv.field_size_limit(MAX_FIELD)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = reader.fieldnames or []
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise DataError(f"{what} has no column {', '.join(map(repr, missing))} (its header: "
                        f"{', '.join(map(repr, header)) or 'empty'})", _fix(name))
    rows: list[dict] = []
    lines: list[int] = []
    seen: dict[str, int] = {}
    try:
        for n, row in enumerate(reader, start=1):
            where = f"{what} row {n} (line {reader.line_num})"
            raw = (row.get("filepath") or "").strip().replace("\\", "/")
            image = "" if raw.endswith("/") else PurePosixPath(raw).name
            if image in ("", ".", ".."):
                raise DataError(f"{where}: filepath {row.get('filepath')!r} names no file", _fix(name))
            if image in seen:
                raise DataError(f"{where}: image {image!r} is listed again (first in row {seen[image]})",
                                "give each image one row with all its captions")
            seen[image] = n
            rows.append({"image": image, "captions": _captions(row.get("captions") or "", where, name)})
            lines.append(reader.line_num)
    except csv.Error as exc:
        raise DataError(f"{what} line {reader.line_num} is not CSV ({exc})", _fix(name)) from None
    if not rows:
        raise DataError(f"{what} holds no row", _fix(name))
    return rows, lines


def download_hint(name: str, data_dir=None) -> str:
    """``vlbench download negbench-coco``: nothing is downloaded (the file is on Google Drive); where to get it."""
    base = Path(data_dir).expanduser() if data_dir else default_data_dir()
    return (f"{name}: no file to download as is; get {FILES[name]} from {DOWNLOAD} into {base / 'negbench'}, and the "
            f"COCO 2017 validation images (val2017) into {images_dir(None)} (or name them: --dataset "
            f"\"{name}?images=DIR\")")


def images_dir(given: str | None) -> Path:
    if given:
        return Path(given).expanduser()
    env = os.environ.get("VLBENCH_COCO_VAL2017")
    return Path(env) if env else stores.path("coco-images") / "val2017"


def load_negbench(name: str, *, data_dir=None, gallery: str = "test", require_images: bool = True,
                  options: str | None = None) -> Dataset:
    """The Dataset of ``name`` (negbench-coco, negbench-coco-original) with its ``?options``."""
    if gallery != "test":
        raise DataError(f"--gallery {gallery} does not apply to {name}", "leave --gallery out")
    opts = parse_options(name, options)
    path = find_file(name, data_dir, opts.get("file"))
    rows, lines = read_rows(path, name)
    root = images_dir(opts.get("images"))
    source = {"annotations": str(path), "sha256": sha256_file(path), "repository": REPOSITORY,
              "download": DOWNLOAD, "images": str(root),
              "image_hint": "get the COCO 2017 validation images (val2017) into that folder, set "
                            f"$VLBENCH_COCO_VAL2017, or name it: --dataset \"{name}?images=DIR\" (found by the file "
                            "name of filepath)"}
    ds = _build(name, rows, root, source, lines)
    if require_images:
        check_images(ds)
    return ds


def _factory(name: str):
    def load(data_dir=None, gallery: str = "test", require_images: bool = True, download=None, options=None, **_):
        return load_negbench(name, data_dir=data_dir, gallery=gallery, require_images=require_images,
                             options=options)
    load.__name__ = f"load_{name.replace('-', '_')}"
    load.takes_options = OPTIONS  # type: ignore[attr-defined]  # load_dataset passes the spec's ?options
    return load


for _name, _file in FILES.items():
    DATASETS.register(_name, _factory(_name),
                      description=f"NegBench (Alhamoud et al. 2025) COCO val2017 retrieval, "
                                  f"{'negated' if _name == 'negbench-coco' else 'original'} captions ({_file}); "
                                  "?file=PATH&images=DIR",
                      licence="code MIT (github.com/m1k2zoo/negbench); the CSV carries no licence of its own; "
                              "images: COCO 2017 val (Flickr terms), captions derived from COCO's (CC BY 4.0)",
                      citation="Alhamoud, Alshammari, Tian, Li, Torr, Kim and Ghassemi, Vision-Language Models Do "
                               "Not Understand Negation, CVPR 2025")
