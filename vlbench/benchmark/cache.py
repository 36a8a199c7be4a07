"""Persistent embedding cache; also what makes an interrupted run resumable.

Layout: ``<cache_dir>/embeddings/<model_hash[:16]>/<modality>/<shard>.npz``. A shard holds the
keys (sha256 hex of the exact model input: the caption's token ids after truncation, or the image
file's content hash) and the float32 vectors of one encoded batch. The model hash covers the
checkpoint (and a content hash of local weights), revision, preprocessing, precision, embedding
size and the embedding-code version, so a vector is never served to a different model.

Every shard is written to a temporary file and renamed into place, so a run killed at any moment
leaves either a complete shard or none; readers ignore temporary files. Two runs sharing a cache
only ever add shards; duplicates are harmless (identical vectors for identical keys).
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import time
import zipfile
from pathlib import Path

import numpy as np

from .._io import atomic_write_bytes
from .._paths import cache_root


def default_cache_dir() -> Path:
    return cache_root()


def item_key(text_or_bytes_key: str) -> str:
    return hashlib.sha256(text_or_bytes_key.encode("utf-8")).hexdigest()


class EmbeddingCache:
    def __init__(self, root: str | os.PathLike | None, model_hash: str, *, read: bool = True, write: bool = True):
        self.root = Path(root) if root else default_cache_dir()
        self.model_hash = model_hash
        self.read = read
        self.write = write
        self.dir = self.root / "embeddings" / model_hash[:16]
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
        self.stats["shards_written"] += 1
        index = self._index.setdefault(modality, {})
        for i, k in enumerate(keys):
            index[k] = (path, i)


MODEL_FILE = "model.json"


def remember_model(cache: "EmbeddingCache", spec: str, identity: dict) -> None:
    """Write which model a cache folder belongs to (for 'vlbench cache ls'); once per folder."""
    import json

    path = cache.dir / MODEL_FILE
    if cache.write and not path.is_file():
        atomic_write_bytes(path, json.dumps({"spec": spec, "model_hash": cache.model_hash,
                                             "checkpoint": (identity or {}).get("checkpoint")},
                                            default=str).encode())


def _model_name(model_dir: Path) -> str:
    import json

    try:
        return str(json.loads((model_dir / MODEL_FILE).read_text())["spec"])
    except (OSError, ValueError, KeyError, TypeError):
        return "?"


def list_perturbation_cache(root=None) -> dict:
    root = Path(root) if root else default_cache_dir()
    files = sorted((root / "perturbations").glob("*.json"))
    return {"files": len(files), "bytes": sum(f.stat().st_size for f in files),
            "modified": time.strftime("%Y-%m-%d %H:%M", time.localtime(max(f.stat().st_mtime for f in files)))
            if files else ""}


def clear_perturbation_cache(root=None) -> int:
    root = Path(root) if root else default_cache_dir()
    files = list((root / "perturbations").glob("*.json"))
    for f in files:
        f.unlink(missing_ok=True)
    return len(files)


def list_cache(root=None) -> list[dict]:
    root = Path(root) if root else default_cache_dir()
    out = []
    base = root / "embeddings"
    if not base.is_dir():
        return out
    for model_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        name = _model_name(model_dir)
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
            out.append({"model_hash": model_dir.name, "model": name, "modality": mod_dir.name, "shards": len(shards),
                        "vectors": n, "bytes": size,
                        "modified": time.strftime("%Y-%m-%d %H:%M", time.localtime(newest)) if newest else ""})
    return out


#: a --model-hash prefix shorter than this could name several models by accident
MIN_HASH_PREFIX = 8


def clear_cache(root=None, model_hash: str | None = None) -> int:
    """Remove every model's vectors, or one model's: ``model_hash`` is its hash or an unambiguous prefix of
    at least MIN_HASH_PREFIX characters (as 'vlbench cache ls' prints it)."""
    from ..errors import VlbenchError

    root = Path(root) if root else default_cache_dir()
    base = root / "embeddings"
    dirs = sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
    if model_hash is not None:
        want = model_hash.strip().lower()
        if len(want) < MIN_HASH_PREFIX:
            raise VlbenchError(f"--model-hash {model_hash!r} is too short to name one model safely",
                               f"give at least {MIN_HASH_PREFIX} characters of the hash 'vlbench cache ls' prints")
        dirs = [d for d in dirs if d.name.startswith(want[:16]) or want.startswith(d.name)]
        if not dirs:
            raise VlbenchError(f"no model with hash {model_hash!r} in the cache at {root}",
                               "run 'vlbench cache ls' to see the cached models")
        if len(dirs) > 1:
            raise VlbenchError(f"--model-hash {model_hash!r} matches {len(dirs)} models: "
                               f"{', '.join(d.name for d in dirs)}", "give more characters of the hash")
    for model_dir in dirs:
        shutil.rmtree(model_dir, ignore_errors=True)
    return len(dirs)
