"""Persistent embedding cache; also what makes an interrupted run resumable.

Layout: ``<cache root>/embeddings/<model_hash[:16]>/<modality>/<shard>.npz``. A shard holds the
keys (sha256 hex of the exact model input: the caption's token ids after truncation, or the image
file's content hash) and the float32 vectors of one encoded batch. The model hash covers the
checkpoint (and a content hash of local weights), revision, preprocessing, precision, embedding
size and the embedding-code version, so a vector is never served to a different model.

Every shard is written to a temporary file and renamed into place, so a run killed at any moment
leaves either a complete shard or none; readers ignore temporary files. Two runs sharing a cache
only ever add shards; duplicates are harmless (identical vectors for identical keys).

A shard proves its content: it stores a sha256 over the model hash, the modality, its keys and the raw
bytes of its vectors (:func:`shard_checksum`), checked every time its vectors are read. A shard that
fails (vectors changed on disk: scaled, zeroed, NaN, swapped between keys; fewer vectors than keys; an
unreadable file) is never used: it is counted in the run's cache statistics (``bad_shards``,
``refused_shards``), named in a warning, moved aside as ``<name>.npz.damaged``, and its items are
encoded again. Shards of an older vlbench carry no checksum: they are not trusted either (counted as
``unverified_shards``; their items are encoded again once, into shards that carry one). A shard that
disappears while a run reads the cache (``vlbench cache clear`` meanwhile) counts as
``vanished_shards`` and its items are encoded again.

The cache root and its other stores belong to :mod:`vlbench.stores`; :func:`list_cache` and
:func:`clear_cache` add what is particular to embeddings (per-model rows, ``--model-hash``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from .. import stores
from ..errors import VlbenchError
from ..util.io import cache_write_bytes

MIN_HASH_PREFIX = 8  # `cache clear --model-hash` needs an exact hash or an unambiguous prefix this long


#: shards this process has written (any cache): what an interrupted command can truthfully say it kept
_WRITTEN_IN_PROCESS = 0


def interrupted_note() -> str:
    """What the command line says when interrupted (Ctrl-C): true for the state reached, i.e. whether any
    encoded batch reached the embedding cache in this process."""
    n = _WRITTEN_IN_PROCESS
    if n == 0:
        return ("interrupted before this command wrote any batch to the embedding cache; run the same command "
                "to start again (vectors cached by earlier runs are reused)")
    return (f"interrupted; the {n} batch(es) encoded before the interruption are in the embedding cache, "
            f"run the same command to resume (they are not encoded again)")


def item_key(text_or_bytes_key: str) -> str:
    return hashlib.sha256(text_or_bytes_key.encode("utf-8")).hexdigest()


class EmbeddingCache:
    def __init__(self, root: str | os.PathLike | None, model_hash: str, *, read: bool = True, write: bool = True,
                 label: str | None = None, warn=None):
        """label: the model's name as the user gave it, shown by ``vlbench cache ls``. warn: called with one
        line per shard that is not used (default: printed to stderr, also under --quiet)."""
        self.root = stores.root(root)
        self.model_hash = model_hash
        self.label = label
        self.read = read
        self.write = write
        self.dir = stores.path("embeddings", self.root) / model_hash[:16]
        self.warn = warn or _warn
        self._index: dict[str, dict[str, tuple[Path, int]]] = {}
        self._legacy: dict[str, dict[str, Path]] = {}  # shards without a checksum (older vlbench): never used
        self._refused: set[Path] = set()  # shards already reported in this process
        self.stats: dict[str, Any] = {"hits": 0, "misses": 0, "shards_written": 0, "bad_shards": 0,
                                      "unverified_shards": 0, "vanished_shards": 0, "refused_shards": []}

    def _load_index(self, modality: str) -> dict[str, tuple[Path, int]]:
        """key -> (shard, row) from the shards' keys alone (vectors are read, and proven, on lookup)."""
        if modality in self._index:
            return self._index[modality]
        index: dict[str, tuple[Path, int]] = {}
        legacy: dict[str, Path] = {}
        d = self.dir / modality
        for shard in (sorted(d.glob("*.npz")) if self.read and d.is_dir() else []):
            try:
                with np.load(shard, allow_pickle=False) as z:
                    if str(z["model"]) != self.model_hash:
                        continue
                    keys = [k.decode() if isinstance(k, bytes) else str(k) for k in z["keys"].tolist()]
                    proven = "checksum" in z.files
            except FileNotFoundError:  # removed since the listing (`vlbench cache clear` under a running run)
                self.stats["vanished_shards"] += 1
                continue
            except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
                self._refuse(modality, shard, f"unreadable: {type(exc).__name__}", len_keys=None)
                continue
            for i, k in enumerate(keys):
                if proven:
                    index[k] = (shard, i)
                else:
                    legacy.setdefault(k, shard)
        self._index[modality] = index
        self._legacy[modality] = legacy
        return index

    def lookup(self, modality: str, keys: list[str]) -> tuple[np.ndarray, np.ndarray | None]:
        """(found mask, vectors for the found keys in order). Every shard's vectors are checked against its
        checksum before use; a shard that fails (or vanished, or has no checksum) gives nothing: its keys
        are reported missing, so the caller encodes them again."""
        index = self._load_index(modality)
        by_shard: dict[Path, list[tuple[int, int]]] = {}
        for pos, k in enumerate(keys):
            hit = index.get(k)
            if hit is not None:
                by_shard.setdefault(hit[0], []).append((pos, hit[1]))
        self._report_legacy(modality, [k for k in keys if k not in index])
        out: dict[int, np.ndarray] = {}
        for shard, pairs in by_shard.items():
            vecs = self._proven_vectors(modality, shard, [(keys[p], r) for p, r in pairs])
            if vecs is not None:
                out.update((p, vecs[r]) for p, r in pairs)
        found = np.zeros(len(keys), dtype=bool)
        found[list(out)] = True
        self.stats["hits"] += int(found.sum())
        self.stats["misses"] += int((~found).sum())
        if not out:
            return found, None
        return found, np.stack([out[p] for p in sorted(out)]).astype(np.float32)

    def _proven_vectors(self, modality: str, shard: Path, wanted: list[tuple[str, int]]) -> np.ndarray | None:
        """The shard's vectors if its checksum, shape and the wanted (key, row) pairs hold; else None (reported)."""
        try:
            with np.load(shard, allow_pickle=False) as z:
                keys, vecs, stored = z["keys"], z["vectors"], str(z["checksum"])
        except FileNotFoundError:
            self._forget(modality, shard)
            if shard not in self._refused:
                self._refused.add(shard)
                self.stats["vanished_shards"] += 1
                self.warn(f"embedding cache shard {shard} was removed while this run was reading the cache "
                          f"(`vlbench cache clear`?): its {len(wanted)} item(s) are encoded again")
            return None
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
            self._refuse(modality, shard, f"unreadable: {type(exc).__name__}", len(wanted))
            return None
        problem = _shard_problem(self.model_hash, modality, keys, vecs, stored)
        if problem is None and any(_key_at(keys, r) != k for k, r in wanted):
            problem = "its keys changed since the cache was indexed"
        if problem is not None:
            self._refuse(modality, shard, problem, len(wanted))
            return None
        return vecs

    def _refuse(self, modality: str, shard: Path, problem: str, len_keys: int | None) -> None:
        """Report a damaged shard once, stop using it and move it aside (``<name>.damaged``, kept for a look)."""
        self._forget(modality, shard)
        if shard in self._refused:
            return None
        self._refused.add(shard)
        self.stats["bad_shards"] += 1
        if len(self.stats["refused_shards"]) < 20:
            self.stats["refused_shards"].append(f"{modality}/{shard.name}")
        aside = shard.with_name(shard.name + ".damaged")
        try:
            os.replace(shard, aside)
            where = f"moved aside to {aside.name}"
        except FileNotFoundError:  # another process met it first
            where = "moved aside by another process"
        except OSError:
            where = "left in place"
        items = f"its {len_keys} item(s) needed here are" if len_keys else "its items are"
        self.warn(f"embedding cache shard {shard} is damaged ({problem}); it is not used, {items} "
                  f"encoded again, and it was {where}")
        return None

    def _forget(self, modality: str, shard: Path) -> None:
        index = self._index.get(modality, {})
        for k in [k for k, (s, _) in index.items() if s == shard]:
            del index[k]

    def _report_legacy(self, modality: str, missing: list[str]) -> None:
        """Shards of an older vlbench (no checksum) hold some wanted keys: say once per shard that they are
        not trusted; the keys are encoded again and written to proven shards."""
        legacy = self._legacy.get(modality) or {}
        shards = {legacy[k] for k in missing if k in legacy} - self._refused
        for shard in sorted(shards):
            self._refused.add(shard)
            self.stats["unverified_shards"] += 1
        if shards:
            self.warn(f"{len(shards)} embedding cache shard(s) under {self.dir / modality} were written by an "
                      f"older vlbench without a checksum, so their vectors cannot be proven: they are not used and "
                      f"their items are encoded again (once: the new shards carry a checksum)")

    def add(self, modality: str, keys: list[str], vectors: np.ndarray) -> None:
        if not self.write or not keys:
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(keys) or not np.isfinite(vectors).all():
            raise ValueError(f"refusing to cache {vectors.shape} vectors for {len(keys)} keys (or non-finite ones)")
        karr = np.array(keys, dtype="S64")
        name = hashlib.sha256(b"".join(karr.tolist())).hexdigest()[:24]
        path = self.dir / modality / f"{name}.npz"
        buf = io.BytesIO()
        np.savez(buf, keys=karr, vectors=vectors, model=np.array(self.model_hash),
                 checksum=np.array(shard_checksum(self.model_hash, modality, karr, vectors)))
        if not cache_write_bytes(path, buf.getvalue()):  # its folder kept vanishing (a concurrent clear): not kept
            return
        if self.label and not (self.dir / "model.json").is_file():
            cache_write_bytes(self.dir / "model.json",
                              json.dumps({"model_hash": self.model_hash, "label": self.label}).encode())
        self.stats["shards_written"] += 1
        global _WRITTEN_IN_PROCESS
        _WRITTEN_IN_PROCESS += 1
        index = self._index.setdefault(modality, {})
        for i, k in enumerate(keys):
            index[k] = (path, i)
        self._refused.discard(path)


def shard_checksum(model_hash: str, modality: str, keys: np.ndarray, vectors: np.ndarray) -> str:
    """sha256 binding a shard's keys to its vectors, row by row: over the model hash, the modality, the shape,
    the 64-byte keys and the little-endian float32 vector bytes. Any change to a vector (scaled, zeroed, NaN),
    to a key, or to their order (vectors swapped between keys) changes it."""
    h = hashlib.sha256(b"vlbench-embedding-shard-v1\0")
    h.update(f"{model_hash}\0{modality}\0{len(keys)}\0{tuple(vectors.shape)}\0".encode())
    h.update(np.ascontiguousarray(keys, dtype="S64").tobytes())
    h.update(np.ascontiguousarray(vectors, dtype="<f4").tobytes())
    return h.hexdigest()


def _shard_problem(model_hash: str, modality: str, keys: np.ndarray, vecs: np.ndarray, stored: str) -> str | None:
    """Why a shard's content cannot be used, or None when it is proven."""
    if keys.dtype.kind != "S" or keys.ndim != 1:
        return f"its keys are {keys.dtype} of shape {keys.shape}, not a list of 64-byte keys"
    if vecs.dtype != np.float32 or vecs.ndim != 2:
        return f"its vectors are {vecs.dtype} of shape {vecs.shape}, not a float32 matrix"
    if len(vecs) != len(keys):
        return f"{len(vecs)} vectors for {len(keys)} keys"
    if shard_checksum(model_hash, modality, keys, vecs) != stored:
        return "the checksum of its keys and vectors does not match: the vectors were changed on disk"
    if not np.isfinite(vecs).all():
        return "it holds NaN or infinite values"
    return None


def _key_at(keys: np.ndarray, row: int) -> str | None:
    if row >= len(keys):
        return None
    k = keys[row]
    return k.decode() if isinstance(k, bytes) else str(k)


def _warn(message: str) -> None:
    print(f"vlbench: warning: {message}", file=sys.stderr, flush=True)


def list_cache(root=None) -> list[dict]:
    """One row per cached model and modality: hash, label, shards, vectors, bytes, modified."""
    out: list[dict] = []
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
