"""BLIP and BLIP-2 image-text matching (ITM) heads as pair scorers (transformers ``BlipForImageTextRetrieval``,
``Blip2ForImageTextRetrieval``).

The score of a pair is the ITM head's "match" probability: the softmax over its two logits, taken at index 1, as
the model cards show (``model(**inputs, use_itm_head=True)`` for BLIP, ``use_image_text_matching_head=True`` for
BLIP-2). Options (blip_options.py) give the published protocols' scores instead: the raw match logit, or the
logit plus the checkpoint's contrastive cosine, with their caption truncation and ITM input token.
The forward is split where the model allows: ``encode_images`` runs the vision tower once per image
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
from ..adapter import (
    PROCESSOR_KEYS,
    _dir_fingerprint,
    check_vocabulary,
    checkpoint_source,
    load_eval_model,
    load_parts,
    torch_dtype,
)
from .blip_options import SCORE_TEXT, pre_caption, resolve, token_id
from .protocol import PairScorer

__all__ = ["HFPairScorer", "load_blip_itm", "load_blip2_itm", "DEFAULTS"]

#: family -> (transformers class, default checkpoint)
DEFAULTS = {"blip-itm": ("BlipForImageTextRetrieval", "Salesforce/blip-itm-base-coco"),
            "blip2-itm": ("Blip2ForImageTextRetrieval", "Salesforce/blip2-itm-vit-g")}


class HFPairScorer(PairScorer):
    """A transformers ITM model as a pair scorer; ``family`` is ``blip-itm`` or ``blip2-itm``."""

    def __init__(self, family: str, checkpoint: str | None = None, *, device: str = "cpu", precision: str = "fp32",
                 revision: str | None = None, trust_remote_code: bool = False, options: dict | None = None):
        import transformers

        if family not in DEFAULTS:
            raise ModelError(f"unknown ITM family {family!r}", f"use one of {sorted(DEFAULTS)}")
        self.name = family
        self.options = resolve(family, options)
        self.model_class, default = DEFAULTS[family]
        self.checkpoint: str = checkpoint or default
        self.precision, self.device = precision, device
        local = Path(self.checkpoint).expanduser()
        source = checkpoint_source(self.checkpoint)
        kw = dict(revision=revision, trust_remote_code=trust_remote_code)
        self.processor, self.config = load_parts(family, self.checkpoint, source, kw, transformers.AutoProcessor,
                                                 transformers.AutoConfig)
        self.tokenizer: Any = getattr(self.processor, "tokenizer", None)
        self.image_processor: Any = getattr(self.processor, "image_processor", None)
        if self.tokenizer is None or self.image_processor is None:
            raise ModelError(f"the processor of {self.checkpoint!r} has no tokenizer or image processor",
                             "save the model's processor (AutoProcessor) beside its weights")
        check_vocabulary(self.tokenizer, self.checkpoint)  # the offline tokenizer trap
        text_cfg = getattr(self.config, "qformer_config" if family == "blip2-itm" else "text_config", None)
        found = [getattr(text_cfg, "max_position_embeddings", None), getattr(self.tokenizer, "model_max_length", None)]
        limits = [x for x in found if isinstance(x, int) and 0 < x < 100_000]
        self.max_length = min(limits) if limits else 512
        want = self.options["max_text_tokens"]
        if want is not None and want > self.max_length:
            raise ModelError(f"{family}: max_text_tokens={want} is above the {self.max_length} tokens the text tower "
                             f"of {self.checkpoint!r} reads", f"give max_text_tokens at most {self.max_length}")
        self.max_length = want or self.max_length
        self.itm_token = None if self.options["itm_token"] is None else \
            token_id(self.tokenizer, self.options["itm_token"], int(getattr(text_cfg, "vocab_size", 0) or 0),
                     self.checkpoint)
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
            "score": SCORE_TEXT[self.options["score"]].format(
                mean=", mean over the query tokens" if self.name == "blip2-itm" else "",
                best=", best query token" if self.name == "blip2-itm" else ""),
        }
        if self.itm_token is not None:  # present only when set: the default identity (and cache) is unchanged
            out["itm_first_token"] = self.itm_token
        if self.options["pre_caption"] is not None:
            out["pre_caption_words"] = self.options["pre_caption"]
        kind = str(self.device).split(":")[0]
        if kind != "cpu":  # scores made on an accelerator agree with the CPU's only within a tolerance: another
            out["device"] = kind  # identity, so never one cache entry (the CPU's identity has no device key)
        return out

    def preprocess(self, image):
        return self.image_processor(images=image, return_tensors="pt")["pixel_values"][0]

    def _read(self, texts) -> list[str]:
        """The captions as the model reads them (BLIP's pre_caption where the option asks for it)."""
        n = self.options["pre_caption"]
        return [str(t) for t in texts] if n is None else [pre_caption(t, n) for t in texts]

    def _tokenize(self, texts):
        tok = self.tokenizer(self._read(texts), padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt")
        return tok["input_ids"].to(self.device), tok["attention_mask"].to(self.device)

    def text_keys(self, texts):
        ids = self.tokenizer(self._read(texts), truncation=True, max_length=self.max_length)["input_ids"]
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
            itm_ids = ids
            if self.itm_token is not None:  # BLIP's code: the ITM input starts with [ENC], the ITC input with [CLS]
                itm_ids = ids.clone()
                itm_ids[:, 0] = self.itm_token
            logits = self._itm_logits(img, itm_ids, mask).float()
            score = self.options["score"]
            if score == "match-prob":
                out = torch.softmax(logits, dim=-1)[:, 1]
            elif score == "itm-logit":
                out = logits[:, 1]
            else:
                out = logits[:, 1] + self._itc_cosine(img, ids, mask).float()
            return out.cpu().numpy().astype(np.float32)

    def _itc_cosine(self, image_embeds, ids, mask):
        """The contrastive cosine of each pair, as the model's forward computes it with its ITM head off
        (``use_itm_head=False`` / ``use_image_text_matching_head=False``), for aligned pairs."""
        import torch
        from torch.nn.functional import normalize  # lazy: torch is heavy, loaded only when a pair is scored

        m = self.model
        if self.name == "blip-itm":
            text = m.text_encoder(input_ids=ids, attention_mask=mask).last_hidden_state
            img = normalize(m.vision_proj(image_embeds[:, 0, :]), dim=-1)
            return (img * normalize(m.text_proj(text[:, 0, :]), dim=-1)).sum(dim=-1)
        image_mask = torch.ones(image_embeds.shape[:-1], dtype=torch.long, device=image_embeds.device)
        queries = m.query_tokens.expand(image_embeds.shape[0], -1, -1)
        q = m.qformer(query_embeds=queries, encoder_hidden_states=image_embeds,
                      encoder_attention_mask=image_mask).last_hidden_state
        q = normalize(m.vision_projection(q.to(dtype=m.vision_projection.weight.dtype)), dim=-1)
        text = m.qformer(query_embeds=m.embeddings(input_ids=ids), query_length=0,
                         attention_mask=mask).last_hidden_state
        t = normalize(m.text_projection(text[:, 0, :].to(dtype=m.text_projection.weight.dtype)), dim=-1)
        return (q * t[:, None, :]).sum(dim=-1).max(dim=1).values

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


def load_blip_itm(checkpoint=None, *, device="cpu", precision="fp32", revision=None, trust_remote_code=False,
                  options=None, **_):
    """BLIP's ITM head (``BlipForImageTextRetrieval``); default checkpoint Salesforce/blip-itm-base-coco."""
    return HFPairScorer("blip-itm", checkpoint, device=device, precision=precision, revision=revision,
                        trust_remote_code=trust_remote_code, options=options)


def load_blip2_itm(checkpoint=None, *, device="cpu", precision="fp32", revision=None, trust_remote_code=False,
                   options=None, **_):
    """BLIP-2's ITM head (``Blip2ForImageTextRetrieval``); default checkpoint Salesforce/blip2-itm-vit-g."""
    return HFPairScorer("blip2-itm", checkpoint, device=device, precision=precision, revision=revision,
                        trust_remote_code=trust_remote_code, options=options)
