"""Parquet image-text datasets in huggingface_hub's real cache layout, for the ``hf:`` dataset tests.

``write_hub_cache`` lays files out as ``snapshot_download`` leaves them:
``<cache>/datasets--ORG--NAME/{refs/main, blobs/<sha256>, snapshots/<commit>/<path> -> ../../blobs/<sha256>}``,
so with HF_HUB_OFFLINE=1 the library's own code resolves ``hf:ORG/NAME`` from it (no stand-in functions).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

COMMIT = "0123456789abcdef0123456789abcdef01234567"
IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def png_bytes(rgb, size=(8, 6)) -> bytes:
    """A small solid-colour PNG (``size`` is width x height), the image cells of the Hub dataset tests."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, tuple(rgb)).save(buf, format="PNG")
    return buf.getvalue()


def parquet_bytes(columns: dict, *, features: dict | None = None) -> bytes:
    """A parquet file of ``columns`` (name -> list of values; an image column holds (bytes, path) pairs or
    {"bytes", "path"} dicts), with the ``datasets`` library's feature metadata when ``features`` is given."""
    arrays, names = [], []
    for name, values in columns.items():
        if values and isinstance(values[0], tuple):
            arrays.append(pa.array([{"bytes": b, "path": p} for b, p in values], type=IMAGE_TYPE))
        else:
            arrays.append(pa.array(values))
        names.append(name)
    table = pa.Table.from_arrays(arrays, names=names)
    if features is not None:
        table = table.replace_schema_metadata({"huggingface": json.dumps({"info": {"features": features}})})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def write_hub_cache(cache: Path, repo: str, files: dict, *, commit: str = COMMIT, ref: str = "main") -> Path:
    """Files (repo path -> bytes) of the dataset repository ``repo`` as a cached snapshot at ``commit``, ``ref``
    pointing at it. Returns the snapshot folder."""
    storage = cache / f"datasets--{repo.replace('/', '--')}"
    snapshot = storage / "snapshots" / commit
    for rel, data in files.items():
        blob = storage / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = snapshot / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (storage / "refs").mkdir(parents=True, exist_ok=True)
    (storage / "refs" / ref).write_text(commit)
    return snapshot


def use_hub_cache(monkeypatch, cache: Path) -> None:
    """Point huggingface_hub (this process and subprocesses) at ``cache``, offline."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


def manifest_as_parquet(manifest: Path, split_at: int = 1) -> bytes:
    """The rows of a custom manifest as a parquet split with two caption columns: ``caption`` (a row's first
    ``split_at`` captions; a string when 1) and ``sentences`` (the rest, a list); images by their file names."""
    rows = [json.loads(x) for x in manifest.read_text().splitlines() if x.strip()]
    images = [((manifest.parent / r["image"]).read_bytes(), Path(r["image"]).name) for r in rows]
    first = [r["captions"][0] if split_at == 1 else r["captions"][:split_at] for r in rows]
    rest = [r["captions"][split_at:] for r in rows]
    return parquet_bytes({"image": images, "caption": first, "sentences": rest},
                         features={"image": {"_type": "Image"}, "caption": {"dtype": "string", "_type": "Value"}})
