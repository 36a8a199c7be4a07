"""The Hugging Face transformers dual encoders: CLIP, ALIGN, AltCLIP, GroupViT, MetaCLIP 2 and Chinese-CLIP (one
adapter class), and BLIP's contrastive head (:class:`BlipContrastive`: the same loading, its own two encoders)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import ModelError
from .adapter import (
    PROCESSOR_KEYS,
    LazyWeights,
    ModelAdapter,
    _as_features,
    _dir_fingerprint,
    check_vocabulary,
    checkpoint_source,
    load_parts,
    local_fingerprint,
    torch_dtype,
)
from .budget import cut_to_budget, hf_cutter
from .families import BUILTIN
from .hub import hub_commit, hub_problem
from .pairs.blip_options import pre_caption, resolve, split_query

__all__ = ["HFDualEncoder", "BlipContrastive", "load_clip", "load_align", "load_altclip", "load_groupvit",
           "load_metaclip2", "load_chinese_clip", "load_blip", "fingerprint", "preflight", "TEXT_TOKEN_LIMITS"]

#: families whose training context is shorter than their text tower's positions: the token limit they were trained
#: with (Chinese-CLIP: its BERT has 512 positions, the model was trained and is evaluated with 52 tokens)
TEXT_TOKEN_LIMITS = {"chinese-clip": 52}

#: each family's transformers class and the ``model_type`` of the checkpoints that class loads: a checkpoint of
#: another type would load into the class with its weights missing, silently drawn at random (a CLIP folder read
#: as ALIGN, Chinese-CLIP or MetaCLIP 2), so it is refused before any weight is read
HF_CLASSES = {"clip": ("CLIPModel", "clip"), "align": ("AlignModel", "align"), "altclip": ("AltCLIPModel", "altclip"),
              "groupvit": ("GroupViTModel", "groupvit"), "metaclip2": ("MetaClip2Model", "metaclip_2"),
              "chinese-clip": ("ChineseCLIPModel", "chinese_clip"), "blip": ("BlipForImageTextRetrieval", "blip")}


class HFDualEncoder(LazyWeights, ModelAdapter):
    """A transformers dual encoder; ``model_class`` names the transformers class of its weights."""

    def __init__(self, family: str, checkpoint: str | None = None, *, model_class: str, device: str = "cpu",
                 precision: str = "fp32", revision: str | None = None, trust_remote_code: bool = False):
        import transformers

        cls_name = model_class
        self.name = family
        default = BUILTIN[family].default_checkpoint if family in BUILTIN else None
        if not (checkpoint or default):
            raise ModelError(f"{family}: no checkpoint given and the family has no default one",
                             f"name one: --model {family}:<checkpoint>")
        self.checkpoint: str = checkpoint or default  # type: ignore[assignment]  # one of the two is set (above)
        self.precision = precision
        self.device = device
        source = checkpoint_source(self.checkpoint)
        kw = dict(revision=revision, trust_remote_code=trust_remote_code)
        self.tokenizer, self.image_processor, self.config = load_parts(
            family, self.checkpoint, source, kw, transformers.AutoTokenizer, transformers.AutoImageProcessor,
            transformers.AutoConfig)
        check_vocabulary(self.tokenizer, self.checkpoint)  # the offline CLIPTokenizer trap
        _check_model_type(family, self.checkpoint, cls_name, getattr(self.config, "model_type", None))
        # the weights load on first use: a fully cached (warm) run never needs them
        self._model = None
        self._load_args: tuple = (cls_name, source, kw)
        cfg = self.config
        text_cfg = getattr(cfg, "text_config", None)
        found = [getattr(text_cfg, "max_position_embeddings", None), getattr(self.tokenizer, "model_max_length", None)]
        limits = [x for x in found if isinstance(x, int) and 0 < x < 100_000]
        self.max_length = min(limits + [TEXT_TOKEN_LIMITS.get(family, 100_000)]) if limits else 77
        if family == "altclip":  # XLM-R positions start after the padding index
            pad = getattr(text_cfg, "pad_token_id", 1) or 1
            self.max_length = min(self.max_length, getattr(text_cfg, "max_position_embeddings", 514) - pad - 1)
        self._local = _dir_fingerprint(Path(source)) if Path(source).exists() else None
        # the resolved commit, not a moving branch name: new weights on "main" get a new hash
        self.requested_revision = revision
        self.revision = getattr(cfg, "_commit_hash", None) or revision

    def identity(self) -> dict:
        ip = self.image_processor
        pre = {k: getattr(ip, k, None) for k in PROCESSOR_KEYS}
        return {
            "adapter": f"vlbench.hf.{self.name}",
            "model_class": self._load_args[0],
            "checkpoint": self.checkpoint,
            "revision": self.revision,
            "requested_revision": self.requested_revision,
            "local": self._local,
            "preprocessing": json.loads(json.dumps(pre, default=str)),
            "tokenizer": type(self.tokenizer).__name__,
            "max_text_tokens": self.max_length,
            "precision": self.precision,
            "embed_dim": self._embed_dim(),
        }

    def _embed_dim(self) -> int:
        return int(getattr(self.config, "projection_dim", 0) or 0)

    def preprocess(self, image):
        return self.image_processor(images=image, return_tensors="pt")["pixel_values"][0]

    def _texts(self, texts) -> list[str]:
        """The texts as the tokenizer receives them (SigLIP lower-cases them first)."""
        return list(texts)

    def text_context_length(self) -> int:
        return self.max_length

    def cut_texts(self, texts, budgets):
        return cut_to_budget(self._texts(texts), budgets, *hf_cutter(self.tokenizer))

    def attention_implementation(self) -> str | None:
        """The loaded model's attention implementation (eager, sdpa, flash_attention_2); None before loading."""
        cfg = getattr(self._model, "config", None)
        return getattr(cfg, "_attn_implementation", None) if cfg is not None else None

    #: the processor settings that only normalise (after the uint8 pixels): not part of the pixel spec
    _NORMALISING = ("do_rescale", "rescale_factor", "do_normalize", "image_mean", "image_std")

    def pixel_spec(self) -> dict | None:
        """The image processor's settings minus its normalisation, with the libraries that resample; None when
        the processor does not give uint8 pixels with rescaling and normalisation off (checked once)."""
        import torchvision
        import transformers

        ip = self.image_processor
        if getattr(self, "_pixel_ok", None) is None:
            self._pixel_ok = self._pixel_split_holds()
        if not self._pixel_ok:
            return None
        settings = {k: v for k, v in ip.to_dict().items() if k not in self._NORMALISING}
        return json.loads(json.dumps({"processor": settings, "transformers": transformers.__version__,
                                      "torchvision": torchvision.__version__}, default=str, sort_keys=True))

    def _pixel_split_holds(self) -> bool:
        """True when ``from_pixels(to_pixels(x))`` is ``preprocess(x)`` bit for bit on a probe image (a processor
        that resamples in floats, or a NaFlex one, has no uint8 split: it is never cached as pixels)."""
        import numpy as np
        import torch
        from PIL import Image

        probe = Image.fromarray(np.random.default_rng(0).integers(0, 256, (37, 53, 3), dtype=np.uint8))
        try:
            pixels = self.to_pixels(probe)
            if not isinstance(pixels, torch.Tensor) or pixels.dtype != torch.uint8 or pixels.ndim != 3:
                return False
            return bool(torch.equal(self.from_pixels(pixels[None])[0], self.preprocess(probe)))
        except Exception:
            return False

    def to_pixels(self, image):
        """One image -> C x H x W; a list of them (uint8 tensors on the device: --pixels device) -> N x C x H x W,
        resized and cropped where the tensors are."""
        out = self.image_processor(images=image, return_tensors="pt", do_rescale=False,
                                   do_normalize=False)["pixel_values"]
        return out if isinstance(image, list) else out[0]

    def from_pixels(self, batch):
        ip = self.image_processor
        return ip.rescale_and_normalize(batch, ip.do_rescale, ip.rescale_factor, ip.do_normalize, ip.image_mean,
                                        ip.image_std)

    def _tokenize(self, texts):
        return self.tokenizer(list(texts), padding=True, truncation=True, max_length=self.max_length,
                              return_tensors="pt")

    def text_keys(self, texts):
        ids = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)["input_ids"]
        return [" ".join(map(str, x)) for x in ids]

    def text_lengths(self, texts):
        return [len(x) for x in self.tokenizer(list(texts), truncation=True, max_length=self.max_length)["input_ids"]]

    def encode_images(self, batch):
        import torch

        with torch.inference_mode():
            pix = batch.to(self.device, dtype=torch_dtype(self.precision))
            return _as_features(self.model.get_image_features(pixel_values=pix))

    def encode_texts(self, texts):
        import torch

        tok = self._tokenize(texts)
        tok = {k: v.to(self.device) for k, v in tok.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        with torch.inference_mode():
            return _as_features(self.model.get_text_features(**tok))


class BlipContrastive(HFDualEncoder):
    """BLIP's image-text contrastive (ITC) head as a dual encoder, from a ``BlipForImageTextRetrieval`` checkpoint:
    what the model's forward computes with ``use_itm_head=False``, split into its two sides. The image vector is
    ``vision_proj`` of the vision tower's CLS state, the text vector ``text_proj`` of the text encoder's CLS state
    (the text encoder run without the image, as the forward does), each L2-normalised; the forward's cosine matrix
    is their product. This is the first stage of BLIP's own retrieval protocol (``--rerank blip-itm``).

    Options (``blip:CKPT?max_text_tokens=35&pre_caption=30``): the caption truncation and BLIP's caption
    normalisation of BLIP's own evaluation (the same options of the ``blip-itm`` pair scorer, models/pairs/
    blip_options.py), so its first stage reads the tokens BLIP's ITC reads; each one given enters the identity."""

    def __init__(self, family, checkpoint=None, **kwargs):
        base, opts = split_query(checkpoint or "")
        unknown = sorted(set(opts) - {"max_text_tokens", "pre_caption"})
        if unknown:
            raise ModelError(f"{family}: unknown option(s) {', '.join(unknown)} in {checkpoint!r}",
                             f"use max_text_tokens and pre_caption, e.g. "
                             f"{family}:CKPT?max_text_tokens=35&pre_caption=30")
        self.text_options = {k: v for k, v in resolve("blip-itm", opts).items()
                             if k in ("max_text_tokens", "pre_caption") and v is not None}
        super().__init__(family, base or None, **kwargs)
        want = self.text_options.get("max_text_tokens")
        if want is not None and want > self.max_length:
            raise ModelError(f"{family}: max_text_tokens={want} is above the {self.max_length} tokens the text tower "
                             f"of {self.checkpoint!r} reads", f"give max_text_tokens at most {self.max_length}")
        self.max_length = want or self.max_length

    def identity(self) -> dict:
        out = super().identity()
        if "pre_caption" in self.text_options:  # only when set: the default identity (and cache) is unchanged
            out["pre_caption_words"] = self.text_options["pre_caption"]
        return out

    def _texts(self, texts) -> list[str]:
        n = self.text_options.get("pre_caption")
        return [str(t) for t in texts] if n is None else [pre_caption(t, n) for t in texts]

    def _tokenize(self, texts):
        return super()._tokenize(self._texts(texts))

    def text_keys(self, texts):
        return super().text_keys(self._texts(texts))

    def text_lengths(self, texts):
        return super().text_lengths(self._texts(texts))

    def _embed_dim(self) -> int:
        return int(getattr(self.config, "image_text_hidden_size", 0) or 0)

    def encode_images(self, batch):
        import torch

        m = self.model
        with torch.inference_mode():
            pix = batch.to(self.device, dtype=torch_dtype(self.precision))
            cls = m.vision_model(pixel_values=pix).last_hidden_state[:, 0, :]
            return torch.nn.functional.normalize(m.vision_proj(cls), dim=-1)

    def encode_texts(self, texts):
        import torch

        m = self.model
        tok = self._tokenize(texts)
        with torch.inference_mode():
            hidden = m.text_encoder(input_ids=tok["input_ids"].to(self.device),
                                    attention_mask=tok["attention_mask"].to(self.device)).last_hidden_state
            return torch.nn.functional.normalize(m.text_proj(hidden[:, 0, :]), dim=-1)


def _check_model_type(family: str, checkpoint: str, cls_name: str, model_type) -> None:
    """A ModelError when the checkpoint's config is of another model type than the family's class loads (only for
    the families of HF_CLASSES: SigLIP checks its own), naming the family that reads that type."""
    want = next((t for c, t in HF_CLASSES.values() if c == cls_name), None)
    if want is None or not model_type or model_type == want:
        return
    other = [f for f, (_, t) in HF_CLASSES.items() if t == model_type]
    hint = f"--model {other[0]}:{checkpoint}" if other else "the family of that model (vlbench ls models)"
    raise ModelError(f"{family}: checkpoint {checkpoint!r} is a {model_type!r} model, not {want!r} ({cls_name}): "
                     "its weights would not fit the class and would be drawn at random", f"load it with {hint}")


def _hf_factory(family, model_class, adapter=HFDualEncoder):
    def factory(checkpoint=None, *, device="cpu", precision="fp32", revision=None, trust_remote_code=False, **_):
        return adapter(family, checkpoint, model_class=model_class, device=device, precision=precision,
                       revision=revision, trust_remote_code=trust_remote_code)
    factory.__name__ = f"load_{family}"
    return factory


# the loaders named by the records in families.py
load_clip = _hf_factory("clip", HF_CLASSES["clip"][0])
load_align = _hf_factory("align", HF_CLASSES["align"][0])
load_altclip = _hf_factory("altclip", HF_CLASSES["altclip"][0])
load_groupvit = _hf_factory("groupvit", HF_CLASSES["groupvit"][0])
load_metaclip2 = _hf_factory("metaclip2", HF_CLASSES["metaclip2"][0])
load_chinese_clip = _hf_factory("chinese-clip", HF_CLASSES["chinese-clip"][0])
load_blip = _hf_factory("blip", HF_CLASSES["blip"][0], BlipContrastive)


# hooks of the families' records (families.py): files and the hub cache only, nothing loaded

def fingerprint(checkpoint: str, *, revision: str | None = None, family: str = "clip", **_) -> dict | None:
    """A local folder's file digests, or the commit of the hub id's cached snapshot (None: not cached). BLIP's
    ``?options`` are not part of the checkpoint (the spec, part of the key, holds them)."""
    checkpoint = _base(checkpoint, family)
    local = local_fingerprint(checkpoint)
    if local is not None:
        return local
    commit = hub_commit(checkpoint, revision)
    return {"commit": commit} if commit else None


def preflight(checkpoint: str, *, family: str = "clip", **_) -> list:
    """A local folder with config.json, or a hub id that is cached or can be downloaded."""
    checkpoint = _base(checkpoint, family)
    local = Path(checkpoint).expanduser()
    if local.exists() or checkpoint.startswith((".", "/", "~")) or os.sep + os.sep in checkpoint:
        if (local / "config.json").is_file():
            return folder_problems(local, family) + _type_problems(local, checkpoint, family)
        return [ModelError(f"local folder {str(local)!r} " +
                           ("has no config.json" if local.is_dir() else "does not exist"),
                           "give the folder of a save_pretrained() export (config, weights, tokenizer and "
                           "image-processor files)")]
    p = hub_problem(checkpoint, f"--model {family}:/path/to/{checkpoint.split('/')[-1]}")
    return [p] if p else []


def _base(checkpoint: str, family: str) -> str:
    """The checkpoint without BLIP's ``?options`` (BlipContrastive's); other families' checkpoints as given."""
    return checkpoint.partition("?")[0] if family == "blip" else checkpoint


def _type_problems(local: Path, checkpoint: str, family: str) -> list:
    """The model-type refusal of _check_model_type, read from the folder's config.json (files only)."""
    if family not in HF_CLASSES:
        return []
    try:
        model_type = json.loads((local / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return []  # an unreadable config is the loader's to report, with the file named
    try:
        _check_model_type(family, checkpoint, HF_CLASSES[family][0], model_type)
    except ModelError as exc:
        return [exc]
    return []


#: a save_pretrained() folder's files by part: any one of the names (or glob patterns) will do
FOLDER_PARTS = (
    ("weights", ("model.safetensors", "pytorch_model.bin", "model-*.safetensors", "pytorch_model-*.bin",
                 "*.safetensors.index.json", "pytorch_model.bin.index.json")),
    ("tokenizer files", ("tokenizer.json", "vocab.json", "vocab.txt", "sentencepiece.bpe.model", "spiece.model",
                         "tokenizer.model")),
    ("image-processor config", ("preprocessor_config.json", "processor_config.json")),
)


def folder_problems(local: Path, family: str = "clip") -> list:
    """What a local transformers checkpoint folder lacks (weights, tokenizer, image-processor config), found
    from its file names before anything loads: a folder saved with ``model.save_pretrained()`` alone has no
    processor files, and would otherwise fail only after the weights were read."""
    missing = [part for part, names in FOLDER_PARTS if not any(next(local.glob(n), None) for n in names)]
    if not missing:
        return []
    wants = {part: " or ".join(names[:2]) for part, names in FOLDER_PARTS}
    return [ModelError(f"local folder {str(local)!r} has no {', no '.join(missing)} "
                       f"({'; '.join(wants[m] for m in missing)})",
                       "save the processor beside the weights: e.g. transformers.AutoProcessor.from_pretrained("
                       f"'<the original checkpoint>').save_pretrained({str(local)!r}) (for {family}: the tokenizer "
                       "and the image processor, each with save_pretrained into the same folder)")]
