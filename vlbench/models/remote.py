"""Hub models that ship their own code: ``remote:CHECKPOINT[?options]`` with ``--trust-remote-code``.

Long-text dual encoders (jina-clip-v2, FG-CLIP 2, LLM2CLIP, ...) are published as transformers checkpoints
whose ``config.json`` maps ``AutoModel`` to a Python module in the repository (``auto_map``). vlbench loads
them through transformers' own ``AutoModel.from_pretrained(..., trust_remote_code=True)`` path and reads the
embeddings through the methods such models expose:

* ``api=features`` (chosen when the model has them): ``get_text_features(input_ids, attention_mask)`` and
  ``get_image_features(pixel_values)``, with the checkpoint's own tokenizer (``AutoTokenizer``) and image
  processor (``AutoImageProcessor``);
* ``api=encode``: ``encode_text(list[str])`` and ``encode_image(list[PIL.Image])``, the model's own
  preprocessing (jina-clip's interface); ``task=NAME`` is passed to ``encode_text`` when the model asks for a
  task (jina-clip-v2: ``retrieval.query``).

Options after ``?`` (each at most once): ``max_length=N`` (text tokens; default: the smaller of the text
config's ``max_position_embeddings`` and the tokenizer's ``model_max_length``), ``text_prefix=STR`` (a prompt
or instruction the model card prescribes, prepended to every caption), ``api=features|encode``,
``task=NAME``, ``lowercase=0|1``, ``auto=AutoModelForCausalLM`` (the transformers Auto class the model card
loads it with; default AutoModel), ``text_kw=NAME:VALUE`` (one keyword for get_text_features, e.g. FG-CLIP 2's
``walk_type:long``). All of them, the hashes of the checkpoint's code files, and the resolved
commit are part of the model identity: another prompt or another version of the code is another model.

``auto_map`` may name code outside the checkpoint: ``org/repo--module.Class`` (a Hub code repository, as
jina-clip-v2 does) or ``FOLDER--module.Class`` (a local folder). transformers runs that code, which the
checkpoint's own commit does not pin, so each such source is pinned too (:func:`code_sources`): a Hub
repository to the commit of the snapshot its code comes from (huggingface_hub's revision resolution in the
local cache, the snapshot transformers loads), a folder to a content hash of its Python files, with the
sha256 of every file. The sources are in the identity (``code_sources``) and in the cache fingerprint, so
editing that code gives another model hash and the vectors are encoded again.

Running a repository's code is a decision the user makes: without ``--trust-remote-code`` the family refuses
before anything is downloaded or loaded (preflight), naming the code files when the checkpoint is local.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ..errors import ModelError, VlbenchError
from ..util.io import sha256_json
from ..util.query import QueryProblem, query_pairs
from .adapter import ModelAdapter, _as_features, _dir_fingerprint, _load_error, local_fingerprint, torch_dtype
from .budget import cut_to_budget, hf_cutter
from .hub import hub_commit, hub_problem

__all__ = ["RemoteCodeEncoder", "load_remote", "split_options", "fingerprint", "preflight"]

OPTIONS = {"max_length": int, "text_prefix": str, "api": str, "task": str, "lowercase": int, "auto": str,
           "text_kw": str}
_TYPE_NAMES = {int: "an integer", str: "text"}
APIS = ("features", "encode")


def split_options(checkpoint: str | None) -> tuple[str, dict]:
    """``CHECKPOINT?k=v&...`` -> (checkpoint, options); unknown, repeated or malformed options are refused."""
    if not checkpoint:
        raise ModelError("remote: no checkpoint given", "name one: --model remote:ORG/NAME --trust-remote-code")
    base, _, query = checkpoint.partition("?")
    opts: dict = {}
    try:
        pairs = query_pairs(query)  # the one reader of spec options: a key twice or without '=' is refused
    except QueryProblem as exc:
        raise ModelError(f"remote: {exc} in {checkpoint!r}", "write remote:CHECKPOINT?key=value&key=value") from None
    for key, value in pairs:
        if key not in OPTIONS:
            raise ModelError(f"remote: unknown option {key!r} in {checkpoint!r}", f"use {', '.join(OPTIONS)}")
        try:
            opts[key] = OPTIONS[key](unquote(value))
        except ValueError:
            raise ModelError(f"remote: option {key}={value!r} is not {_TYPE_NAMES[OPTIONS[key]]}",
                             f"e.g. remote:{base}?max_length=248") from None
    if "api" in opts and opts["api"] not in APIS:
        raise ModelError(f"remote: api={opts['api']!r} is not one of {', '.join(APIS)}",
                         "use api=features or api=encode")
    if "auto" in opts and not (opts["auto"].startswith("AutoModel") and opts["auto"].isidentifier()):
        raise ModelError(f"remote: auto={opts['auto']!r} is not a transformers AutoModel class",
                         "e.g. auto=AutoModelForCausalLM (as the model card loads it)")
    if "text_kw" in opts and ":" not in opts["text_kw"]:
        raise ModelError(f"remote: text_kw={opts['text_kw']!r} is not NAME:VALUE", "e.g. text_kw=walk_type:long")
    if "max_length" in opts and not 1 <= opts["max_length"] <= 100_000:
        raise ModelError(f"remote: max_length={opts['max_length']} is out of range", "give 1 to 100000 tokens")
    return base, opts


def code_files(folder: Path) -> dict:
    """The Python files of a checkpoint folder that ``auto_map`` can load, with their SHA-256."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.py"))}


def _auto_map(folder: Path) -> dict:
    try:
        return dict(json.loads((folder / "config.json").read_text(encoding="utf-8")).get("auto_map") or {})
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def _references(auto_map: dict) -> list[str]:
    """Every class reference of an ``auto_map`` (a tokenizer's entry is a [slow, fast] pair)."""
    out = []
    for value in auto_map.values():
        for ref in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(ref, str) and ref:
                out.append(ref)
    return out


def _hub_snapshot(repo: str, module_file: str, revision: str | None = None) -> tuple[str | None, Path | None]:
    """(commit, snapshot folder) of the locally cached ``module_file`` of Hub repository ``repo`` at
    ``revision`` (huggingface_hub resolves a branch through the cache's refs), or (None, None)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        path = try_to_load_from_cache(repo, module_file, revision=revision)
    except Exception:
        return None, None
    if not isinstance(path, str):
        return None, None
    parts = Path(path).parts
    if len(parts) < 3 or parts[-3] != "snapshots":
        return None, None
    return parts[-2], Path(path).parent


def code_sources(auto_map: dict, own: str | None = None) -> list[dict]:
    """The code ``auto_map`` takes from outside the checkpoint (``WHERE--module.Class``), pinned.

    One entry per repository or folder, sorted: ``{"folder": WHERE, "commit": "sha256:...", "files": {...}}``
    for a local folder (the commit is a content hash of its Python files), ``{"repo": WHERE, "commit": ...,
    "files": {...}}`` for a Hub repository (the commit of its cached snapshot; None when it is not cached).
    ``files``: every Python file of the folder or snapshot with its sha256; ``modules``: the files auto_map
    names. Code in the checkpoint itself (no ``--``, or ``own--``) is not listed: the checkpoint's hash covers it."""
    found: dict[str, dict] = {}
    for ref in _references(auto_map):
        if "--" not in ref:
            continue
        where, _, cls = ref.partition("--")  # transformers splits the reference at "--" the same way
        if where == own:
            continue
        module = cls.split(".")[0] + ".py"
        if where in found:
            found[where]["modules"] = sorted({*found[where]["modules"], module})
            continue
        folder = Path(where).expanduser()
        if folder.is_dir():  # transformers takes a local folder first (os.path.isdir), then the Hub
            files = code_files(folder)
            found[where] = {"folder": where, "commit": "sha256:" + sha256_json(files), "files": files}
        else:
            commit, snapshot = _hub_snapshot(where, module)
            found[where] = {"repo": where, "commit": commit,
                            "files": code_files(snapshot) if snapshot is not None else {}}
        found[where]["modules"] = [module]
    return [found[k] for k in sorted(found)]


def _code_where(checkpoint: str) -> str:
    """Which code a checkpoint runs, for the refusal: its own files and those of every source auto_map names."""
    local = Path(checkpoint).expanduser()
    if not local.is_dir():  # a Hub checkpoint: its cached snapshot, when there is one (nothing is downloaded)
        local = _hub_snapshot(checkpoint, "config.json")[1] or local
        if not local.is_dir():
            return ""
    parts = []
    own = sorted(code_files(local))
    if own:
        parts.append(", ".join(own))
    for src in code_sources(_auto_map(local), checkpoint):
        names = sorted(src["files"]) or src["modules"]
        kind = "in folder" if "folder" in src else "from the Hub repository"
        parts.append(f"{', '.join(names)} {kind} {src.get('folder') or src.get('repo')}")
    return f" ({'; '.join(parts)})" if parts else ""


class RemoteCodeEncoder(ModelAdapter):
    name = "remote"

    def __init__(self, checkpoint: str | None = None, *, device: str = "cpu", precision: str = "fp32",
                 revision: str | None = None, trust_remote_code: bool = False, **_):
        base, self.options = split_options(checkpoint)
        if not trust_remote_code:
            raise refusal(base)
        import transformers

        self.checkpoint, self.device, self.precision = base, device, precision
        local = Path(base).expanduser()
        source = str(local) if local.exists() else base
        kw = dict(revision=revision, trust_remote_code=True)
        try:
            self.config = transformers.AutoConfig.from_pretrained(source, **kw)
            model = _load_model(transformers, self.options.get("auto", "AutoModel"), source, self.config, kw)
        except VlbenchError:
            raise
        except Exception as exc:
            raise _load_error("remote", base, exc) from exc
        self.model = model.eval().to(device=device, dtype=torch_dtype(precision))
        self.api = self.options.get("api") or ("features" if hasattr(model, "get_text_features") else "encode")
        needs = (("get_text_features", "get_image_features") if self.api == "features"
                 else ("encode_text", "encode_image"))
        if not all(callable(getattr(model, m, None)) for m in needs):
            raise ModelError(f"remote: {base!r} ({type(model).__name__}) has no {' / '.join(needs)}",
                             "use api=encode or api=features, whichever methods the model card documents")
        self.tokenizer: Any = None
        self.image_processor: Any = None
        if self.api == "features":
            try:
                self.tokenizer = transformers.AutoTokenizer.from_pretrained(source, **kw)
                self.image_processor = transformers.AutoImageProcessor.from_pretrained(source, **kw)
            except Exception as exc:
                raise _load_error("remote", base, exc) from exc
        self.max_length = self.options.get("max_length") or self._context_length()
        self._local = _dir_fingerprint(local) if local.is_dir() else None
        self._code = code_files(local) if local.is_dir() else self._cached_code(model)
        self._sources = code_sources(_auto_map(local) if local.is_dir()
                                     else dict(getattr(self.config, "auto_map", None) or {}), base)
        self.requested_revision = revision
        self.revision = getattr(self.config, "_commit_hash", None) or revision

    def _context_length(self) -> int:
        text_cfg = getattr(self.config, "text_config", None) or self.config
        found = [getattr(text_cfg, "max_position_embeddings", None),
                 getattr(self.tokenizer, "model_max_length", None) if self.tokenizer is not None else None]
        limits = [x for x in found if isinstance(x, int) and 0 < x < 100_000]
        return min(limits) if limits else 77

    @staticmethod
    def _cached_code(model) -> dict:
        """Hub checkpoints: transformers copies the code into its modules cache; hash the model's module file."""
        try:
            path = Path(inspect.getfile(type(model)))
        except (TypeError, OSError):
            return {}
        return code_files(path.parent)

    def identity(self) -> dict:
        pre = None
        if self.image_processor is not None:
            ip = self.image_processor
            pre = json.loads(json.dumps({k: getattr(ip, k, None) for k in (
                "size", "crop_size", "do_center_crop", "resample", "image_mean", "image_std")}, default=str))
        return {"adapter": "vlbench.remote", "model_class": type(self.model).__name__, "checkpoint": self.checkpoint,
                "revision": self.revision, "requested_revision": self.requested_revision, "local": self._local,
                "trust_remote_code": True, "code": self._code, "api": self.api, "options": self.options,
                "max_text_tokens": self.max_length, "preprocessing": pre or "the model's own encode_image",
                "precision": self.precision, **({"code_sources": self._sources} if self._sources else {})}

    def _texts(self, texts) -> list[str]:
        prefix, lower = self.options.get("text_prefix", ""), bool(self.options.get("lowercase", 0))
        return [prefix + (t.lower() if lower else t) for t in texts]

    def text_context_length(self) -> int:
        return int(self.max_length)

    def cut_texts(self, texts, budgets):
        if self.tokenizer is None:  # api=encode: the model tokenizes inside encode_text, out of our sight
            return super().cut_texts(texts, budgets)
        lower = bool(self.options.get("lowercase", 0))
        return cut_to_budget([t.lower() if lower else t for t in texts], budgets, *hf_cutter(self.tokenizer))

    def preprocess(self, image):
        if self.api == "encode":
            return image.convert("RGB")
        return self.image_processor(images=image, return_tensors="pt")["pixel_values"][0]

    def collate(self, items):
        if self.api == "encode":
            return list(items)
        import torch

        return torch.stack(list(items))

    def text_keys(self, texts):
        if self.tokenizer is None:
            return self._texts(texts)
        ids = self.tokenizer(self._texts(texts), truncation=True, max_length=self.max_length)["input_ids"]
        return [" ".join(map(str, x)) for x in ids]

    def text_lengths(self, texts):
        if self.tokenizer is None:
            return [len(t.split()) for t in self._texts(texts)]
        return [len(x) for x in self.tokenizer(self._texts(texts), truncation=True,
                                               max_length=self.max_length)["input_ids"]]

    def encode_images(self, batch):
        import torch

        with torch.inference_mode():
            if self.api == "encode":
                return _tensor(self.model.encode_image(batch))
            pix = batch.to(self.device, dtype=torch_dtype(self.precision))
            return _as_features(self.model.get_image_features(pixel_values=pix))

    def encode_texts(self, texts):
        import torch

        texts = self._texts(texts)
        with torch.inference_mode():
            if self.api == "encode":
                kw = {"task": self.options["task"]} if "task" in self.options else {}
                return _tensor(self.model.encode_text(texts, **kw))
            tok = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
            tok = {k: v.to(self.device) for k, v in tok.items() if k in ("input_ids", "attention_mask")}
            return _as_features(self.model.get_text_features(**tok, **text_kwargs(self.options)))


def _load_model(transformers, auto: str, source: str, config, kw: dict):
    """The checkpoint's model, its class taken from the code ``auto_map`` names as the files are now.

    transformers' Auto classes remember a remote-code class once loaded (``register``) and hand that class out
    again for the same configuration class, so in one process an edited modeling file would not run while the
    identity records its new hash. The class is fetched here as the Auto class fetches it
    (``get_class_from_dynamic_module``: a changed file is a new module) and loaded directly."""
    auto_cls = getattr(transformers, auto)
    ref = dict(getattr(config, "auto_map", None) or {}).get(auto)
    if not isinstance(ref, str):  # no code for this Auto class: transformers' own path
        return auto_cls.from_pretrained(source, **kw)
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    model_class = get_class_from_dynamic_module(ref, source, revision=kw.get("revision"))
    try:  # a causal-LM class gets generate() as the Auto class gives it (FG-CLIP 2 loads that way)
        from transformers.models.auto.auto_factory import add_generation_mixin_to_remote_model

        model_class = add_generation_mixin_to_remote_model(model_class)
    except ImportError:  # pragma: no cover - older transformers
        pass
    return model_class.from_pretrained(source, config=config, **kw)


def text_kwargs(options: dict) -> dict:
    """``text_kw=NAME:VALUE``: one keyword the model's get_text_features takes (FG-CLIP 2: walk_type:long);
    true/false become booleans and integers integers."""
    if "text_kw" not in options:
        return {}
    name, _, raw = options["text_kw"].partition(":")
    value: object = {"true": True, "false": False}.get(raw.lower(), raw)
    if isinstance(value, str) and value.lstrip("-").isdigit():
        value = int(value)
    return {name: value}


def _tensor(x):
    import numpy as np
    import torch

    if isinstance(x, torch.Tensor):
        return x.float()
    return torch.as_tensor(np.asarray(x, dtype=np.float32))


def refusal(checkpoint: str) -> ModelError:
    where = _code_where(checkpoint)
    return ModelError(f"remote:{checkpoint} runs Python code shipped with the checkpoint{where}; vlbench does not run "
                      "it unless asked", "read that code, then add --trust-remote-code (it is recorded in the run)")


def load_remote(checkpoint=None, *, device="cpu", precision="fp32", revision=None, trust_remote_code=False, **_):
    return RemoteCodeEncoder(checkpoint, device=device, precision=precision, revision=revision,
                             trust_remote_code=trust_remote_code)


def fingerprint(checkpoint: str, *, revision: str | None = None, trust_remote_code: bool = False, **_) -> dict | None:
    if not trust_remote_code:
        return None  # loading refuses: never answer from the cache for a run that did not allow the code
    base, opts = split_options(checkpoint)
    local = local_fingerprint(base)
    if local is not None:
        found: dict | None = {**local, "options": opts}
        auto_map = _auto_map(Path(base).expanduser())
    else:
        commit = hub_commit(base, revision)
        found = {"commit": commit, "options": opts} if commit else None
        snapshot = _hub_snapshot(base, "config.json", revision)[1]
        auto_map = _auto_map(snapshot) if snapshot is not None else {}
    sources = code_sources(auto_map, base)
    if found is None or any(s["commit"] is None for s in sources):
        return None  # code not pinned without loading: load (transformers fetches it) and take the identity then
    return {**found, "code_sources": sources} if sources else found


def preflight(checkpoint: str, *, trust_remote_code: bool = False, **_) -> list:
    try:
        base, _opts = split_options(checkpoint)
    except VlbenchError as exc:
        return [exc]
    if not trust_remote_code:
        return [refusal(base)]
    local = Path(base).expanduser()
    if local.exists() or base.startswith((".", "/", "~")):
        if not (local / "config.json").is_file():
            return [ModelError(f"local folder {str(local)!r} has no config.json",
                               "give the folder of a checkpoint with its code files (config.json with auto_map)")]
        if not _auto_map(local):
            return [ModelError(f"{str(local)!r} ships no code (its config.json has no auto_map)",
                               "load it with its own family (clip:, siglip:, ...) instead of remote:")]
        return []
    p = hub_problem(base, f"--model remote:/path/to/{base.split('/')[-1]} --trust-remote-code")
    return [p] if p else []
