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


def move_code(folder: Path, where: str, code_dir: Path | None = None) -> None:
    """Take the checkpoint's code out of ``folder``: its ``auto_map`` then names ``where--module.Class`` (a
    local folder or a Hub repository, as jina-clip-v2's names its code repository). ``code_dir``: where the
    files go (the folder ``where`` names); None drops them (a Hub repository holds them, see hub_code_cache)."""
    for name in ("configuration_tinydual.py", "modeling_tinydual.py"):
        if code_dir is not None:
            code_dir.mkdir(parents=True, exist_ok=True)
            shutil.copy(folder / name, code_dir / name)
        (folder / name).unlink()
    cfg = json.loads((folder / "config.json").read_text())
    cfg["auto_map"] = {"AutoConfig": f"{where}--configuration_tinydual.TinyDualConfig",
                       "AutoModel": f"{where}--modeling_tinydual.TinyDualModel"}
    (folder / "config.json").write_text(json.dumps(cfg, indent=1))


def hub_code_cache(cache: Path, repo: str, commit: str, files: dict | None = None) -> Path:
    """The tiny model's code files (or ``files``: name -> text) as the cached snapshot ``commit`` of the Hub
    model repository ``repo`` (huggingface_hub's cache layout, refs/main pointing at it). Returns the snapshot."""
    import hashlib
    import os

    files = files or {n: (CODE / n).read_text() for n in ("configuration_tinydual.py", "modeling_tinydual.py")}
    storage = cache / f"models--{repo.replace('/', '--')}"
    snapshot = storage / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        data = text.encode()
        blob = storage / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        (snapshot / name).symlink_to(os.path.relpath(blob, snapshot))
    (storage / "refs").mkdir(exist_ok=True)
    (storage / "refs" / "main").write_text(commit)
    return snapshot
