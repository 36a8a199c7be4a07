"""Tiny SigLIP and SigLIP 2 models built through the real transformers classes and saved with save_pretrained
(SiglipModel with a SentencePiece SiglipTokenizer; Siglip2Model, the NaFlex architecture; SiglipModel with a
Gemma BPE tokenizer, the form of the fixed-resolution SigLIP 2 checkpoints): the SigLIP family's tests and the
conformance checks load them exactly as a hub id is loaded."""

from __future__ import annotations

import io
import json
from pathlib import Path

from support.tiny_models import CORPUS, IMAGE_SIZE


def _text_kw(vocab):
    return dict(vocab_size=vocab, hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=64)


def _vision_kw(**kw):
    return dict(hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4, **kw)


def _spiece_tokenizer(folder: Path):
    import google.protobuf  # noqa: F401  (SiglipTokenizer reads its model with protobuf; a core dependency)
    import sentencepiece as spm
    from transformers import SiglipTokenizer

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS), model_writer=buf, vocab_size=120,
                                   model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
                                   character_coverage=1.0, hard_vocab_limit=False, minloglevel=2)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spiece.model").write_bytes(buf.getvalue())
    return SiglipTokenizer(str(folder / "spiece.model"), model_max_length=64)


def _gemma_tokenizer():
    """A small Gemma-style BPE (byte fallback, '▁' for spaces), trained in memory: no lower-casing."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import GemmaTokenizer

    tk = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tk.normalizer = normalizers.Replace(" ", "▁")
    tk.pre_tokenizer = pre_tokenizers.Split(pattern=" ", behavior="merged_with_previous")
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"] + [f"<0x{i:02X}>" for i in range(256)]
    tk.train_from_iterator(CORPUS + [c.upper() for c in CORPUS[:6]], trainers.BpeTrainer(vocab_size=340,
                                                                                         special_tokens=specials))
    model = json.loads(tk.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split()) for m in model["merges"]]
    return GemmaTokenizer(vocab=model["vocab"], merges=merges, model_max_length=64, padding_side="right")


def _save_siglip_arch(folder: Path, tok, seed: int) -> Path:
    """A tiny SiglipModel with the tokenizer ``tok``, saved as a checkpoint folder."""
    import torch
    from transformers import SiglipConfig, SiglipImageProcessor, SiglipModel

    torch.manual_seed(seed)
    cfg = SiglipConfig(text_config=_text_kw(len(tok)), vision_config=_vision_kw(image_size=IMAGE_SIZE, patch_size=8))
    SiglipModel(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    SiglipImageProcessor(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}).save_pretrained(folder)
    return folder


def save_siglip(folder: Path, seed: int = 0) -> Path:
    return _save_siglip_arch(folder, _spiece_tokenizer(folder.parent / f"{folder.name}-spm"), seed)


def save_siglip2_fixed(folder: Path, seed: int = 0) -> Path:
    """The fixed-resolution SigLIP 2 form: a SigLIP architecture with a Gemma tokenizer."""
    return _save_siglip_arch(folder, _gemma_tokenizer(), seed)


def save_siglip2_naflex(folder: Path, seed: int = 0) -> Path:
    import torch
    from transformers import Siglip2Config, Siglip2ImageProcessor, Siglip2Model

    torch.manual_seed(seed)
    tok = _gemma_tokenizer()
    cfg = Siglip2Config(text_config=_text_kw(len(tok)), vision_config=_vision_kw(num_patches=16, patch_size=8))
    Siglip2Model(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    Siglip2ImageProcessor(max_num_patches=16, patch_size=8).save_pretrained(folder)
    return folder


SAVERS = {"siglip": save_siglip, "siglip2-fixed": save_siglip2_fixed, "siglip2-naflex": save_siglip2_naflex}
