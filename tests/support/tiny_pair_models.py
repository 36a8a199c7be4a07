"""Tiny random-weight BLIP and BLIP-2 image-text-retrieval models, built through the real transformers classes
(config -> model -> save_pretrained with its processor) so vlbench loads them through the path a hub id takes.
The tokenizer is a BERT WordPiece tokenizer over a small vocabulary written here (BLIP's ITM text tower is a
BERT); no download anywhere."""

from __future__ import annotations

from pathlib import Path

IMAGE_SIZE = 32
WORDS = ("a man riding horse on beach two dogs play in the snow red car parked near building woman with an "
         "umbrella blue bus long caption about very cat sits mat").split()


def _tokenizer(folder: Path):
    from transformers import BertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ","] + sorted(set(WORDS))) + "\n")
    return BertTokenizer(str(vocab))


def _image_processor():
    from transformers import BlipImageProcessor

    return BlipImageProcessor(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})


def _tower(**extra):
    # weights drawn wider than the library's 0.02 so that the image moves the ITM score visibly in float32
    return dict(hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
                initializer_range=0.5, **extra)


def save_blip_itm(folder: Path, seed: int = 0, max_positions: int = 40) -> Path:
    import torch
    from transformers import BlipConfig, BlipForImageTextRetrieval, BlipProcessor

    tok = _tokenizer(folder.parent / f"{folder.name}-vocab")
    torch.manual_seed(seed)
    cfg = BlipConfig(text_config=_tower(vocab_size=len(tok), max_position_embeddings=max_positions,
                                        encoder_hidden_size=32, bos_token_id=2, sep_token_id=3, pad_token_id=0),
                     vision_config=_tower(image_size=IMAGE_SIZE, patch_size=8), projection_dim=16,
                     initializer_range=0.5)
    BlipForImageTextRetrieval(cfg).save_pretrained(folder)
    BlipProcessor(image_processor=_image_processor(), tokenizer=tok).save_pretrained(folder)
    return folder


def save_blip2_itm(folder: Path, seed: int = 0, image_tokens: bool = True, max_positions: int = 40) -> Path:
    """``image_tokens``: the current hub layout (the processor puts ``num_query_tokens`` image tokens before the
    text and the config names their id); False: the older layout without them."""
    import torch
    from transformers import Blip2Config, Blip2ForImageTextRetrieval, Blip2Processor

    tok = _tokenizer(folder.parent / f"{folder.name}-vocab")
    n_query = 4
    proc = Blip2Processor(image_processor=_image_processor(), tokenizer=tok,
                          num_query_tokens=n_query if image_tokens else None)
    torch.manual_seed(seed)
    cfg = Blip2Config(vision_config=_tower(image_size=IMAGE_SIZE, patch_size=8),
                      qformer_config=_tower(vocab_size=len(proc.tokenizer), encoder_hidden_size=32,
                                            max_position_embeddings=max_positions, use_qformer_text_input=True,
                                            pad_token_id=0),
                      num_query_tokens=n_query, image_text_hidden_size=16, initializer_range=0.5,
                      image_token_index=proc.tokenizer.convert_tokens_to_ids("<image>") if image_tokens else None)
    Blip2ForImageTextRetrieval(cfg).save_pretrained(folder)
    proc.save_pretrained(folder)
    return folder


SAVERS = {"blip-itm": save_blip_itm, "blip2-itm": save_blip2_itm}
