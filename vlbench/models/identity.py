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


def weights_source(identity: dict, spec: str | None = None) -> tuple[str, str]:
    """Where a model's weights came from, read from its identity (results.json ``model.identity``): (kind, words).

    kind: ``"hub"`` (a Hub repository at a recorded commit), ``"library"`` (a library's own named download, e.g.
    open_clip's ``ARCH/TAG``), ``"local"`` (a folder or file on this machine, by its content sha256), ``"random"``
    (no pretrained weights) or ``"unknown"`` (the identity does not say: an older run, a plug-in). ``spec``: the
    model as the user wrote it; a hub-shaped name (``ORG/NAME``) read from a local folder is said to be one."""
    ckpt = str(identity.get("checkpoint") or "")
    local = identity.get("local")
    if identity.get("random_weights"):
        return "random", f"random weights ({ckpt or 'no pretrained weights'}: nothing was loaded)"
    if isinstance(local, dict) and local.get("content_sha256"):
        where = str(local.get("local_path") or ckpt)
        words = f"the local folder {where} (content sha256 {str(local['content_sha256'])[:16]}...)"
        if shadows_hub_id(spec, ckpt):
            words += (f", not the Hub's {ckpt}: a folder of that name under the working directory is read first "
                      f"(write ./{ckpt} to say you mean it, or run elsewhere for the Hub's)")
        return "local", words
    revision = identity.get("revision")
    if isinstance(revision, str) and len(revision) >= 7 and ckpt:
        return "hub", f"the Hub's {ckpt.removeprefix('hf-hub:')} at commit {revision[:12]}"
    if ckpt.startswith("hf-hub:"):
        return "hub", f"the Hub's {ckpt.removeprefix('hf-hub:')} (commit not recorded)"
    if str(identity.get("adapter")) == "vlbench.openclip" and "/" in ckpt:
        return "library", f"open_clip's pretrained weights {ckpt}"
    return "unknown", f"{ckpt or 'the adapter'} (the model's identity does not record where its weights came from)"


def shadows_hub_id(spec: str | None, checkpoint: str) -> bool:
    """Whether the user wrote a hub-shaped relative name (``ORG/NAME``, not ``./``, ``/`` or ``~``) that was read
    from a local folder of that name: the folder shadows the Hub repository."""
    written = (spec or "").partition(":")[2] or checkpoint
    parts = written.split("/")
    return (len(parts) == 2 and all(parts) and not written.startswith((".", "/", "~"))
            and not written.startswith("hf-hub:"))
