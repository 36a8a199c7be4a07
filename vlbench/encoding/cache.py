"""Persistent embedding cache; also what makes an interrupted run resumable.

Layout: ``<cache root>/embeddings/<model_hash[:16]>/<modality>/<shard>.npz``. A shard holds the
keys (sha256 hex of the exact model input: the caption's token ids after truncation, or the image
file's content hash) and the float32 vectors of one encoded batch. The model hash covers the
checkpoint (and a content hash of local weights), revision, preprocessing, precision, embedding
size and the embedding-code version, so a vector is never served to a different model.

Every shard is written to a temporary file and renamed into place, so a run killed at any moment
leaves either a complete shard or none; readers ignore temporary files. Two runs sharing a cache
only ever add shards; duplicates are harmless (identical vectors for identical keys).

The cache root and its other stores belong to :mod:`vlbench.stores`; :func:`list_cache` and
:func:`clear_cache` add what is particular to embeddings (per-model rows, ``--model-hash``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import time
import zipfile
from pathlib import Path

import numpy as np

from .. import stores
from ..util.io import atomic_write_bytes, atomic_write_text
from ..errors import VlbenchError

MIN_HASH_PREFIX = 8  # `cache clear --model-hash` needs an exact hash or an unambiguous prefix this long


def item_key(text_or_bytes_key: str) -> str:
    return hashlib.sha256(text_or_bytes_key.encode("utf-8")).hexdigest()


class EmbeddingCache:
    def __init__(self, root: str | os.PathLike | None, model_hash: str, *, read: bool = True, write: bool = True,
                 label: str | None = None):
        """label: the model's name as the user gave it, shown by ``vlbench cache ls``."""
        self.root = stores.root(root)
        self.model_hash = model_hash
        self.label = label
        self.read = read
        self.write = write
        self.dir = stores.path("embeddings", self.root) / model_hash[:16]
        self._index: dict[str, dict[str, tuple[Path, int]]] = {}
        self.stats = {"hits": 0, "misses": 0, "shards_written": 0, "bad_shards": 0}

    def _load_index(self, modality: str) -> dict[str, tuple[Path, int]]:
        if modality in self._index:
            return self._index[modality]
        index: dict[str, tuple[Path, int]] = {}
        d = self.dir / modality
        if self.read and d.is_dir():
            for shard in sorted(d.glob("*.npz")):
                try:
                    with np.load(shard, allow_pickle=False) as z:
                        keys = z["keys"]
                        if str(z["model"]) != self.model_hash:
                            continue
                    for i, k in enumerate(keys.tolist()):
                        index[k.decode() if isinstance(k, bytes) else str(k)] = (shard, i)
                except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError):
                    self.stats["bad_shards"] += 1  # cannot happen with atomic writes; never trusted
        self._index[modality] = index
        return index

    def lookup(self, modality: str, keys: list[str]) -> tuple[np.ndarray, np.ndarray | None]:
        """(found mask, vectors for the found keys in order) ."""
        index = self._load_index(modality)
        found = np.array([k in index for k in keys], dtype=bool)
        self.stats["hits"] += int(found.sum())
        self.stats["misses"] += int((~found).sum())
        if not found.any():
            return found, None
        by_shard: dict[Path, list[tuple[int, int]]] = {}
        for pos, k in enumerate(keys):
            if found[pos]:
                shard, row = index[k]
                by_shard.setdefault(shard, []).append((pos, row))
        out = {}
        for shard, pairs in by_shard.items():
            with np.load(shard, allow_pickle=False) as z:
                vecs = z["vectors"]
                for pos, row in pairs:
                    out[pos] = vecs[row]
        return found, np.stack([out[p] for p in sorted(out)]).astype(np.float32)

    def add(self, modality: str, keys: list[str], vectors: np.ndarray) -> None:
        if not self.write or not keys:
            return
        vectors = np.asarray(vectors, dtype=np.float32)
        karr = np.array(keys, dtype="S64")
        name = hashlib.sha256(b"".join(karr.tolist())).hexdigest()[:24]
        path = self.dir / modality / f"{name}.npz"
        buf = io.BytesIO()
        np.savez(buf, keys=karr, vectors=vectors, model=np.array(self.model_hash))
        atomic_write_bytes(path, buf.getvalue())
        if self.label and not (self.dir / "model.json").is_file():
            atomic_write_text(self.dir / "model.json", json.dumps({"model_hash": self.model_hash, "label": self.label}))
        self.stats["shards_written"] += 1
        index = self._index.setdefault(modality, {})
        for i, k in enumerate(keys):
            index[k] = (path, i)


def list_cache(root=None) -> list[dict]:
    """One row per cached model and modality: hash, label, shards, vectors, bytes, modified."""
    out = []
    base = stores.path("embeddings", stores.checked_root(root))
    if not base.is_dir():
        return out
    for model_dir in sorted(base.iterdir()):
        for mod_dir in sorted(p for p in model_dir.iterdir() if p.is_dir()):
            shards = list(mod_dir.glob("*.npz"))
            size = sum(s.stat().st_size for s in shards)
            n = 0
            for s in shards:
                try:
                    with np.load(s, allow_pickle=False) as z:
                        n += len(z["keys"])
                except Exception:
                    pass
            newest = max((s.stat().st_mtime for s in shards), default=0)
            out.append({"model_hash": model_dir.name, "model": _model_label(model_dir), "modality": mod_dir.name,
                        "shards": len(shards), "vectors": n, "bytes": size,
                        "modified": time.strftime("%Y-%m-%d %H:%M", time.localtime(newest)) if newest else ""})
    return out


def _model_label(model_dir: Path) -> str:
    try:
        return str(json.loads((model_dir / "model.json").read_text()).get("label") or "")
    except (OSError, ValueError, AttributeError):
        return ""


def _matching_model_dirs(base: Path, model_hash: str) -> list[Path]:
    """The model folders a user-given hash names: an exact hash, or a prefix of >= 8 characters
    that names exactly one model (folders are named by the first 16 characters)."""
    dirs = sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
    want = model_hash.strip().lower()
    if not want:
        raise VlbenchError("--model-hash is empty (an empty hash would match every model)",
                           "give the hash that `vlbench cache ls` shows, or leave --model-hash out to clear everything")
    exact = [p for p in dirs if p.name == want[:16] and len(want) >= 16]
    if exact:
        return exact
    if len(want) < MIN_HASH_PREFIX:
        raise VlbenchError(f"--model-hash {model_hash!r} is too short to name one model safely",
                           f"give at least {MIN_HASH_PREFIX} characters of the hash that `vlbench cache ls` shows")
    found = [p for p in dirs if p.name.startswith(want)]
    if len(found) > 1:
        raise VlbenchError(f"--model-hash {model_hash!r} matches {len(found)} models: "
                           f"{', '.join(p.name for p in found)}", "give more characters of the hash")
    if not found:
        raise VlbenchError(f"no cached model matches --model-hash {model_hash!r} (nothing removed)",
                           "`vlbench cache ls` shows the cached models' hashes")
    return found


def clear_cache(root=None, model_hash: str | None = None) -> int:
    """With ``model_hash``: remove that model's vectors and text keys (an exact hash or an unambiguous
    prefix, see :func:`_matching_model_dirs`). Without: empty every cache store (:func:`vlbench.stores.clear`).
    Returns the number of embedding model folders plus perturbed-caption files removed."""
    root = stores.checked_root(root)
    base = stores.path("embeddings", root)
    if model_hash is not None:
        dirs = _matching_model_dirs(base, model_hash)
        for model_dir in dirs:
            shutil.rmtree(model_dir, ignore_errors=True)
            shutil.rmtree(stores.path("text-keys", root) / model_dir.name, ignore_errors=True)
        return len(dirs)
    n = len([p for p in base.iterdir() if p.is_dir()]) if base.is_dir() else 0
    n += len(list(stores.path("perturbations", root).glob("*.json")))
    stores.clear(root)
    return n


def list_perturbation_cache(root=None) -> list[dict]:
    """One row per cached perturbed-caption file: key, perturbation names, bytes, modified."""
    out = []
    for f in sorted(stores.path("perturbations", stores.checked_root(root)).glob("*.json")):
        try:
            names = sorted(json.loads(f.read_text()))
        except (OSError, ValueError, TypeError):
            names = ["(unreadable)"]
        st = f.stat()
        out.append({"key": f.stem, "perturbations": names, "bytes": st.st_size,
                    "modified": time.strftime("%Y-%m-%d %H:%M", time.localtime(st.st_mtime))})
    return out
