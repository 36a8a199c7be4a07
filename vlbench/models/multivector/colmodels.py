"""ColQwen2 / ColPali (transformers ``ColQwen2ForRetrieval`` / ``ColPaliForRetrieval`` with their processors) as
multi-vector adapters: per item, the model's token vectors, scored by MaxSim.

As the model cards show: images go through ``processor.process_images`` (ColQwen2 prepends its visual prompt;
the resolution is the image processor's ``min_pixels`` / ``max_pixels``), captions through
``processor.process_queries`` (the query prefix and the query augmentation tokens appended), and the model's
forward gives ``embeddings`` (batch x tokens x dim, L2-normalised per token, zero at padding). vlbench keeps each
item's tokens under its attention mask (no padding rows), as float32; nothing is renormalised or pooled.
The identity holds the checkpoint (its revision or the local folder's content digests), the model class, the
precision, the token vector size, the image processor's settings (resolution included) and the query format.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ...errors import ModelError
from ..adapter import (
    LazyWeights,
    ModelAdapter,
    _dir_fingerprint,
    check_vocabulary,
    checkpoint_source,
    family_loader,
    load_parts,
    torch_dtype,
)

__all__ = ["MultiVectorModel", "load_colqwen2", "load_colpali", "FAMILIES"]

#: family -> (model class, processor class, default checkpoint)
FAMILIES = {
    "colqwen2": ("ColQwen2ForRetrieval", "ColQwen2Processor", "vidore/colqwen2-v1.0-hf"),
    "colpali": ("ColPaliForRetrieval", "ColPaliProcessor", "vidore/colpali-v1.3-hf"),
}
#: image processor settings that are not about pixels (left out of the identity)
_NOT_PIXELS = ("processor_class", "image_processor_type", "_processor_class")


class MultiVectorModel(LazyWeights, ModelAdapter):
    """A transformers ColQwen2 / ColPali checkpoint: token vectors per image and per caption."""

    multivector = True

    def __init__(self, family: str, checkpoint: str | None = None, *, device: str = "cpu", precision: str = "fp32",
                 revision: str | None = None, trust_remote_code: bool = False):
        import transformers  # lazy: heavy, only when the model is loaded

        self.name = family
        model_class, processor_class, default = FAMILIES[family]
        self.checkpoint: str = checkpoint or default
        self.precision, self.device = precision, device
        local = Path(self.checkpoint).expanduser()
        source = checkpoint_source(self.checkpoint)
        kw = dict(revision=revision, trust_remote_code=trust_remote_code)
        self.processor, self.config = load_parts(family, self.checkpoint, source, kw,
                                                 getattr(transformers, processor_class), transformers.AutoConfig)
        check_vocabulary(self.processor.tokenizer, self.checkpoint)
        self._model = None
        self._load_args = (model_class, source, kw)
        self._local = _dir_fingerprint(local) if local.exists() else None
        self.requested_revision = revision
        self.revision = getattr(self.config, "_commit_hash", None) or revision

    def identity(self) -> dict:
        ip = self.processor.image_processor
        pre = {k: v for k, v in ip.to_dict().items() if k not in _NOT_PIXELS}
        return {
            "adapter": f"vlbench.multivector.{self.name}",
            "model_class": self._load_args[0],
            "checkpoint": self.checkpoint,
            "revision": self.revision,
            "requested_revision": self.requested_revision,
            "local": self._local,
            "preprocessing": json.loads(json.dumps(pre, default=str, sort_keys=True)),
            "query_format": {"prefix": getattr(self.processor, "query_prefix", None),
                             "augmentation": getattr(self.processor, "query_augmentation_token", None),
                             "visual_prompt": getattr(self.processor, "visual_prompt_prefix", None)},
            "tokenizer": type(self.processor.tokenizer).__name__,
            "precision": self.precision,
            "embed_dim": int(getattr(self.config, "embedding_dim", 0) or 0),
            "vectors": "multi (token vectors, MaxSim)",
        }

    def image_resolution(self) -> dict:
        """The image processor's resolution settings (what decides the tokens per image)."""
        ip = self.processor.image_processor
        out = {k: getattr(ip, k) for k in ("min_pixels", "max_pixels", "patch_size", "merge_size")
               if getattr(ip, k, None) is not None}
        size = getattr(ip, "size", None) or {}

        def get(k):
            return size.get(k) if isinstance(size, dict) else getattr(size, k, None)

        if "merge_size" in out and "max_pixels" not in out and get("longest_edge"):  # Qwen2-VL: pixel counts
            out.update(min_pixels=get("shortest_edge"), max_pixels=get("longest_edge"))
        if get("height") and get("width"):  # a fixed input size (ColPali)
            out.update(height=get("height"), width=get("width"))
        return out

    def text_keys(self, texts) -> list[str]:
        """The token ids the model reads for each caption (query prefix and augmentation tokens included)."""
        return [" ".join(map(str, ids)) for ids in self._query_ids(texts)]

    def text_lengths(self, texts) -> list[int]:
        return [len(ids) for ids in self._query_ids(texts)]

    def _query_ids(self, texts) -> list[list[int]]:
        out = []
        for t in texts:  # one at a time: no padding in the ids
            out.append(self.processor.process_queries([t])["input_ids"][0].tolist())
        return out

    def _tokens(self, batch) -> list[np.ndarray]:
        import torch  # lazy: with the model

        dtype = torch_dtype(self.precision)
        batch = {k: (v.to(self.device, dtype=dtype) if torch.is_floating_point(v) else v.to(self.device))
                 for k, v in batch.items()}
        with torch.inference_mode():
            emb = self.model(**batch).embeddings
        mask = batch["attention_mask"].bool()
        return [emb[i][mask[i]].float().cpu().numpy() for i in range(len(emb))]

    def encode_image_tokens(self, images: list) -> list[np.ndarray]:
        """PIL images (RGB) -> each one's token vectors (tokens x dim, float32)."""
        return self._tokens(self.processor.process_images(list(images)))

    def encode_text_tokens(self, texts: list[str]) -> list[np.ndarray]:
        """Captions -> each one's token vectors (tokens x dim, float32)."""
        return self._tokens(self.processor.process_queries(list(texts)))

    def encode_images(self, batch):
        raise ModelError(f"{self.name} is a multi-vector model: it gives token vectors per item, not one vector",
                         "use it with 'vlbench run' (MaxSim scoring); tasks and relevance models need a dual "
                         "encoder (clip, siglip, ...)")

    encode_texts = encode_images


load_colqwen2 = family_loader(MultiVectorModel, "colqwen2")
load_colpali = family_loader(MultiVectorModel, "colpali")
