"""A model family as one record: its loader, default checkpoint, hooks and static metadata.

Everything vlbench knows about a family without loading it lives in its :class:`ModelFamily`, registered
in ``vlbench.registry.models`` under its name:

* ``loader``: ``loader(checkpoint, device=..., precision=..., trust_remote_code=..., [revision=...])``
  returns a :class:`~vlbench.models.adapter.ModelAdapter`;
* ``default_checkpoint``: what ``--model NAME`` alone means; the loader and both hooks receive
  ``checkpoint or default_checkpoint``;
* ``fingerprint(checkpoint, family=..., revision=..., precision=..., trust_remote_code=...)``: a JSON-able
  dict of whatever decides the model's identity beyond the spec, precision, flags and the plug-in's
  version (e.g. :func:`~vlbench.models.adapter.local_fingerprint` of a folder, a hub commit), or None
  when that cannot be told without loading. With it, a run whose vectors are all cached never loads
  the model (models/lazy.py);
* ``preflight(checkpoint, family=...)``: a list of :class:`~vlbench.errors.VlbenchError` (what is
  missing, with the fix as hint), checked before a run does any work (files only: nothing heavy);
* ``embed_dim``, ``parameters``, ``licence``: facts about the default checkpoint that ``vlbench ls
  models`` shows without loading anything.

The loader and the hooks are functions or lazy ``"module:attr"`` strings; hooks are called with keyword
arguments after the checkpoint (accept ``**kwargs``). A plug-in that registers a plain loader function is
read as a record with that loader and no hooks. The built-ins' hooks live beside their adapters (hf.py,
openclip.py); this module holds only records, so nothing here imports an adapter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..registry import models as MODELS
from ..registry import resolve

__all__ = ["ModelFamily", "model_family", "facts_text", "BUILTIN", "OPENCLIP_DEFAULT"]


@dataclass(frozen=True)
class ModelFamily:
    name: str
    loader: Callable | str
    default_checkpoint: str | None = None
    description: str = ""
    fingerprint: Callable[..., dict | None] | str | None = None
    preflight: Callable[..., list] | str | None = None
    embed_dim: int | None = None
    parameters: int | None = None
    licence: str | None = None
    hub_checkpoints: bool = False  # CHECKPOINT may be a Hugging Face hub id (used for did-you-mean hints)

    def load_fn(self) -> Callable:
        """The loader itself (a lazy ``"module:attr"`` is imported now)."""
        return resolve(self.loader) if isinstance(self.loader, str) else self.loader

    def hook(self, which: str) -> Callable | None:
        """The ``"fingerprint"`` or ``"preflight"`` hook as a function, or None when the family has none."""
        fn = getattr(self, which)
        return resolve(fn) if isinstance(fn, str) else fn

    def describe(self) -> str:
        default = f"default {self.default_checkpoint}" if self.default_checkpoint else ""
        return "; ".join(x for x in (self.description, default) if x)

    def metadata(self) -> dict[str, Any]:
        """The static facts given (embedding size, parameters, licence), None ones left out."""
        facts = {"embed_dim": self.embed_dim, "parameters": self.parameters, "licence": self.licence}
        return {k: v for k, v in facts.items() if v is not None}


def facts_text(family: ModelFamily) -> str:
    """The static facts as ``vlbench ls models`` prints them ("" when none are given)."""
    meta = family.metadata()
    parts = [f"{meta['embed_dim']}-d embeddings"] if "embed_dim" in meta else []
    if "parameters" in meta:
        parts.append(f"{meta['parameters'] / 1e6:.1f}M parameters")
    if "licence" in meta:
        parts.append(f"licence {meta['licence']}")
    return f"[{', '.join(parts)}]" if parts else ""


def model_family(name: str) -> ModelFamily:
    """The record registered under ``name`` (unknown names get a did-you-mean); a plain loader
    function, as registered by plug-ins written against the loader API, becomes a record without hooks."""
    obj = MODELS.get(name)
    if isinstance(obj, ModelFamily):
        return obj if obj.name == name else replace(obj, name=name)
    return ModelFamily(name, loader=obj)


def _hf(name: str, default: str, description: str, embed_dim: int, parameters: int | None = None,
        licence: str | None = None) -> ModelFamily:
    return ModelFamily(name, f"vlbench.models.hf:load_{name.replace('-', '_')}", default, description,
                       fingerprint="vlbench.models.hf:fingerprint", preflight="vlbench.models.hf:preflight",
                       embed_dim=embed_dim, parameters=parameters, licence=licence, hub_checkpoints=True)


OPENCLIP_DEFAULT = "ViT-B-32/laion2b_s34b_b79k"

# static facts of each default checkpoint (None: not stated). Embedding sizes are the configs'
# projection_dim; parameters were counted on the architecture built from the library's default config
# (transformers documents it as the default checkpoint's; AltCLIP's default config is not, so no count);
# licence only where the model card states one.
BUILTIN = {f.name: f for f in (
    _hf("clip", "openai/clip-vit-base-patch32", "OpenAI CLIP (transformers)", 512, parameters=151_277_313),
    _hf("align", "kakaobrain/align-base", "ALIGN (transformers)", 640, parameters=172_117_841),
    _hf("altclip", "BAAI/AltCLIP", "AltCLIP (transformers)", 768),
    _hf("groupvit", "nvidia/groupvit-gcc-yfcc", "GroupViT (transformers)", 256, parameters=55_726_609),
    # MetaCLIP 2 worldwide: multilingual (XLM-V tokenizer, 77 tokens); Chinese-CLIP: BERT tokenizer, 52 tokens;
    # BLIP: the contrastive (ITC) head of a BlipForImageTextRetrieval checkpoint, the first stage of --rerank blip-itm
    _hf("metaclip2", "facebook/metaclip-2-worldwide-huge-quickgelu",
        "MetaCLIP 2 worldwide (transformers; multilingual, 77 tokens)", 1024),
    _hf("chinese-clip", "OFA-Sys/chinese-clip-vit-base-patch16",
        "Chinese-CLIP (transformers; BERT tokenizer, 52 tokens)", 512),
    _hf("blip", "Salesforce/blip-itm-base-coco",
        "BLIP's contrastive head (transformers BlipForImageTextRetrieval, use_itm_head=False)", 256),
    ModelFamily("openclip", "vlbench.models.openclip:load_openclip", OPENCLIP_DEFAULT,
                "any open_clip model, ARCH/TAG", fingerprint="vlbench.models.openclip:fingerprint",
                preflight="vlbench.models.openclip:preflight",
                embed_dim=512, parameters=151_277_313, licence="MIT"),
    # SigLIP / SigLIP 2 (models/siglip.py): CHECKPOINT[?lowercase=0|1&padding=max_length|longest&attention_mask=0|1]
    ModelFamily("siglip", "vlbench.models.siglip:load_siglip", "google/siglip-base-patch16-224",
                "SigLIP (transformers; text padded to 64, lower-cased; options CKPT?lowercase=0)",
                fingerprint="vlbench.models.siglip:fingerprint", preflight="vlbench.models.siglip:preflight",
                embed_dim=768, licence="Apache-2.0", hub_checkpoints=True),
    ModelFamily("siglip2", "vlbench.models.siglip:load_siglip2", "google/siglip2-base-patch16-224",
                "SigLIP 2 (transformers; text padded to 64, lower-cased; options CKPT?lowercase=0)",
                fingerprint="vlbench.models.siglip:fingerprint", preflight="vlbench.models.siglip:preflight",
                embed_dim=768, licence="Apache-2.0", hub_checkpoints=True),
    # instruction-conditioned MLLM embedders on Qwen2-VL (models/mllm/): CKPT?text_instruction=...&pooling=last|mean
    # &min_pixels=N&max_pixels=N; 1536-d: the hidden size of the 2B checkpoints (Qwen2-VL-2B)
    ModelFamily("vlm2vec", "vlbench.models.mllm.encoder:load_vlm2vec", "TIGER-Lab/VLM2Vec-Qwen2VL-2B",
                "VLM2Vec on Qwen2-VL (instructions, last-token pooling; a merged save_pretrained folder)",
                fingerprint="vlbench.models.mllm.encoder:fingerprint",
                preflight="vlbench.models.mllm.encoder:preflight", embed_dim=1536, hub_checkpoints=True),
    ModelFamily("gme", "vlbench.models.mllm.encoder:load_gme", "Alibaba-NLP/gme-Qwen2-VL-2B-Instruct",
                "GME on Qwen2-VL (instructions in its chat markup, last-token pooling)",
                fingerprint="vlbench.models.mllm.encoder:fingerprint",
                preflight="vlbench.models.mllm.encoder:preflight", embed_dim=1536, hub_checkpoints=True),
    # Hub models that ship their own code (models/remote.py): remote:CHECKPOINT[?max_length=N&text_prefix=...]
    ModelFamily("remote", "vlbench.models.remote:load_remote", None,
                "a checkpoint with its own code (long-text models: jina-clip-v2, FG-CLIP 2, LLM2CLIP); needs "
                "--trust-remote-code; options CKPT?max_length=N&text_prefix=...",
                fingerprint="vlbench.models.remote:fingerprint", preflight="vlbench.models.remote:preflight",
                hub_checkpoints=True),
    # sentence-transformers image-text models (models/st.py); clip-ViT-B-32 wraps openai/clip-vit-base-patch32
    ModelFamily("st", "vlbench.models.st:load_st", "clip-ViT-B-32",
                "sentence-transformers image-text model, NAME or folder", fingerprint="vlbench.models.st:fingerprint",
                preflight="vlbench.models.st:preflight", embed_dim=512, parameters=151_277_313,
                hub_checkpoints=True),
    # multi-vector late interaction (models/multivector): token vectors per item, scored by MaxSim
    *(ModelFamily(name, f"vlbench.models.multivector.colmodels:load_{name}", default, description,
                  fingerprint="vlbench.models.hf:fingerprint", preflight="vlbench.models.hf:preflight",
                  embed_dim=128, licence=licence, hub_checkpoints=True)
      for name, default, description, licence in (
          ("colqwen2", "vidore/colqwen2-v1.0-hf", "ColQwen2 multi-vector retriever (transformers; MaxSim over token "
           "vectors)", None),
          ("colpali", "vidore/colpali-v1.3-hf", "ColPali multi-vector retriever (transformers; MaxSim over token "
           "vectors)", None))),
)}

for _family in BUILTIN.values():
    MODELS.register(_family.name, _family, description=_family.describe())
