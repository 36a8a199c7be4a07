"""SigLIP and SigLIP 2 through transformers, with the text preprocessing the checkpoints were trained with.

``siglip:CHECKPOINT`` and ``siglip2:CHECKPOINT`` take a hub id or a local ``save_pretrained`` folder; the
model class follows the checkpoint's ``config.json``: ``model_type`` "siglip" loads ``SiglipModel`` (SigLIP
and the fixed-resolution SigLIP 2 checkpoints such as google/siglip2-base-patch16-224, which are SigLIP
architectures with a Gemma tokenizer), "siglip2" loads ``Siglip2Model`` (the NaFlex checkpoints, whose image
processor returns patches, a patch mask and the patch grid's shape).

Text preprocessing, applied by default and recorded in the model identity (so it is part of the model hash):

* ``padding=max_length``: every caption is padded (on the right) to the text tower's length, 64 tokens.
  The text tower pools the *last* position, and the models were trained on fixed 64-token sequences;
  ``padding=True`` (pad to the longest caption of a batch) makes a caption's vector depend on its batch.
* no attention mask: big_vision and open_clip attend over the padding, as in training;
  ``attention_mask=1`` passes the tokenizer's mask instead (what a plain transformers call does).
* ``lowercase=1``: captions are lower-cased before tokenizing. SigLIP 2 was trained on lower-cased text
  and its Gemma tokenizer does not lower-case (big_vision issue 166: 3.5 to 7 R@1 points lost without it);
  transformers' SiglipTokenizer lower-cases by itself. ``lowercase=0`` turns both off (the tokenizer's own
  lower-casing too, where it has one), e.g. to reproduce numbers measured without it.

Options follow the checkpoint after ``?``: ``siglip2:google/siglip2-base-patch16-224?lowercase=0``,
``siglip:?padding=longest`` (default checkpoint), several joined with ``&``.

Embeddings are ``get_image_features`` / ``get_text_features``, L2-normalized by the runner as for CLIP.
The sigmoid loss's learned ``logit_scale`` and ``logit_bias`` map a cosine to a logit by ``s*cos + b`` with
``s > 0``: a strictly increasing map, so no ranking and no retrieval metric changes; vlbench ignores both.
"""

from __future__ import annotations

from ..errors import ModelError
from ..util.query import QueryProblem, query_pairs
from .adapter import _as_features, family_loader, torch_dtype
from .hf import HFDualEncoder
from .hf import fingerprint as hf_fingerprint
from .hf import preflight as hf_preflight

__all__ = ["SiglipEncoder", "load_siglip", "load_siglip2", "split_options", "fingerprint", "preflight"]

DEFAULTS = {"siglip": "google/siglip-base-patch16-224", "siglip2": "google/siglip2-base-patch16-224"}
#: option -> allowed values (the first is the default)
OPTIONS = {"lowercase": ("1", "0"), "padding": ("max_length", "longest"), "attention_mask": ("0", "1")}
MODEL_CLASSES = {"siglip": "SiglipModel", "siglip2": "Siglip2Model"}


def split_options(checkpoint: str | None, family: str = "siglip2") -> tuple[str, dict]:
    """``CKPT?key=value&...`` -> (CKPT or the family's default, every option with its value, defaults filled)."""
    base, _, query = (checkpoint or "").partition("?")
    opts = {k: v[0] for k, v in OPTIONS.items()}
    try:
        pairs = query_pairs(query)
    except QueryProblem as exc:  # lowercase=0&lowercase=1: which one was meant is unknowable
        raise ModelError(f"{family}: {exc} in {checkpoint!r}",
                         f"e.g. {family}:{DEFAULTS.get(family, 'CHECKPOINT')}?lowercase=0") from None
    for key, value in pairs:
        if key not in OPTIONS:
            raise ModelError(f"{family}: unknown option {key!r} in {checkpoint!r}",
                             f"use {', '.join(k + '=' + '|'.join(v) for k, v in OPTIONS.items())}, "
                             f"e.g. {family}:{DEFAULTS.get(family, 'CHECKPOINT')}?lowercase=0")
        if value not in OPTIONS[key]:
            raise ModelError(f"{family}: option {key}={value!r} in {checkpoint!r} is not one of "
                             f"{', '.join(OPTIONS[key])}", f"write {key}={OPTIONS[key][0]} or {key}={OPTIONS[key][1]}")
        opts[key] = value
    return base.strip() or DEFAULTS.get(family, DEFAULTS["siglip2"]), opts


def _probe_lowercases(tok) -> bool:
    """Whether the tokenizer itself lower-cases (upper- and lower-case text give the same ids)."""
    probe = "A Dog ON THE Beach"
    return tok(probe)["input_ids"] == tok(probe.lower())["input_ids"]


def _tokenizer_lowercase_off(tok) -> None:
    """Turn off a tokenizer's own lower-casing: SiglipTokenizer's ``do_lower_case``, a Lowercase normalizer."""
    if getattr(tok, "do_lower_case", False):
        tok.do_lower_case = False
    backend = getattr(tok, "_tokenizer", None)
    if backend is None:
        return
    norm = getattr(backend, "normalizer", None)
    if norm is None:
        return
    from tokenizers import normalizers

    if isinstance(norm, normalizers.Lowercase):
        backend.normalizer = None
    elif isinstance(norm, normalizers.Sequence):
        parts = [norm[i] for i in range(len(norm))]
        if any(isinstance(p, normalizers.Lowercase) for p in parts):
            backend.normalizer = normalizers.Sequence([p for p in parts if not isinstance(p, normalizers.Lowercase)])


class SiglipEncoder(HFDualEncoder):
    """A SigLIP / SigLIP 2 checkpoint with its text preprocessing (module docstring)."""

    def __init__(self, family: str, checkpoint: str | None = None, *, device: str = "cpu", precision: str = "fp32",
                 revision: str | None = None, trust_remote_code: bool = False):
        self.spec_checkpoint = checkpoint
        base, self.options = split_options(checkpoint, family)
        super().__init__(family, base, model_class="SiglipModel", device=device, precision=precision,
                         revision=revision, trust_remote_code=trust_remote_code)
        model_type = getattr(self.config, "model_type", None)
        if model_type not in MODEL_CLASSES:
            raise ModelError(f"{family}: checkpoint {base!r} is a {model_type!r} model, not SigLIP or SigLIP 2",
                             f"use the family of that model (vlbench ls models), or a SigLIP checkpoint such as "
                             f"{DEFAULTS[family]}")
        self._load_args = (MODEL_CLASSES[model_type],) + tuple(self._load_args[1:])
        self.lowercase = self.options["lowercase"] == "1"
        self.tokenizer.padding_side = "right"  # trained: ids, then padding; the last position is pooled
        if not self.lowercase:
            _tokenizer_lowercase_off(self.tokenizer)
        self.tokenizer_lowercases = _probe_lowercases(self.tokenizer)
        if not self.lowercase and self.tokenizer_lowercases:
            raise ModelError(f"{family}: lowercase=0 was asked for, but the tokenizer of {base!r} "
                             f"({type(self.tokenizer).__name__}) lower-cases by itself and could not be switched off",
                             "drop lowercase=0, or use a checkpoint whose tokenizer does not lower-case")

    def identity(self) -> dict:
        out = super().identity()
        ip = self.image_processor
        extra = {k: getattr(ip, k) for k in ("max_num_patches", "patch_size") if getattr(ip, k, None) is not None}
        if extra:
            out["preprocessing"] = dict(out["preprocessing"], **extra)
        text_cfg = getattr(self.config, "text_config", None)
        out["embed_dim"] = int(getattr(text_cfg, "projection_size", None) or getattr(text_cfg, "hidden_size", 0) or 0)
        out["text_preprocessing"] = {
            "lowercase": self.lowercase, "tokenizer_lowercases": self.tokenizer_lowercases,
            "padding": self.options["padding"], "max_length": self.max_length, "padding_side": "right",
            "attention_mask": self.options["attention_mask"] == "1"}
        return out

    def _texts(self, texts) -> list[str]:
        return [t.lower() for t in texts] if self.lowercase else list(texts)

    def _tokenize(self, texts):
        padding = "max_length" if self.options["padding"] == "max_length" else True
        return self.tokenizer(self._texts(texts), padding=padding, truncation=True, max_length=self.max_length,
                              return_tensors="pt")

    def text_keys(self, texts):
        return super().text_keys(self._texts(texts))

    def text_lengths(self, texts):
        return super().text_lengths(self._texts(texts))

    def preprocess(self, image):
        out = self.image_processor(images=image, return_tensors="pt")
        if set(out.keys()) == {"pixel_values"}:
            return out["pixel_values"][0]
        return {k: v[0] for k, v in out.items()}  # NaFlex: patches, patch mask, grid shape

    def collate(self, items):
        import torch

        if items and isinstance(items[0], dict):
            return PatchBatch({k: torch.stack([x[k] for x in items]) for k in items[0]})
        return super().collate(items)

    def encode_images(self, batch):
        if not isinstance(batch, dict):
            return super().encode_images(batch)
        import torch

        inputs = {k: v.to(self.device) for k, v in batch.items()}
        inputs["pixel_values"] = inputs["pixel_values"].to(dtype=torch_dtype(self.precision))
        with torch.inference_mode():
            return _as_features(self.model.get_image_features(**inputs))

    def encode_texts(self, texts):
        import torch

        tok = self._tokenize(texts)
        keep = ("input_ids", "attention_mask") if self.options["attention_mask"] == "1" else ("input_ids",)
        tok = {k: v.to(self.device) for k, v in tok.items() if k in keep}
        with torch.inference_mode():
            return _as_features(self.model.get_text_features(**tok))


class PatchBatch(dict):
    """A collated NaFlex batch (a dict of tensors) that slices like a tensor (the runner's out-of-memory split)."""

    def __getitem__(self, key):
        if isinstance(key, slice):
            return PatchBatch({k: v[key] for k, v in self.items()})
        return super().__getitem__(key)

    def __len__(self):
        return len(next(iter(self.values()))) if dict.__len__(self) else 0


load_siglip = family_loader(SiglipEncoder, "siglip")
load_siglip2 = family_loader(SiglipEncoder, "siglip2")


def fingerprint(checkpoint: str, *, family: str = "siglip2", revision: str | None = None, **_) -> dict | None:
    """The transformers families' fingerprint of the checkpoint, with the text options it runs with."""
    base, opts = split_options(checkpoint, family)
    found = hf_fingerprint(base, revision=revision)
    return None if found is None else dict(found, text_options=opts)


def preflight(checkpoint: str, *, family: str = "siglip2", **_) -> list:
    try:
        base, _opts = split_options(checkpoint, family)
    except ModelError as exc:
        return [exc]
    return hf_preflight(base, family=family)
