"""The instruction-conditioned embedders on a Qwen2-VL backbone (``vlm2vec``, ``gme``): one adapter, the family's
prompt format (formats.py) deciding the text around each input.

An image or a caption is written into the family's prompt with its instruction, run through the language model of
``Qwen2VLForConditionalGeneration`` (its ``model``: the vision tower fills the image placeholder tokens, no
language-model head), and pooled: the hidden state of the last non-padding token (``pooling=last``, the cards') or
the mean over the non-padding tokens (``pooling=mean``), in float32, L2-normalised. Which token is last is read
from the attention mask, so the vector is the same whichever side the batch is padded on; text-only batches get
their positions from the mask too (left padding would otherwise shift them).

Spec: ``vlm2vec:CHECKPOINT?text_instruction=...&image_instruction=...&pooling=last|mean&padding=right|left
&min_pixels=N&max_pixels=N&max_text_tokens=N`` (CHECKPOINT: a hub id, pinned with ``--revision``, or a local
``save_pretrained`` folder with the processor files); every option is in the model identity.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from ...errors import ModelError
from ..adapter import (
    LazyWeights,
    ModelAdapter,
    _dir_fingerprint,
    checkpoint_source,
    family_loader,
    load_parts,
)
from ..hf import fingerprint as hf_fingerprint
from ..hf import preflight as hf_preflight
from .formats import FORMATS, IMAGE_TOKEN, PromptFormat, split_options

__all__ = ["MllmEmbedder", "load_vlm2vec", "load_gme", "fingerprint", "preflight", "MODEL_CLASSES"]

#: config model_type -> the transformers class whose weights the embedder reads
MODEL_CLASSES = {"qwen2_vl": "Qwen2VLForConditionalGeneration"}
#: the image processor's settings that change pixels (Qwen2-VL resizes to a multiple of patch x merge)
_PIXEL_KEYS = ("size", "patch_size", "merge_size", "temporal_patch_size", "resample",
               "image_mean", "image_std", "rescale_factor", "do_resize", "do_normalize", "do_rescale")


class MllmEmbedder(LazyWeights, ModelAdapter):
    """An instruction-conditioned embedder on Qwen2-VL (module docstring)."""

    def __init__(self, family: str, checkpoint: str | None = None, *, device: str = "cpu", precision: str = "fp32",
                 revision: str | None = None, trust_remote_code: bool = False):
        import transformers  # lazy: heavy; a warm run never builds the adapter

        self.name = family
        self.checkpoint, self.format = split_options(checkpoint, family)
        self.precision, self.device = precision, device
        source = checkpoint_source(self.checkpoint)
        kw = dict(revision=revision, trust_remote_code=trust_remote_code)
        self.config, self.processor = load_parts(family, self.checkpoint, source, kw, transformers.AutoConfig,
                                                 transformers.AutoProcessor)
        model_type = getattr(self.config, "model_type", None)
        if model_type not in MODEL_CLASSES:
            raise ModelError(f"{family}: checkpoint {self.checkpoint!r} is a {model_type!r} model, not Qwen2-VL",
                             "give a Qwen2-VL embedder (e.g. the family's default checkpoint); another backbone goes "
                             "through remote: with --trust-remote-code (docs/models.md, MLLM embedders)")
        self.tokenizer = self.processor.tokenizer
        self.tokenizer.padding_side = self.format.padding
        self.image_processor = self.processor.image_processor
        self._set_pixels(self.format)
        self.image_token_id = int(self.config.image_token_id)
        self.merge = int(getattr(self.image_processor, "merge_size", 2) or 2)
        self._model = None  # loaded on first use: a warm run never needs the weights
        self._load_args = (MODEL_CLASSES[model_type], source, kw)
        self._local = _dir_fingerprint(Path(source)) if Path(source).exists() else None
        self.requested_revision = revision
        self.revision = getattr(self.config, "_commit_hash", None) or revision

    def _set_pixels(self, fmt: PromptFormat) -> None:
        """The image resolution: ``size`` (shortest_edge = min_pixels, longest_edge = max_pixels: the bounds of an
        image's pixel count), the option's value or else the checkpoint's. transformers 5 reads ``size``; the older
        ``min_pixels``/``max_pixels`` attributes would override it, so they are dropped."""
        ip = self.image_processor
        size = ip.size or {}
        old_lo = getattr(ip, "min_pixels", None) or size.get("shortest_edge")
        old_hi = getattr(ip, "max_pixels", None) or size.get("longest_edge")
        lo, hi = fmt.min_pixels or old_lo, fmt.max_pixels or old_hi
        if lo and hi and lo > hi:
            raise ModelError(f"{self.name}: min_pixels={lo} is above max_pixels={hi} (one of them is the checkpoint's)",
                             "give both: ?min_pixels=N&max_pixels=M with N <= M")
        for attr in ("min_pixels", "max_pixels"):
            ip.__dict__.pop(attr, None)
        ip.size = {"shortest_edge": lo, "longest_edge": hi}
        self.pixels = {"min_pixels": lo, "max_pixels": hi}

    def identity(self) -> dict:
        ip = self.image_processor
        pre = {**{k: getattr(ip, k, None) for k in _PIXEL_KEYS}, **self.pixels}
        fmt = asdict(self.format)
        prompts = {k: fmt[k] for k in ("text_template", "image_template", "image_content", "text_instruction",
                                       "image_instruction")}
        text_cfg = getattr(self.config, "text_config", self.config)
        return {
            "adapter": f"vlbench.mllm.{self.name}",
            "model_class": self._load_args[0],
            "checkpoint": self.checkpoint,
            "revision": self.revision,
            "requested_revision": self.requested_revision,
            "local": self._local,
            "preprocessing": json.loads(json.dumps(pre, default=str)),
            "prompts": prompts,
            "pooling": self.format.pooling,
            "normalize": True,
            "padding_side": self.format.padding,
            "max_text_tokens": self.format.max_text_tokens,
            "tokenizer": type(self.tokenizer).__name__,
            "precision": self.precision,
            "embed_dim": int(getattr(text_cfg, "hidden_size", 0) or 0),
        }

    # -- inputs ---------------------------------------------------------------------------------------------

    def preprocess(self, image):
        out = self.image_processor(images=[image], return_tensors="pt")
        return {"pixel_values": out["pixel_values"], "image_grid_thw": out["image_grid_thw"][0]}

    def _cut(self, texts) -> list[str]:
        """Each caption cut to ``max_text_tokens`` of its own tokens (before the prompt is written around it, so
        the template's end is never cut)."""
        limit = self.format.max_text_tokens
        ids = self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return [t if len(i) <= limit else self.tokenizer.decode(i[:limit]) for t, i in zip(texts, ids)]

    def text_prompts(self, texts) -> list[str]:
        """The captions as the model reads them: cut, then written into the family's text prompt."""
        return [self.format.text_prompt(t, self.format.text_instruction) for t in self._cut(texts)]

    def text_keys(self, texts):
        ids = self.tokenizer(self.text_prompts(texts))["input_ids"]
        return [" ".join(map(str, x)) for x in ids]

    def text_lengths(self, texts):
        return [len(x) for x in self.tokenizer(self.text_prompts(texts))["input_ids"]]

    def text_context_length(self) -> int:
        return self.format.max_text_tokens

    # -- forward --------------------------------------------------------------------------------------------

    def encode_texts(self, texts):
        import torch

        tok = self.tokenizer(self.text_prompts(texts), padding=True, return_tensors="pt")
        mask = tok["attention_mask"].to(self.device)
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)  # each text from 0, whichever side is padded
        with torch.inference_mode():
            out = self.model.model(input_ids=tok["input_ids"].to(self.device), attention_mask=mask,
                                   position_ids=positions, use_cache=False)
        return self._pool(out.last_hidden_state, mask)

    def encode_images(self, batch):
        import torch

        prompt = self.format.image_prompt(self.format.image_instruction)
        grids = torch.stack([item["image_grid_thw"] for item in batch])
        counts = (grids.prod(-1) // (self.merge ** 2)).tolist()
        texts = [prompt.replace(IMAGE_TOKEN, IMAGE_TOKEN * int(n)) for n in counts]
        tok = self.tokenizer(texts, padding=True, return_tensors="pt")
        ids = tok["input_ids"].to(self.device)
        mask = tok["attention_mask"].to(self.device)
        pixels = torch.cat([item["pixel_values"] for item in batch]).to(self.device, dtype=self.model.dtype)
        with torch.inference_mode():
            out = self.model.model(input_ids=ids, attention_mask=mask, pixel_values=pixels,
                                   image_grid_thw=grids.to(self.device),
                                   mm_token_type_ids=(ids == self.image_token_id).int(), use_cache=False)
        return self._pool(out.last_hidden_state, mask)

    def _pool(self, hidden, mask):
        import torch

        hidden = hidden.float()
        if self.format.pooling == "mean":
            m = mask.to(hidden.dtype).unsqueeze(-1)
            vec = (hidden * m).sum(1) / m.sum(1).clamp(min=1)
        else:  # the last token the mask keeps, on either padding side
            steps = torch.arange(mask.shape[1], device=mask.device)
            last = (mask.long() * (steps + 1)).argmax(dim=1)
            vec = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
        return torch.nn.functional.normalize(vec, dim=-1)


load_vlm2vec = family_loader(MllmEmbedder, "vlm2vec")
load_gme = family_loader(MllmEmbedder, "gme")


def fingerprint(checkpoint: str, *, family: str = "gme", revision: str | None = None, **_) -> dict | None:
    """The transformers families' fingerprint of the checkpoint, with the prompt format and options it runs with."""
    base, fmt = split_options(checkpoint, family)
    found = hf_fingerprint(base, revision=revision)
    return None if found is None else dict(found, mllm_format=asdict(fmt))


def preflight(checkpoint: str, *, family: str = "gme", **_) -> list:
    """The options read, then the checkpoint's files; a LoRA adapter folder (VLM2Vec's hub checkpoints are LoRA
    adapters on Qwen2-VL-Instruct) is refused with how to merge it."""
    try:
        base, _fmt = split_options(checkpoint, family)
    except ModelError as exc:
        return [exc]
    local = Path(base).expanduser()
    if (local / "adapter_config.json").is_file() and not (local / "config.json").is_file():
        return [ModelError(f"{family}: {base!r} is a LoRA adapter, not a full model",
                           "merge it into its base model first: peft.PeftModel.from_pretrained("
                           "Qwen2VLForConditionalGeneration.from_pretrained(BASE), FOLDER).merge_and_unload()"
                           ".save_pretrained(OUT), save BASE's processor into OUT too, and give --model "
                           f"{family}:OUT (docs/models.md, MLLM embedders)")]
    return hf_preflight(base, family=family)


assert set(FORMATS) == {"vlm2vec", "gme"}  # the loaders above, one per format
