"""A tiny random-weight Qwen2-VL (the real ``Qwen2VLForConditionalGeneration``) with its processor, built offline.

The tokenizer is a byte-level BPE trained here in a moment with the ``tokenizers`` library on a few sentences,
with Qwen2-VL's special tokens (``<|im_start|>``, ``<|im_end|>``, ``<|endoftext|>``, ``<|vision_start|>``,
``<|vision_end|>``, ``<|image_pad|>``, ``<|video_pad|>``), wrapped as transformers' ``Qwen2Tokenizer``; the
image processor is ``Qwen2VLImageProcessor`` (patch 14, merge 2, pixels bounded so a test image gives a handful of
patches); ``Qwen2VLProcessor`` ties the two and is saved beside the weights, so a folder loads as a hub id would.
Used by the MLLM-embedder tests (tests/unit/models/test_mllm_*.py) and any other Qwen2-VL-based piece.
"""

from __future__ import annotations

from pathlib import Path

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
            "<|video_pad|>")
CORPUS = ("a man riding a horse on the beach. two dogs play in the snow. a red car parked near a building. "
          "a woman with an umbrella. a blue bus on the street. find me an everyday image that matches the given "
          "caption: represent the given image. you are a helpful assistant. find an image that matches the given "
          "text. system user assistant a long caption about a very small cat that sits on a mat.")
#: the pixel bounds of the tiny processor: a 40 x 56 image gives a 2 x 4 grid of 14-pixel patches
MIN_PIXELS = 28 * 28
MAX_PIXELS = 56 * 84


def tiny_tokenizer(vocab_size: int = 400):
    """A Qwen2Tokenizer over a byte-level BPE trained here, Qwen2-VL's special tokens included."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator([CORPUS, CORPUS.upper()], trainer=trainer)
    tok = Qwen2Tokenizer(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                         unk_token=None, bos_token=None)
    tok.add_special_tokens({"additional_special_tokens": list(SPECIALS[1:])})
    return tok


def save_tiny_qwen2vl(folder: Path, seed: int = 0, hidden: int = 32, layers: int = 2,
                      min_pixels: int = MIN_PIXELS, max_pixels: int = MAX_PIXELS, vision_depth: int = 2,
                      vision_dim: int = 32, heads: int = 4, intermediate: int = 64) -> Path:
    """A random-weight Qwen2-VL saved with its processor into ``folder`` (config, safetensors, tokenizer,
    processor files); the sizes are arguments so a benchmark can build a bigger one."""
    import torch
    from transformers import (
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    tok = tiny_tokenizer()
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIALS}
    torch.manual_seed(seed)
    text = dict(vocab_size=len(tok), hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
                num_attention_heads=heads, num_key_value_heads=max(1, heads // 2), max_position_embeddings=4096,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                 "mrope_section": _mrope_section(hidden // heads)},
                bos_token_id=None, eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"])
    vision = dict(depth=vision_depth, embed_dim=vision_dim, hidden_size=hidden, num_heads=max(1, vision_dim // 16),
                  mlp_ratio=2, patch_size=14, spatial_merge_size=2, temporal_patch_size=2)
    cfg = Qwen2VLConfig(text_config=text, vision_config=vision, image_token_id=ids["<|image_pad|>"],
                        video_token_id=ids["<|video_pad|>"], vision_start_token_id=ids["<|vision_start|>"],
                        vision_end_token_id=ids["<|vision_end|>"])
    model = Qwen2VLForConditionalGeneration(cfg)
    model.save_pretrained(folder)
    ip = Qwen2VLImageProcessor(size={"shortest_edge": min_pixels, "longest_edge": max_pixels})
    Qwen2VLProcessor(image_processor=ip, tokenizer=tok, video_processor=Qwen2VLVideoProcessor()).save_pretrained(folder)
    return folder


def _mrope_section(head_dim: int) -> list[int]:
    """Qwen2-VL's multimodal rotary sections (temporal, height, width) for a head size: they sum to half of it."""
    half = head_dim // 2
    t = half // 4
    h = (half - t) // 2
    return [t, h, half - t - h]
