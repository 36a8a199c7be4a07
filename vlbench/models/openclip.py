"""The open_clip adapter: any open_clip model, ``ARCH/PRETRAINED_TAG``, ``hf-hub:org/repo`` or a local folder."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ModelError, VlbenchError
from ..registry import close_matches
from .adapter import ModelAdapter, _dir_fingerprint, _load_error, local_fingerprint, openclip_embed_dim, torch_dtype
from .budget import cut_to_budget, openclip_cutter
from .families import OPENCLIP_DEFAULT
from .hub import hub_problem, openclip_repo

__all__ = ["OpenCLIPAdapter", "load_openclip", "fingerprint", "preflight"]


class OpenCLIPAdapter(ModelAdapter):
    name = "openclip"

    def __init__(self, checkpoint: str | None = None, *, device="cpu", precision="fp32", **_):
        import open_clip

        self.checkpoint = checkpoint or OPENCLIP_DEFAULT
        self.precision = precision
        self.device = device
        ck = self.checkpoint
        local = Path(ck).expanduser()
        self._local = None
        try:
            if local.is_dir():
                model_name, pretrained = f"local-dir:{local.resolve()}", None
                self._local = _dir_fingerprint(local)
            elif ck.startswith("hf-hub:"):
                model_name, pretrained = ck, None
            else:
                arch, tag = ck.partition("/")[::2]
                if arch not in open_clip.list_models():
                    m = close_matches(arch, open_clip.list_models())
                    raise ModelError(f"unknown open_clip architecture {arch!r}",
                                     f"did you mean {', '.join(m)}?" if m else "see open_clip.list_models()")
                model_name = arch
                pretrained = None if tag in ("", "random", "none") else tag
                if pretrained and Path(pretrained).expanduser().is_file():
                    self._local = _dir_fingerprint(Path(pretrained).expanduser().parent)
                if tag == "":
                    raise ModelError(f"open_clip checkpoint {ck!r} names no pretrained weights",
                                     f"use ARCH/TAG, e.g. {OPENCLIP_DEFAULT} (or ARCH/random for random weights)")
            self.model, _, self._transform = open_clip.create_model_and_transforms(model_name, pretrained=pretrained)
            self.tokenizer = open_clip.get_tokenizer(model_name)
        except VlbenchError:
            raise
        except Exception as exc:
            raise _load_error("openclip", ck, exc) from exc
        self.random_weights = not pretrained and self._local is None and not ck.startswith("hf-hub:")
        self.model.eval().to(device=device, dtype=torch_dtype(precision))
        self.context_length = getattr(self.tokenizer, "context_length", 77)

    def text_context_length(self) -> int:
        return int(self.context_length)

    def cut_texts(self, texts, budgets):
        return cut_to_budget(list(texts), budgets, *openclip_cutter(self.tokenizer))

    def identity(self) -> dict:
        pp = getattr(getattr(self.model, "visual", None), "preprocess_cfg", None) or {}
        return {
            "adapter": "vlbench.openclip",
            "checkpoint": self.checkpoint,
            "local": self._local,
            "random_weights": self.random_weights,
            "preprocessing": json.loads(json.dumps(pp, default=str)) or repr(self._transform),
            "context_length": self.context_length,
            "precision": self.precision,
            "embed_dim": openclip_embed_dim(self.model),
        }

    def preprocess(self, image):
        return self._transform(image)

    def text_keys(self, texts):
        # rows are padded with 0 after the end-of-text token; 0 is also a real token ("!"), so cut at
        # the end-of-text token instead of dropping zeros
        eot = getattr(self.tokenizer, "eot_token_id", None)
        out = []
        for row in self.tokenizer(list(texts)).tolist():
            if eot is not None and eot in row:
                row = row[:row.index(eot) + 1]
            else:
                while row and row[-1] == 0:
                    row.pop()
            out.append(" ".join(map(str, row)))
        return out

    def encode_images(self, batch):
        import torch

        with torch.inference_mode():
            return self.model.encode_image(batch.to(self.device, dtype=torch_dtype(self.precision)))

    def encode_texts(self, texts):
        import torch

        with torch.inference_mode():
            return self.model.encode_text(self.tokenizer(list(texts)).to(self.device))


def load_openclip(checkpoint=None, *, device="cpu", precision="fp32", **kw):
    return OpenCLIPAdapter(checkpoint, device=device, precision=precision)


# hooks of the family's record (families.py): files, open_clip's tag table and the hub cache, nothing loaded

def fingerprint(checkpoint: str, **_) -> dict | None:
    """A local checkpoint's file digests; None for a named tag (its weights sit in open_clip's own cache)."""
    return local_fingerprint(checkpoint)


def preflight(checkpoint: str, **_) -> list:
    """An hf-hub: id or a tag's hub repository cached or downloadable, or an existing local folder."""
    local = Path(checkpoint).expanduser()
    if checkpoint.startswith("hf-hub:"):
        p = hub_problem(checkpoint[len("hf-hub:"):], "--model openclip:/path/to/folder")
        return [p] if p else []
    if local.exists() or checkpoint.startswith((".", "/", "~")):
        if not local.is_dir():
            return [ModelError(f"local folder {str(local)!r} does not exist",
                               "give a folder with open_clip_config.json and the weights file")]
        return []
    arch, tag = checkpoint.partition("/")[::2]
    if tag in ("", "random", "none") or Path(tag).expanduser().is_file():
        return []
    repo = openclip_repo(arch, tag)
    if repo is None:
        return []  # an unknown tag or a URL-only tag: open_clip itself says what is wrong
    p = hub_problem(repo, "--model openclip:/path/to/folder (with open_clip_config.json)")
    return [p] if p else []
