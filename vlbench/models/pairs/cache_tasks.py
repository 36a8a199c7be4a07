"""The pair-score cache of the choice tasks: one pair scorer's score of (image content, text key), kept on disk.

Key: the pair scorer's ``model_hash()`` (its identity: checkpoint, revision, precision, preprocessing, head),
the image file's content key (``img:`` + SHA-256 of its bytes, vlbench.encoding.images.file_key) and the
scorer's ``text_keys`` key of the text (what the model reads: two captions that tokenize alike share one
score). Layout: ``<root>/task-pair-scores/<model hash>/<2 hex>/<image sha256>.json``, one file per image holding
``{sha256(text key): score}``; a score is a float32 value written as its exact decimal (float64 holds every
float32), so a warm run reads back bit for bit what the model gave. Files are replaced atomically (a temporary
file, then a rename), so a run stopped mid-write leaves the old file or the new one, never half of one.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from ... import stores
from ...errors import VlbenchError

STORE = stores.declare(stores.Store("task-pair-scores", "task-pair-scores", __name__,
                                    "pair scorers' scores of (image, text) in choice tasks, per pair model hash"))


def _digest(text_key: str) -> str:
    return hashlib.sha256(text_key.encode("utf-8")).hexdigest()


class PairScoreCache:
    """The scores of one pair model (``model_hash``) under the cache root ``root``. ``read=False`` (--restart):
    every score is computed again and written over the old one. ``stats``: hits, misses and files written."""

    def __init__(self, root: str | os.PathLike, model_hash: str, *, read: bool = True):
        if not model_hash or "/" in model_hash or model_hash.startswith("."):
            raise VlbenchError(f"pair-score cache: bad model hash {model_hash!r}", "pass the scorer's model_hash()")
        self.root = stores.path(STORE.name, root) / model_hash
        self.read = read
        self.stats = {"hits": 0, "misses": 0, "files_written": 0}

    def _file(self, image_key: str) -> Path:
        sha = image_key.removeprefix("img:")
        if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            raise VlbenchError(f"pair-score cache: {image_key!r} is not an image content key",
                               "pass vlbench.encoding.images.file_key(path)")
        return self.root / sha[:2] / f"{sha}.json"

    def _load(self, image_key: str) -> dict:
        path = self._file(image_key)
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):  # a damaged file is a miss: its scores are computed and written again
            return {}
        return doc.get("scores", {}) if isinstance(doc, dict) and isinstance(doc.get("scores"), dict) else {}

    def get(self, image_key: str, text_keys) -> dict[str, np.float32]:
        """text key -> score of the keys cached for this image (a read-less cache gives none)."""
        text_keys = list(text_keys)
        have = self._load(image_key) if self.read else {}
        out = {}
        for key in text_keys:
            v = have.get(_digest(key))
            if isinstance(v, (int, float)) and np.isfinite(v):
                out[key] = np.float32(v)
        self.stats["hits"] += len(out)
        self.stats["misses"] += len(text_keys) - len(out)
        return out

    def put(self, image_key: str, scores: dict) -> None:
        """Add ``{text key: score}`` of one image to its file (the scores already there are kept)."""
        if not scores:
            return
        path = self._file(image_key)
        merged = self._load(image_key)
        merged.update({_digest(k): float(np.float32(v)) for k, v in scores.items()})
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"image": image_key, "scores": merged}, sort_keys=True))
        tmp.replace(path)
        self.stats["files_written"] += 1
