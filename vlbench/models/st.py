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
        if local.is_dir() and (local / "modules.json").is_file():  # refused from its files, before any loading
            problem = folder_problem(local, f"st:{self.checkpoint}")
            if problem is not None:
                raise problem
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
        supports = getattr(model, "supports", None)  # sentence-transformers >= 6 knows its modalities once loaded
        if callable(supports) and not supports("image"):
            raise text_only_error(f"st:{self.checkpoint}", ", ".join(type(m).__name__ for m in model))
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


def preflight(checkpoint: str, *, revision: str | None = None, **_) -> list:
    """A local folder saved by sentence-transformers (modules.json), or a cached / downloadable hub model; either
    read as files (nothing loaded): a broken modules.json or a model without an image path is refused here."""
    if _is_local(checkpoint):
        local = Path(checkpoint).expanduser()
        if (local / "modules.json").is_file():
            problem = folder_problem(local, f"st:{checkpoint}")
            return [problem] if problem else []
        return [ModelError(f"local folder {str(local)!r} " +
                           ("has no modules.json" if local.is_dir() else "does not exist"),
                           "give a folder written by SentenceTransformer.save() (modules.json, config and weights)")]
    cached = _cached_folder(hub_repo(checkpoint), revision)
    if cached is not None:
        problem = folder_problem(cached, f"st:{checkpoint}")
        return [problem] if problem else []
    p = hub_problem(hub_repo(checkpoint), f"--model st:/path/to/{checkpoint.split('/')[-1]}")
    return [p] if p else []


def _cached_folder(repo: str, revision: str | None) -> Path | None:
    """The cached snapshot folder of a hub model holding its modules.json, or None."""
    from huggingface_hub import try_to_load_from_cache  # lazy: only for a hub model name, at preflight

    try:
        path = try_to_load_from_cache(repo, "modules.json", revision=revision)
    except Exception:  # an id the hub client refuses: hub_problem names it
        return None
    return Path(path).parent if isinstance(path, str) else None


#: files that show a sentence-transformers module reads images (an image processor, a vision config)
_IMAGE_FILES = ("preprocessor_config.json", "processor_config.json", "image_processor_config.json")


def _read_modules(folder: Path) -> list[dict]:
    """modules.json of a saved model: a list of {"type", "path", ...}; a ModelError naming the file otherwise."""
    path = folder / "modules.json"
    fix = "save the model again with SentenceTransformer.save(), or restore its modules.json"
    try:
        modules = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ModelError(f"{path} is not UTF-8 text (offset {exc.start})", fix) from None
    except json.JSONDecodeError as exc:
        raise ModelError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
                         fix) from None
    if not isinstance(modules, list) or not modules or \
            not all(isinstance(m, dict) and isinstance(m.get("type"), str) for m in modules):
        raise ModelError(f"{path} is not a list of modules (each an object with a 'type')", fix)
    return modules


def _module_reads_images(folder: Path, module: dict) -> bool | None:
    """True: the module takes images; False: text only as far as its files say; None: cannot tell."""
    kind = module["type"].rsplit(".", 1)[-1]
    if "clip" in kind.lower():
        return True
    if kind == "Router":  # routes by modality to sub-modules: what they take is decided when loaded
        return None
    sub = folder / str(module.get("path") or "")
    try:
        config = json.loads((sub / "sentence_bert_config.json").read_text("utf-8"))
        modalities = config.get("modality_config") if isinstance(config, dict) else None
        if isinstance(modalities, dict):
            return any("image" in str(k) for k in modalities)
    except (OSError, ValueError):
        pass
    if any((sub / f).is_file() for f in _IMAGE_FILES):
        return True
    try:
        return True if "vision_config" in json.loads((sub / "config.json").read_text("utf-8")) else False
    except (OSError, ValueError, TypeError):
        return False


def folder_problem(folder: Path, spec: str) -> ModelError | None:
    """Why a saved sentence-transformers model cannot be an image-text model of a run, from its files (before any
    loading): a broken modules.json (named), or no module that reads images (a text-only model)."""
    try:
        modules = _read_modules(folder)
    except ModelError as exc:
        return exc
    found = [_module_reads_images(folder, m) for m in modules]
    if any(f is not False for f in found):
        return None
    return text_only_error(spec, ", ".join(m["type"].rsplit(".", 1)[-1] for m in modules))


def text_only_error(spec: str, modules: str) -> ModelError:
    return ModelError(f"{spec} is a text-only sentence-transformers model (its modules: {modules}; none reads "
                      "images), so it cannot encode the gallery of an image-text run",
                      "give an image-text sentence-transformers model (e.g. st:clip-ViT-B-32, or a folder with a "
                      "CLIPModel module or a Transformer module whose processor reads images); a text-only model "
                      "can serve as a caption encoder elsewhere, not as --model")
