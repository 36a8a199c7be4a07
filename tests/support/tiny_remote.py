"""A tiny checkpoint that ships its own code (issue #33 item 3): config.json with ``auto_map`` naming the
configuration and modeling files in the folder (tests/support/remote_code/), random weights saved with
save_pretrained, and a CLIP tokenizer (248 tokens, as Long-CLIP reads) and image processor, so transformers'
AutoModel path loads it as it loads jina-clip-v2 or FG-CLIP 2 from the Hub."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

CODE = Path(__file__).parent / "remote_code"
CONTEXT = 248


def save_remote(folder: Path, seed: int = 0) -> Path:
    import torch
    import transformers

    from support.tiny_models import IMAGE_SIZE, _clip_image_processor, _clip_tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    for name in ("configuration_tinydual.py", "modeling_tinydual.py"):
        shutil.copy(CODE / name, folder / name)
    (folder / "config.json").write_text(json.dumps({
        "model_type": "tiny-dual", "dim": 16, "image_size": IMAGE_SIZE, "max_position_embeddings": CONTEXT,
        "vocab_size": 49408, "auto_map": {"AutoConfig": "configuration_tinydual.TinyDualConfig",
                                          "AutoModel": "modeling_tinydual.TinyDualModel"}}, indent=1))
    torch.manual_seed(seed)
    config = transformers.AutoConfig.from_pretrained(str(folder), trust_remote_code=True)
    model = transformers.AutoModel.from_config(config, trust_remote_code=True)
    model.save_pretrained(str(folder))
    tok = _clip_tokenizer(folder / "_bpe")
    tok.model_max_length = CONTEXT
    tok.save_pretrained(str(folder))
    shutil.rmtree(folder / "_bpe", ignore_errors=True)
    _clip_image_processor().save_pretrained(str(folder))
    return folder
