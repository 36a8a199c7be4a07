"""A tiny random-weight ColQwen2 (transformers ``ColQwen2ForRetrieval`` on a 2-layer Qwen2-VL) with its real
``ColQwen2Processor`` (a byte-level BPE tokenizer trained here with the Qwen2-VL special tokens, and a
``Qwen2VLImageProcessor`` at a small fixed resolution), saved with save_pretrained so vlbench loads it through
the path a hub id takes. No download anywhere."""

from __future__ import annotations

from pathlib import Path

#: the Qwen2-VL special tokens the processor and the model read
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
            "<|video_pad|>")
CORPUS = ("a man riding a horse on the beach", "two dogs play in the snow", "a red car parked near a building",
          "a woman with an umbrella", "Query: describe the image", "a blue bus on a long street")
#: image pixels: 56 x 56 (a 4 x 4 patch grid, 4 image tokens after the 2 x 2 merge)
PIXELS = 56 * 56


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=list(SPECIALS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(CORPUS) * 10, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|endoftext|>", eos_token="<|im_end|>")


def save_colqwen2(folder: Path, seed: int = 0, embedding_dim: int = 16, max_pixels: int = PIXELS) -> Path:
    """A tiny ColQwen2 checkpoint folder (weights, config, tokenizer, processor)."""
    import torch
    from transformers import (
        ColQwen2Config,
        ColQwen2ForRetrieval,
        ColQwen2Processor,
        Qwen2VLConfig,
        Qwen2VLImageProcessor,
    )

    tok = _tokenizer()
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIALS}
    processor = ColQwen2Processor(image_processor=Qwen2VLImageProcessor(
        min_pixels=PIXELS, max_pixels=max_pixels, patch_size=14, merge_size=2, temporal_patch_size=2), tokenizer=tok)
    vlm = Qwen2VLConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, bos_token_id=ids["<|endoftext|>"],
                         eos_token_id=ids["<|im_end|>"],
                         rope_scaling={"type": "mrope", "mrope_section": [2, 1, 1]}),
        vision_config=dict(depth=1, embed_dim=32, hidden_size=32, num_heads=4, mlp_ratio=2, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2, in_channels=3),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"])
    torch.manual_seed(seed)
    model = ColQwen2ForRetrieval(ColQwen2Config(vlm_config=vlm, embedding_dim=embedding_dim)).eval()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def save_colpali(folder: Path, seed: int = 0, embedding_dim: int = 16, image_size: int = 28) -> Path:
    """A tiny ColPali checkpoint folder (ColPaliForRetrieval on a 2-layer PaliGemma: Gemma text, SigLIP vision;
    ColPaliProcessor with a byte-level BPE tokenizer trained here and a SigLIP image processor at ``image_size``)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        ColPaliConfig,
        ColPaliForRetrieval,
        ColPaliProcessor,
        PaliGemmaConfig,
        PreTrainedTokenizerFast,
        SiglipImageProcessor,
    )

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<pad>", "<eos>", "<bos>", "<image>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(CORPUS) * 10, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>")
    images = SiglipImageProcessor(size={"height": image_size, "width": image_size})
    images.image_seq_length = (image_size // 14) ** 2
    processor = ColPaliProcessor(image_processor=images, tokenizer=fast)
    vlm = PaliGemmaConfig(
        text_config=dict(model_type="gemma", vocab_size=len(processor.tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8),
        vision_config=dict(model_type="siglip_vision_model", hidden_size=32, intermediate_size=64,
                           num_hidden_layers=1, num_attention_heads=4, image_size=image_size, patch_size=14),
        image_token_index=processor.image_token_id, projection_dim=32)
    torch.manual_seed(seed)
    model = ColPaliForRetrieval(ColPaliConfig(vlm_config=vlm, embedding_dim=embedding_dim)).eval()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder
