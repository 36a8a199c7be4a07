"""Models held in memory as vlbench adapters: an open_clip model with its preprocess and tokenizer, a
transformers dual encoder with its processor, or any :class:`~vlbench.models.adapter.ModelAdapter` as it is.

Each is the built-in adapter of its family with the loading step replaced by the objects given, so encoding,
text keys and truncation are the code a saved checkpoint meets in ``vlbench run`` (numbers equal). Nothing is
copied or written to disk: the adapter reads the model's current weights at each call. :class:`Held` is the
session's model (the role the lazy model plays in a run): the adapter already in memory.
"""

from __future__ import annotations

from ..errors import ModelError
from ..models.adapter import ModelAdapter
from ..models.hf import HFDualEncoder
from ..models.lazy import LazyModel
from ..models.openclip import OpenCLIPAdapter


def _device_dtype(model) -> tuple[str, str]:
    import torch

    p = next(iter(model.parameters()), None)
    if p is None:
        return "cpu", "fp32"
    precision = {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(p.dtype, "fp32")
    return str(p.device), precision


class InMemoryOpenCLIP(OpenCLIPAdapter):
    """An open_clip model (``create_model_and_transforms``' model, its eval preprocess, ``get_tokenizer``)."""

    def __init__(self, model, preprocess, tokenizer, *, label: str = "openclip:in-memory"):
        if preprocess is None or tokenizer is None:
            raise ModelError("an open_clip model needs its preprocess and tokenizer",
                             "call evaluator(model, preprocess=preprocess_val, "
                             "tokenizer=open_clip.get_tokenizer(ARCH))")
        self.model, self._transform, self.tokenizer = model, preprocess, tokenizer
        self.checkpoint = label
        self.device, self.precision = _device_dtype(model)
        self._local = None
        self.random_weights = False
        self.context_length = getattr(tokenizer, "context_length", 77)


class InMemoryHF(HFDualEncoder):
    """A transformers dual encoder (e.g. ``CLIPModel``) with its processor (or tokenizer and image processor)."""

    def __init__(self, model, processor, *, label: str = "clip:in-memory"):
        tok = getattr(processor, "tokenizer", None)
        ip = getattr(processor, "image_processor", None)
        if tok is None or ip is None:
            raise ModelError("a transformers model needs its processor (with a tokenizer and an image processor)",
                             "call evaluator(model, processor=AutoProcessor.from_pretrained(...))")
        self.name = str(getattr(model.config, "model_type", "clip"))
        self.checkpoint = label
        self.tokenizer, self.image_processor, self.config = tok, ip, model.config
        self.device, self.precision = _device_dtype(model)
        self._model = model
        self._load_args = (type(model).__name__, label, {})
        text_cfg = getattr(self.config, "text_config", None)
        found = [getattr(text_cfg, "max_position_embeddings", None), getattr(tok, "model_max_length", None)]
        limits = [x for x in found if isinstance(x, int) and 0 < x < 100_000]
        self.max_length = min(limits) if limits else 77
        self._local = None
        self.requested_revision = self.revision = None


def as_adapter(model, *, preprocess=None, tokenizer=None, processor=None, label: str | None = None) -> ModelAdapter:
    """The adapter of an in-memory model: a vlbench adapter as it is; an open_clip model (it has
    ``encode_image`` and ``encode_text``) with ``preprocess`` and ``tokenizer``; a transformers model (it has
    ``get_image_features``) with ``processor``."""
    if isinstance(model, ModelAdapter):
        return model
    inner = getattr(model, "module", None)  # DistributedDataParallel: the model it wraps
    if inner is not None and (hasattr(inner, "encode_image") or hasattr(inner, "get_image_features")):
        model = inner
    if hasattr(model, "get_image_features") and hasattr(model, "config"):
        return InMemoryHF(model, processor, label=label or "clip:in-memory")
    if hasattr(model, "encode_image") and hasattr(model, "encode_text"):
        return InMemoryOpenCLIP(model, preprocess, tokenizer, label=label or "openclip:in-memory")
    raise ModelError(f"cannot evaluate a {type(model).__name__}: not an open_clip model, a transformers dual "
                     "encoder or a vlbench adapter", "wrap it in a vlbench.ModelAdapter (docs/plugins.md)")


class Held(LazyModel):
    """The session's model for an adapter already in memory: what a lazy model is once it has loaded (the same
    text keys, shapes and identity), with nothing remembered on disk."""

    def __init__(self, adapter: ModelAdapter, spec: str):  # noqa: D107 -- no loading: the adapter is given
        self.spec, self.name, self.pixels = spec, spec.split(":")[0], "reference"
        self._kw = {"device": str(getattr(adapter, "device", "cpu"))}
        self.device_kind = self._kw["device"].split(":")[0]  # as a loaded model's: part of the identity off the CPU
        self.threads = None  # the forward's CPU threads: the run's default rule (models/lazy.py default_threads)
        self._real = adapter
        self._root = None
        self._resolved = None
        self._fp = None
