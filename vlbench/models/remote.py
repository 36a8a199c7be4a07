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
    except (OSError, ValueError, AttributeError):
        return {}


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
            model = getattr(transformers, self.options.get("auto", "AutoModel")).from_pretrained(source, **kw)
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
                "precision": self.precision}

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
    local = Path(checkpoint).expanduser()
    files = sorted(code_files(local)) if local.is_dir() else []
    where = f" ({', '.join(files)})" if files else ""
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
        return {**local, "options": opts}
    commit = hub_commit(base, revision)
    return {"commit": commit, "options": opts} if commit else None


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
