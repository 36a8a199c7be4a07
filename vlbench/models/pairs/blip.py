"""BLIP and BLIP-2 image-text matching (ITM) heads as pair scorers (transformers ``BlipForImageTextRetrieval``,
``Blip2ForImageTextRetrieval``).

The score of a pair is the ITM head's "match" probability: the softmax over its two logits, taken at index 1, as
the model cards show (``model(**inputs, use_itm_head=True)`` for BLIP, ``use_image_text_matching_head=True`` for
BLIP-2). The forward is split where the model allows: ``encode_images`` runs the vision tower once per image
(BLIP-2's Q-Former reads the text with its queries, so only the vision tower is shared), and ``score_pairs`` runs
the text side against those embeddings, the same computation as the model's own forward (tests check it against
the forward called per pair as the model card shows). The softmax is taken in float32 from the head's logits.
Captions longer than the text tower's positions are truncated to them (the model card's processor call would
fail on them instead).

Checkpoints load as the dual-encoder families do: a local ``save_pretrained`` folder (model and processor) or a
hub id, with ``--revision`` pinned to the resolved commit in the identity.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ModelError, VlbenchError
from ..adapter import PROCESSOR_KEYS, _dir_fingerprint, _load_error, load_eval_model, torch_dtype
from .protocol import PairScorer

__all__ = ["HFPairScorer", "load_blip_itm", "load_blip2_itm", "DEFAULTS"]

#: family -> (transformers class, default checkpoint)
DEFAULTS = {"blip-itm": ("BlipForImageTextRetrieval", "Salesforce/blip-itm-base-coco"),
            "blip2-itm": ("Blip2ForImageTextRetrieval", "Salesforce/blip2-itm-vit-g")}


class HFPairScorer(PairScorer):
    """A transformers ITM model as a pair scorer; ``family`` is ``blip-itm`` or ``blip2-itm``."""

    def __init__(self, family: str, checkpoint: str | None = None, *, device: str = "cpu", precision: str = "fp32",
                 revision: str | None = None, trust_remote_code: bool = False):
        import transformers

        if family not in DEFAULTS:
            raise ModelError(f"unknown ITM family {family!r}", f"use one of {sorted(DEFAULTS)}")
        self.name = family
        self.model_class, default = DEFAULTS[family]
        self.checkpoint: str = checkpoint or default
        self.precision, self.device = precision, device
        local = Path(self.checkpoint).expanduser()
        source = str(local) if local.exists() else self.checkpoint
        kw = dict(revision=revision, trust_remote_code=trust_remote_code)
        try:
            self.processor = transformers.AutoProcessor.from_pretrained(source, **kw)
            self.config = transformers.AutoConfig.from_pretrained(source, **kw)
        except VlbenchError:
            raise
        except Exception as exc:
            raise _load_error(family, self.checkpoint, exc) from exc
        self.tokenizer: Any = getattr(self.processor, "tokenizer", None)
        self.image_processor: Any = getattr(self.processor, "image_processor", None)
        if self.tokenizer is None or self.image_processor is None:
            raise ModelError(f"the processor of {self.checkpoint!r} has no tokenizer or image processor",
                             "save the model's processor (AutoProcessor) beside its weights")
        if len(self.tokenizer) < 10:  # the offline tokenizer trap: an almost empty vocabulary
            raise ModelError(f"the tokenizer of {self.checkpoint!r} loaded with only {len(self.tokenizer)} tokens",
                             "the tokenizer files are missing: re-download the checkpoint")
        text_cfg = getattr(self.config, "qformer_config" if family == "blip2-itm" else "text_config", None)
        found = [getattr(text_cfg, "max_position_embeddings", None), getattr(self.tokenizer, "model_max_length", None)]
        limits = [x for x in found if isinstance(x, int) and 0 < x < 100_000]
        self.max_length = min(limits) if limits else 512
        self._model = None
        self._load_args = (source, kw)
        self._local = _dir_fingerprint(local) if local.exists() else None
        self.requested_revision = revision
        self.revision = getattr(self.config, "_commit_hash", None) or revision

    @property
    def model(self):
        if self._model is None:
            source, kw = self._load_args
            self._model = load_eval_model(self.name, self.checkpoint, self.model_class, source, kw, self.device,
                                          self.precision)
        return self._model

    def identity(self) -> dict:
        ip = self.image_processor
        pre = {k: getattr(ip, k, None) for k in PROCESSOR_KEYS}
        out = {
            "adapter": f"vlbench.pairs.{self.name}",
            "kind": "pair-scorer",
            "model_class": self.model_class,
            "checkpoint": self.checkpoint,
            "revision": self.revision,
            "requested_revision": self.requested_revision,
            "local": self._local,
            "preprocessing": json.loads(json.dumps(pre, default=str)),
            "tokenizer": type(self.tokenizer).__name__,
            "max_text_tokens": self.max_length,
            "precision": self.precision,
            "score": "itm softmax p(match), float32",
        }
        kind = str(self.device).split(":")[0]
        if kind != "cpu":  # scores made on an accelerator agree with the CPU's only within a tolerance: another
            out["device"] = kind  # identity, so never one cache entry (the CPU's identity has no device key)
        return out

    def preprocess(self, image):
        return self.image_processor(images=image, return_tensors="pt")["pixel_values"][0]

    def _tokenize(self, texts):
        tok = self.tokenizer(list(texts), padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt")
        return tok["input_ids"].to(self.device), tok["attention_mask"].to(self.device)

    def text_keys(self, texts):
        ids = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)["input_ids"]
        return [" ".join(map(str, x)) for x in ids]

    def encode_images(self, batch):
        """The vision tower's last hidden state (patch embeddings), one row per image."""
        import torch

        with torch.inference_mode():
            pix = batch.to(self.device, dtype=torch_dtype(self.precision))
            return self.model.vision_model(pixel_values=pix).last_hidden_state

    def score_pairs(self, images, texts):
        import torch

        texts = list(texts)
        if len(images) != len(texts):
            raise VlbenchError(f"score_pairs: {len(images)} image rows for {len(texts)} texts",
                               "pass one image row per text (gather the rows: state[index])")
        if not texts:
            return np.zeros(0, dtype=np.float32)
        ids, mask = self._tokenize(texts)
        with torch.inference_mode():
            img = images.to(self.device)
            logits = self._itm_logits(img, ids, mask)
            return torch.softmax(logits.float(), dim=-1)[:, 1].cpu().numpy().astype(np.float32)

    def _itm_logits(self, image_embeds, ids, mask):
        """The ITM head's two logits per pair, computed as the model's forward does after its vision tower."""
        import torch

        m = self.model
        image_mask = torch.ones(image_embeds.shape[:-1], dtype=torch.long, device=image_embeds.device)
        if self.name == "blip-itm":
            hidden = m.text_encoder(input_ids=ids, attention_mask=mask, encoder_hidden_states=image_embeds,
                                    encoder_attention_mask=image_mask).last_hidden_state
            return m.itm_head(hidden[:, 0, :])
        # BLIP-2: the query tokens and the text read together by the Q-Former; the queries are always attended
        # (the forward prepends ones to the text mask, or, when the processor put image tokens before the text,
        # keeps their ones and drops the tokens: the same mask and the same ids either way)
        queries = m.query_tokens.expand(image_embeds.shape[0], -1, -1)
        n_query = queries.shape[1]
        mask = torch.cat([torch.ones(queries.shape[:-1], dtype=mask.dtype, device=mask.device), mask], dim=1)
        embeds = m.embeddings(input_ids=ids, query_embeds=queries)
        hidden = m.qformer(query_embeds=embeds, query_length=n_query, attention_mask=mask,
                           encoder_hidden_states=image_embeds, encoder_attention_mask=image_mask).last_hidden_state
        hidden = hidden.to(dtype=m.itm_head.weight.dtype)
        return m.itm_head(hidden[:, :n_query, :]).mean(dim=1)


def load_blip_itm(checkpoint=None, *, device="cpu", precision="fp32", revision=None, trust_remote_code=False, **_):
    """BLIP's ITM head (``BlipForImageTextRetrieval``); default checkpoint Salesforce/blip-itm-base-coco."""
    return HFPairScorer("blip-itm", checkpoint, device=device, precision=precision, revision=revision,
                        trust_remote_code=trust_remote_code)


def load_blip2_itm(checkpoint=None, *, device="cpu", precision="fp32", revision=None, trust_remote_code=False, **_):
    """BLIP-2's ITM head (``Blip2ForImageTextRetrieval``); default checkpoint Salesforce/blip2-itm-vit-g."""
    return HFPairScorer("blip2-itm", checkpoint, device=device, precision=precision, revision=revision,
                        trust_remote_code=trust_remote_code)
