"""Model adapters: a narrow protocol that every model (built-in or plug-in) follows.

An adapter turns a PIL image into a model input (``preprocess``, run in DataLoader workers),
encodes a batch of those inputs (``encode_images``), encodes a list of caption strings
(``encode_texts``, truncating by tokens with the model's own tokenizer), and describes itself
(``identity``). The runner owns batching, device placement, precision, L2 normalization and caching,
so all adapters behave the same.

Built-ins: ``clip``, ``align``, ``altclip``, ``groupvit``, ``metaclip2``, ``chinese-clip``, ``blip``, ``siglip``,
``siglip2`` (Hugging Face transformers), ``openclip`` (open_clip) and ``st`` (sentence-transformers). Syntax:
``NAME[:CHECKPOINT]``; CHECKPOINT is a hub id, a local folder, for open_clip ``ARCH/PRETRAINED_TAG``
(``openclip:ViT-B-32/laion2b_s34b_b79k``), ``hf-hub:org/repo`` or a local folder with
``open_clip_config.json``, for SigLIP optionally followed by ``?lowercase=0`` etc. (siglip.py).

The adapters of the built-ins live one module per kind: hf.py (transformers dual encoders), siglip.py,
openclip.py and st.py; each family is one record (families.py: loader, default checkpoint, warm-run fingerprint,
preflight check, static metadata) registered in ``vlbench.registry.models``; this module holds the
protocol, the shared helpers and ``load_model``.

Plug-ins register a factory, or a :class:`~vlbench.models.families.ModelFamily` record, in the
entry-point group ``vlbench.models``; the factory is called as ``factory(checkpoint_or_None,
device=..., precision=..., trust_remote_code=...)`` and returns a :class:`ModelAdapter`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import stores
from ..errors import ModelError, VlbenchError
from ..util.io import cache_write_bytes
from ..util.paths import offline
from .families import model_family  # the built-in family records register themselves here
from .identity import ModelIdentity
from .mllm.formats import instruction_refusal

EMBED_CODE_VERSION = "2"  # bump when the encoding code changes what a vector is
PRECISIONS = ("fp32", "fp16", "bf16")


class ModelAdapter:
    """Base class and protocol of a model adapter."""

    name: str = "model"
    device: str  # where the loaded model runs ("cpu", "cuda:0"); set by each adapter

    def identity(self) -> dict:
        """JSON-able description of everything that changes a vector (checkpoint, revision,
        preprocessing, precision, embedding size, ...)."""
        raise NotImplementedError

    def preprocess(self, image):  # PIL.Image (RGB) -> model input; runs in worker processes
        return image

    def collate(self, items: Sequence[Any]):
        import torch

        if items and isinstance(items[0], torch.Tensor):
            return torch.stack(list(items))
        return list(items)

    def encode_images(self, batch):  # -> (n, d) tensor or array
        raise NotImplementedError

    # the pixel split (encoding/pixels.py): optional; an adapter that has it shares decoded pixels with every
    # model of the same spec (the preprocessed-pixel cache) and can take pixels made on the device (--pixels)

    def pixel_spec(self) -> dict | None:
        """JSON-able description of everything that makes the uint8 pixels before normalisation (sizes,
        interpolation, crop, the resampling library and its version), or None: no pixel split (default)."""
        return None

    def to_pixels(self, image):
        """A decoded image (PIL RGB, or a uint8 C x H x W tensor, possibly on the device) -> the uint8
        C x H x W pixels of the model input before normalisation; a list of tensors -> N x C x H x W."""
        raise NotImplementedError

    def from_pixels(self, batch):
        """A uint8 N x C x H x W batch of :meth:`to_pixels` outputs -> the batch :meth:`encode_images` takes,
        equal bit for bit to collating :meth:`preprocess` of the same images."""
        raise NotImplementedError

    def encode_texts(self, texts: list[str]):  # -> (n, d) tensor or array
        raise NotImplementedError

    def text_keys(self, texts: list[str]) -> list[str]:
        """What the model really sees of each text (after truncation): used to de-duplicate and as
        cache key. Default: the text itself."""
        return list(texts)

    def text_lengths(self, texts: list[str]) -> list[int]:
        """Lengths used to batch texts of similar length together (less padding)."""
        return [len(t) for t in texts]

    def text_context_length(self) -> int | None:
        """The most text tokens the model reads (its own truncation), or None when not known."""
        return None

    def cut_texts(self, texts: list[str], budgets: list[int]) -> tuple[dict[int, list[str]], list[int]]:
        """``--token-budget``: {budget: each text cut to that many tokens of the model's own tokenizer, end token
        kept} (models/budget.py; each text tokenized once), and each text's full token count. A family that
        cannot tell says so."""
        raise ModelError(f"model family {self.name!r} cannot cut captions to a token budget",
                         "use --token-budget with clip, align, altclip, groupvit, metaclip2, chinese-clip, blip, "
                         "openclip, siglip, siglip2 or "
                         "remote (api=features); a plug-in adapter implements cut_texts (docs/extending.md)")

    def model_identity(self):
        """The typed, frozen form of ``identity()`` (vlbench.models.identity.ModelIdentity)."""
        return ModelIdentity.from_dict(self.identity())

    def model_hash(self) -> str:
        return self.model_identity().hash(EMBED_CODE_VERSION)


# ---------------------------------------------------------------------------------------------
# helpers

def pick_device(device: str | None = None) -> str:
    import torch

    if device and device != "auto":
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise VlbenchError(f"--device {device} was asked for but CUDA is not available",
                               "use --device cpu, or install a CUDA build of torch on a GPU machine")
        return device
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def torch_dtype(precision: str):
    import torch

    if precision not in PRECISIONS:
        raise VlbenchError(f"unknown precision {precision!r}", f"use one of {', '.join(PRECISIONS)}")
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]


def openclip_embed_dim(model) -> int:
    """Joint embedding size of an open_clip model: CLIP keeps ``text_projection`` on the model, a
    CustomTextCLIP (custom or Hugging Face text tower) keeps it inside ``model.text``; the image
    tower's ``output_dim`` is the same number for both."""
    for value in (getattr(model, "embed_dim", None), getattr(getattr(model, "visual", None), "output_dim", None)):
        if isinstance(value, int) and value > 0:
            return value
    proj = getattr(model, "text_projection", None)
    if proj is None:
        proj = getattr(getattr(model, "text", None), "text_projection", None)
    shape = getattr(proj, "shape", None) or (getattr(proj, "out_features", None),)
    return int(shape[-1] or 0)


def _dir_fingerprint(path: Path) -> dict:
    """Content hash of a local checkpoint folder's files (weights included).

    Hashing multi-GB weights on every run would cost seconds, so digests are remembered per file
    (path, inode, size, mtime and ctime) in the cache folder; a changed file is hashed again. ctime
    and the inode are in the key because size + mtime alone let a same-size replacement whose mtime
    was restored (``cp -p``, ``touch -d``, an unpacked archive) reuse the old digest and so the old
    cached vectors; ctime cannot be set back by a user and a rename gives a new inode.
    """
    memo_path = stores.path("file-digests") / "digests.json"  # the current cache root (stores.using)
    keep = stores.on_disk()  # a --no-cache run neither reads nor writes the memo
    try:
        memo = json.loads(memo_path.read_text()) if keep else {}
    except (OSError, ValueError):
        memo = {}
    changed = False
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
    for p in files:
        st = p.stat()
        key = f"{p.resolve()}|{st.st_ino}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}"
        digest = memo.get(key)
        if digest is None:
            fh_hash = hashlib.sha256()
            with open(p, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    fh_hash.update(block)
            digest = memo[key] = fh_hash.hexdigest()
            changed = True
        h.update(f"{p.relative_to(path)}\0{digest}\0".encode())
    if changed and keep:
        try:
            cache_write_bytes(memo_path, json.dumps(memo).encode())
        except OSError:
            pass
    return {"local_path": str(path.resolve()), "content_sha256": h.hexdigest()}


def local_fingerprint(checkpoint: str | None) -> dict | None:
    """``{"local": content digests}`` of a local checkpoint (a folder, or the folder of a weights file),
    for a family's fingerprint hook; None when ``checkpoint`` is not a local path."""
    if not checkpoint or not Path(checkpoint).expanduser().exists():
        return None
    p = Path(checkpoint).expanduser()
    return {"local": _dir_fingerprint(p if p.is_dir() else p.parent)}


def _as_features(out):
    """transformers 4.x returns a tensor from get_*_features, 5.x an output with pooler_output."""
    import torch

    if isinstance(out, torch.Tensor):
        return out
    for attr in ("pooler_output", "text_embeds", "image_embeds"):
        val = getattr(out, attr, None)
        if isinstance(val, torch.Tensor):
            return val
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    raise ModelError(f"the model returned {type(out).__name__}, not an embedding tensor",
                     "report this with the model name and transformers version")


def load_eval_model(name: str, checkpoint, cls_name: str, source, kw: dict, device, precision: str):
    """A transformers model class's ``from_pretrained`` in eval mode on ``device`` at ``precision``; a failure is the
    family's load error (what the dual encoders and the pair scorers both load through)."""
    import transformers  # lazy: heavy, and only when the weights are first needed

    try:
        model = getattr(transformers, cls_name).from_pretrained(source, **kw)
    except Exception as exc:
        raise _load_error(name, checkpoint, exc) from exc
    return model.eval().to(device=device, dtype=torch_dtype(precision))


class LazyWeights:
    """The ``model`` property of the transformers-based adapters: the weights loaded on first use (a warm run never
    needs them) from ``_load_args`` = (class name, source, from_pretrained keywords), in eval mode at the adapter's
    device and precision."""

    _model: Any = None
    _load_args: tuple
    name: str
    checkpoint: str
    device: Any
    precision: str

    @property
    def model(self):
        if self._model is None:
            cls_name, source, kw = self._load_args
            self._model = load_eval_model(self.name, self.checkpoint, cls_name, source, kw, self.device,
                                          self.precision)
        return self._model


def checkpoint_source(checkpoint: str) -> str:
    """Where ``from_pretrained`` reads a checkpoint: a local folder's expanded path when it exists, else the
    checkpoint as given (a hub id)."""
    local = Path(checkpoint).expanduser()
    return str(local) if local.exists() else checkpoint


def load_parts(family: str, checkpoint: str, source: str, kw: dict, *loaders) -> tuple:
    """``loader.from_pretrained(source, **kw)`` of each loader in order (configs, processors, tokenizers); a failure
    is the family's load error naming the checkpoint and the fix."""
    try:
        return tuple(loader.from_pretrained(source, **kw) for loader in loaders)
    except VlbenchError:
        raise
    except Exception as exc:
        raise _load_error(family, checkpoint, exc) from exc


def check_vocabulary(tokenizer, checkpoint: str) -> None:
    """The offline tokenizer trap: a tokenizer that loads with an almost empty vocabulary (its files missing)."""
    if len(tokenizer) < 10:
        raise ModelError(f"the tokenizer of {checkpoint!r} loaded with only {len(tokenizer)} tokens",
                         "the tokenizer files are missing: re-download the checkpoint")


def family_loader(cls, family: str, **fixed):
    """The registry's loader of one family of ``cls``: ``loader(checkpoint, device=, precision=, revision=,
    trust_remote_code=)`` builds ``cls(family, checkpoint, ...)`` (the registry may pass more keywords: ignored)."""
    def loader(checkpoint=None, *, device="cpu", precision="fp32", revision=None, trust_remote_code=False, **_):
        return cls(family, checkpoint, device=device, precision=precision, revision=revision,
                   trust_remote_code=trust_remote_code, **fixed)
    loader.__name__ = f"load_{family.replace('-', '_')}"
    return loader


#: the image processor's settings that change pixels: part of a transformers model's identity
PROCESSOR_KEYS = ("size", "crop_size", "do_center_crop", "do_resize", "resample", "image_mean", "image_std",
                  "do_normalize", "rescale_factor")


def _load_error(kind: str, checkpoint: str, exc: Exception) -> ModelError:
    local = Path(checkpoint).expanduser()
    if local.exists():
        return ModelError(f"could not load {kind} from local folder {checkpoint!r}: {type(exc).__name__}: {exc}",
                          "check that the folder holds a complete save_pretrained() export "
                          "(config, weights, tokenizer and image-processor files)")
    how = (f"run once with network access (or 'hf download {checkpoint}') to fill the Hugging Face cache, "
           f"or pass a local folder: --model NAME:/path/to/{checkpoint.split('/')[-1]}")
    if offline():
        return ModelError(f"{kind} checkpoint {checkpoint!r} is not in the local Hugging Face cache and "
                          f"offline mode is on", how)
    return ModelError(f"could not load {kind} checkpoint {checkpoint!r}: {type(exc).__name__}: {str(exc)[:300]}",
                      how)


def parse_model_spec(spec: str) -> tuple[str, str | None]:
    name, sep, ckpt = spec.partition(":")
    return name.strip(), (ckpt.strip() or None) if sep else None


def load_model(spec: str, *, device: str | None = None, precision: str = "fp32", trust_remote_code: bool = False,
               revision: str | None = None) -> ModelAdapter:
    """Load ``NAME[:CHECKPOINT]`` through the registry (built-ins and plug-ins alike)."""
    name, ckpt = parse_model_spec(spec)
    family = model_family(name)  # unknown name -> close matches
    refusal = instruction_refusal(name, ckpt)  # an instruction on a model that takes none
    if refusal is not None:
        raise refusal
    device = pick_device(device)
    torch_dtype(precision)
    if precision == "fp16" and device == "cpu":
        raise VlbenchError("fp16 is not supported on the CPU by many kernels",
                           "use --precision fp32 or bf16 on the CPU (fp16 on CUDA)")
    kwargs = dict(device=device, precision=precision, trust_remote_code=trust_remote_code)
    if revision:
        kwargs["revision"] = revision
    try:
        adapter = family.load_fn()(ckpt or family.default_checkpoint, **kwargs)
    except VlbenchError:
        raise
    except Exception as exc:
        raise ModelError(f"model {spec!r} failed to load: {type(exc).__name__}: {exc}",
                         "check the checkpoint name or path; run 'vlbench ls' for the model names") from exc
    if not isinstance(adapter, ModelAdapter):
        missing = [m for m in ("identity", "encode_images", "encode_texts") if not hasattr(adapter, m)]
        if missing:
            raise ModelError(f"model plug-in {name!r} returned an object without {', '.join(missing)}",
                             "subclass vlbench.models.adapter.ModelAdapter")
    adapter.spec = spec
    adapter.device = getattr(adapter, "device", device)
    return adapter
