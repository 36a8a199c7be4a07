"""Tiny random-weight models of all five families, built through the real classes, saved to a
folder and loaded back through exactly the path a hub id takes (from_pretrained on a local folder;
open_clip's local-dir config + checkpoint). Used by the tests; no download anywhere."""

from __future__ import annotations

import gzip
import importlib.util
import json
from functools import lru_cache
from pathlib import Path

IMAGE_SIZE = 32


def _bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


@lru_cache(maxsize=1)
def clip_bpe_files(folder: str) -> tuple[str, str]:
    """vocab.json / merges.txt of the real CLIP BPE vocabulary, built from open_clip's bundled file (found
    without importing open_clip, which imports timm and wandb: seconds that a Hugging Face CLIP never uses)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    merges = gzip.open(open_clip_bpe()).read().decode("utf-8").split("\n")[1:49152 - 256 - 2 + 1]
    merges = [tuple(m.split()) for m in merges]
    vocab = list(_bytes_to_unicode().values())
    vocab = vocab + [v + "</w>" for v in vocab] + ["".join(m) for m in merges] + ["<|startoftext|>", "<|endoftext|>"]
    (folder / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(vocab)}))
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(" ".join(m) for m in merges) + "\n")
    return str(folder / "vocab.json"), str(folder / "merges.txt")


def open_clip_bpe() -> Path:
    """open_clip's bundled BPE vocabulary (open_clip.tokenizer.default_bpe()), located from its package folder."""
    spec = importlib.util.find_spec("open_clip")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("open_clip is not installed: the tiny CLIP tokenizers use its BPE vocabulary")
    return Path(next(iter(spec.submodule_search_locations))) / "bpe_simple_vocab_16e6.txt.gz"


def _clip_tokenizer(tmp: Path):
    from transformers import CLIPTokenizer

    v, m = clip_bpe_files(str(tmp / "bpe"))
    return CLIPTokenizer(v, m, model_max_length=77)


def _clip_image_processor():
    from transformers import CLIPImageProcessor

    return CLIPImageProcessor(size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})


def _text_kw(vocab, max_pos=77):
    return dict(vocab_size=vocab, hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=max_pos)


def save_clip(folder: Path, seed: int = 0, projection_dim: int = 16) -> Path:
    import torch
    from transformers import CLIPConfig, CLIPModel

    torch.manual_seed(seed)
    cfg = CLIPConfig(text_config=_text_kw(49408),
                     vision_config=dict(hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
                                        image_size=IMAGE_SIZE, patch_size=8),
                     projection_dim=projection_dim)
    CLIPModel(cfg).save_pretrained(folder)
    _clip_tokenizer(folder.parent).save_pretrained(folder)
    _clip_image_processor().save_pretrained(folder)
    return folder


def save_clip_wide(folder: Path, seed: int = 0) -> Path:
    """A tiny CLIP with wide feed-forward layers (64-d, 4,096 inner): big enough that its CPU forward gives other
    float32 values with 1 and 2 threads (MKL splits a 4,096-long inner product across threads), where the 32-d
    save_clip gives the same bits on this project's machine (tests/integration/test_sweep_thread_count.py)."""
    import torch
    from transformers import CLIPConfig, CLIPModel

    torch.manual_seed(seed)
    wide = dict(hidden_size=64, intermediate_size=4096, num_hidden_layers=2, num_attention_heads=4)
    cfg = CLIPConfig(text_config=dict(vocab_size=49408, max_position_embeddings=77, **wide),
                     vision_config=dict(image_size=IMAGE_SIZE, patch_size=8, **wide), projection_dim=16)
    CLIPModel(cfg).save_pretrained(folder)
    _clip_tokenizer(folder.parent).save_pretrained(folder)
    _clip_image_processor().save_pretrained(folder)
    return folder


def save_groupvit(folder: Path, seed: int = 0) -> Path:
    import torch
    from transformers import GroupViTConfig, GroupViTModel

    torch.manual_seed(seed)
    cfg = GroupViTConfig(
        text_config=_text_kw(49408),
        vision_config=dict(hidden_size=32, intermediate_size=37, depths=[2, 1], num_group_tokens=[4, 0],
                           num_output_groups=[4, 4], num_attention_heads=4, image_size=IMAGE_SIZE, patch_size=8),
        projection_dim=16, projection_intermediate_dim=32)
    GroupViTModel(cfg).save_pretrained(folder)
    _clip_tokenizer(folder.parent).save_pretrained(folder)
    _clip_image_processor().save_pretrained(folder)
    return folder


def save_align(folder: Path, seed: int = 0) -> Path:
    import torch
    from transformers import AlignConfig, AlignModel, BertTokenizer, EfficientNetImageProcessor

    torch.manual_seed(seed)
    # a small real WordPiece vocabulary: specials, the corpus words, letters and their ## pieces
    words = sorted({w for line in CORPUS for w in line.lower().split()})
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + list("0123456789.,!?'\"-")
    vocab = folder.parent / "align-vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words + letters +
                               ["##" + c for c in letters]) + "\n")
    tok = BertTokenizer(str(vocab), do_lower_case=True, model_max_length=64)
    cfg = AlignConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=64),
        vision_config=dict(image_size=IMAGE_SIZE, width_coefficient=0.1, depth_coefficient=0.1, hidden_dim=64,
                           num_channels=3),
        projection_dim=32)  # ALIGN has no image projection: text is projected to the vision width
    AlignModel(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    EfficientNetImageProcessor(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}).save_pretrained(folder)
    return folder


def _xlmr_tokenizer(corpus):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import XLMRobertaTokenizerFast

    tk = Tokenizer(models.Unigram())
    tk.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=400, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                                      unk_token="<unk>")
    tk.train_from_iterator(corpus, trainer)
    return XLMRobertaTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>", mask_token="<mask>", cls_token="<s>", sep_token="</s>",
                                   model_max_length=64)


CORPUS = ["a man riding a horse on a beach", "two dogs play in the snow", "a red car parked near a building",
          "children are playing football in a park", "a woman holding an umbrella in the rain",
          "an amphibious plane is floating in front of the London Bridge"] * 20


def save_altclip(folder: Path, seed: int = 0) -> Path:
    import torch
    from transformers import AltCLIPConfig, AltCLIPModel

    torch.manual_seed(seed)
    tok = _xlmr_tokenizer(CORPUS)
    cfg = AltCLIPConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=66, project_dim=16, pad_token_id=1),
        vision_config=dict(hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
                           image_size=IMAGE_SIZE, patch_size=8),
        projection_dim=16)
    AltCLIPModel(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    _clip_image_processor().save_pretrained(folder)
    return folder


def save_openclip(folder: Path, seed: int = 0, custom_text: bool = False) -> Path:
    """custom_text: build open_clip's CustomTextCLIP (text tower under ``model.text``)."""
    import open_clip
    import torch

    torch.manual_seed(seed)
    model_cfg = {"embed_dim": 16,
                 "vision_cfg": {"image_size": IMAGE_SIZE, "layers": 2, "width": 32, "patch_size": 8, "head_width": 8},
                 "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 4, "layers": 2}}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "open_clip_config.json").write_text(json.dumps({
        "model_cfg": dict(model_cfg, custom_text=True) if custom_text else model_cfg,
        "preprocess_cfg": {"mean": [0.48145466, 0.4578275, 0.40821073], "std": [0.26862954, 0.26130258, 0.27577711],
                           "interpolation": "bicubic", "resize_mode": "shortest"}}))
    model = (open_clip.CustomTextCLIP if custom_text else open_clip.CLIP)(**model_cfg)
    torch.save(model.state_dict(), folder / "open_clip_pytorch_model.bin")
    return folder


def save_metaclip2(folder: Path, seed: int = 0) -> Path:
    """MetaCLIP 2 (``MetaClip2Model``): a causal text tower pooled at the first end token, read by an XLM-R-style
    sentencepiece tokenizer (the real one is XLM-V's) whose ``</s>`` id 2 is the config's ``eos_token_id``."""
    import torch
    from transformers import MetaClip2Config, MetaClip2Model

    torch.manual_seed(seed)
    tok = _xlmr_tokenizer(CORPUS + ["ein Mann reitet ein Pferd am Strand", "deux chiens jouent dans la neige"])
    tok.model_max_length = 77
    cfg = MetaClip2Config(
        text_config=dict(_text_kw(len(tok)), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id),
        vision_config=dict(hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
                           image_size=IMAGE_SIZE, patch_size=8),
        projection_dim=16)
    MetaClip2Model(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    _clip_image_processor().save_pretrained(folder)
    return folder


def save_chinese_clip(folder: Path, seed: int = 0) -> Path:
    """Chinese-CLIP (``ChineseCLIPModel``): a BERT text tower (CLS pooled) with a WordPiece vocabulary that splits
    Chinese into characters; 64 positions here (512 in the real model; the family caps text at 52 tokens)."""
    import torch
    from transformers import BertTokenizer, ChineseCLIPConfig, ChineseCLIPImageProcessor, ChineseCLIPModel

    torch.manual_seed(seed)
    words = sorted({w for line in CORPUS for w in line.lower().split()})
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + list("0123456789.,!?'\"-")
    hanzi = list("一个男人在海滩上骑马两只狗雪地里玩红色的汽车停大楼附近")
    vocab = folder.parent / f"{folder.name}-vocab.txt"
    folder.parent.mkdir(parents=True, exist_ok=True)
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words + letters + hanzi +
                               ["##" + c for c in letters]) + "\n", encoding="utf-8")
    tok = BertTokenizer(str(vocab), do_lower_case=True, model_max_length=512)
    cfg = ChineseCLIPConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=64, pad_token_id=0),
        vision_config=dict(hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
                           image_size=IMAGE_SIZE, patch_size=8),
        projection_dim=16)
    ChineseCLIPModel(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    ChineseCLIPImageProcessor(size={"shortest_edge": IMAGE_SIZE},
                              crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}).save_pretrained(folder)
    return folder


def save_blip(folder: Path, seed: int = 0) -> Path:
    """BLIP's retrieval model (``BlipForImageTextRetrieval``), the checkpoint of both the ``blip`` dual encoder
    (its contrastive head) and the ``blip-itm`` pair scorer (its ITM head): tests/support/tiny_pair_models.py."""
    from support.tiny_pair_models import save_blip_itm

    return save_blip_itm(folder, seed=seed)


SAVERS = {"clip": save_clip, "clip_wide": save_clip_wide, "align": save_align, "altclip": save_altclip,
          "groupvit": save_groupvit, "metaclip2": save_metaclip2, "chinese-clip": save_chinese_clip,
          "blip": save_blip,
          "openclip": save_openclip,
          "openclip_custom_text": lambda folder, seed=0: save_openclip(folder, seed, custom_text=True)}
