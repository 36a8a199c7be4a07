"""A frozen, typed model identity: everything that changes a vector, with one stable hash.

Adapters describe themselves with ``identity()`` (a JSON-ready dict, written into results);
``ModelIdentity.from_dict`` types the fields every adapter shares (adapter, checkpoint,
revision, precision, embedding size, preprocessing) and keeps the adapter-specific rest as
canonical JSON, so the object is hashable and immutable. ``hash()`` is the model hash used in
every cache key and result; it equals the hash of the dict form, so existing caches stay valid.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

_TYPED = ("adapter", "checkpoint", "revision", "precision", "embed_dim", "preprocessing")


def _canon(obj) -> str:
    return json.dumps(obj, sort_keys=True, default=str)


@dataclass(frozen=True)
class ModelIdentity:
    adapter: str
    checkpoint: str | None
    revision: str | None
    precision: str | None
    embed_dim: int | None
    preprocessing: str  # canonical JSON
    other: str  # canonical JSON of the adapter-specific fields
    present: tuple = ()  # which typed fields the adapter gave (absent ones stay out of the dict)

    @classmethod
    def from_dict(cls, d: dict) -> ModelIdentity:
        rest = {k: v for k, v in d.items() if k not in _TYPED}
        return cls(adapter=str(d.get("adapter", "")), checkpoint=d.get("checkpoint"), revision=d.get("revision"),
                   precision=d.get("precision"), embed_dim=d.get("embed_dim"),
                   preprocessing=_canon(d.get("preprocessing")), other=_canon(rest),
                   present=tuple(k for k in _TYPED if k in d))

    def to_dict(self) -> dict:
        out = json.loads(self.other)
        for k in self.present:
            out[k] = json.loads(self.preprocessing) if k == "preprocessing" else getattr(self, k)
        return out

    def hash(self, embed_code_version: str) -> str:
        """sha256 of the identity plus the embedding code version (the model hash)."""
        ident = self.to_dict()
        ident["embed_code_version"] = embed_code_version
        return hashlib.sha256(_canon(ident).encode()).hexdigest()
