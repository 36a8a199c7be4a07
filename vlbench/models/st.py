"""sentence-transformers image-text models: ``st:NAME_OR_FOLDER`` (e.g. ``st:clip-ViT-B-32``).

NAME is a sentence-transformers model name (``clip-ViT-B-32`` means the hub repository
``sentence-transformers/clip-ViT-B-32``), a hub id ``org/name``, or a local folder written by
``SentenceTransformer.save``. Texts and images are encoded with the model's own ``encode`` (its tokenizer,
truncation and image processor), so the vectors are the ones sentence-transformers gives, before the
runner's L2 normalization. ``--relevance st:clip-ViT-B-32`` uses it as a fixed relevance encoder for DCG gains.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ModelError, VlbenchError
from .adapter import ModelAdapter, _dir_fingerprint, _load_error, local_fingerprint, torch_dtype
from .hub import hub_commit, hub_problem

__all__ = ["SentenceTransformerAdapter", "load_st", "hub_repo", "fingerprint", "preflight"]

DEFAULT = "clip-ViT-B-32"


def hub_repo(name: str) -> str:
    """The hub repository of a sentence-transformers name (a bare name lives under sentence-transformers/)."""
    return name if "/" in name else f"sentence-transformers/{name}"


def _is_local(name: str) -> bool:
    return Path(name).expanduser().exists() or name.startswith((".", "/", "~"))


class SentenceTransformerAdapter(ModelAdapter):
    name = "st"

    def __init__(self, checkpoint: str | None = None, *, device: str = "cpu", precision: str = "fp32",
                 revision: str | None = None, trust_remote_code: bool = False, **_):
        self.checkpoint = checkpoint or DEFAULT
        self.device, self.precision = device, precision
        local = Path(self.checkpoint).expanduser()
        source = str(local) if local.exists() else self.checkpoint
        try:
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(source, device=device, revision=revision,
                                        trust_remote_code=trust_remote_code)
        except ImportError as exc:
            raise ModelError("the st model family needs the sentence-transformers package",
                             "pip install sentence-transformers") from exc
        except VlbenchError:
            raise
        except Exception as exc:
            raise _load_error("st", self.checkpoint, exc) from exc
        if precision != "fp32":
            model = model.to(dtype=torch_dtype(precision))
        self.model = model.eval()
        self._local = _dir_fingerprint(local) if local.is_dir() else None
        self.revision = revision
        self._modules = self._module_list(local if local.is_dir() else None)

    def _module_list(self, folder: Path | None) -> list:
        if folder is not None and (folder / "modules.json").is_file():
            try:
                return [m.get("type") for m in json.loads((folder / "modules.json").read_text())]
            except ValueError:
                pass
        return [type(m).__name__ for m in self.model]

    def identity(self) -> dict:
        return {
            "adapter": "vlbench.st",
            "checkpoint": self.checkpoint,
            "revision": self.revision,
            "local": self._local,
            "modules": self._modules,
            "max_seq_length": getattr(self.model, "max_seq_length", None),
            "precision": self.precision,
            "embed_dim": self._embed_dim(),
            "preprocessing": "sentence-transformers encode (the model's own processor)",
        }

    def _embed_dim(self) -> int:
        get = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(get() or 0)  # sentence-transformers 6 renamed the method

    def preprocess(self, image):  # the model's processor runs inside encode()
        return image

    def collate(self, items):
        return list(items)

    def _encode(self, inputs):
        return self.model.encode(list(inputs), batch_size=max(1, len(inputs)), convert_to_tensor=True,
                                 show_progress_bar=False, normalize_embeddings=False)

    def encode_images(self, batch):
        return self._encode(batch)

    def encode_texts(self, texts):
        return self._encode(texts)


def load_st(checkpoint=None, *, device="cpu", precision="fp32", revision=None, trust_remote_code=False, **_):
    return SentenceTransformerAdapter(checkpoint, device=device, precision=precision, revision=revision,
                                      trust_remote_code=trust_remote_code)


def fingerprint(checkpoint: str, *, revision: str | None = None, **_) -> dict | None:
    """A local folder's file digests, or the commit of the cached hub snapshot (None: not cached)."""
    local = local_fingerprint(checkpoint)
    if local is not None:
        return local
    commit = hub_commit(hub_repo(checkpoint), revision)
    return {"commit": commit} if commit else None


def preflight(checkpoint: str, **_) -> list:
    """A local folder saved by sentence-transformers (modules.json), or a cached / downloadable hub model."""
    if _is_local(checkpoint):
        local = Path(checkpoint).expanduser()
        if (local / "modules.json").is_file():
            return []
        return [ModelError(f"local folder {str(local)!r} " +
                           ("has no modules.json" if local.is_dir() else "does not exist"),
                           "give a folder written by SentenceTransformer.save() (modules.json, config and weights)")]
    p = hub_problem(hub_repo(checkpoint), f"--model st:/path/to/{checkpoint.split('/')[-1]}")
    return [p] if p else []
