"""Model adapters: a narrow protocol that every model (built-in or plug-in) follows.

An adapter turns a PIL image into a model input (``preprocess``, run in DataLoader workers),
encodes a batch of those inputs (``encode_images``), encodes a list of caption strings
(``encode_texts``, truncating by tokens with the model's own tokenizer), and describes itself
(``identity``). The runner owns batching, device placement, precision, L2 normalization and caching,
so all adapters behave the same.

Built-ins: ``clip``, ``align``, ``altclip``, ``groupvit`` (Hugging Face transformers) and
``openclip`` (open_clip). Syntax: ``NAME[:CHECKPOINT]``; CHECKPOINT is a hub id, a local folder, or
for open_clip ``ARCH/PRETRAINED_TAG`` (``openclip:ViT-B-32/laion2b_s34b_b79k``), ``hf-hub:org/repo``
or a local folder with ``open_clip_config.json``.

Plug-ins register a factory in the entry-point group ``vlbench.models``; the factory is called as
``factory(checkpoint_or_None, device=..., precision=..., trust_remote_code=...)`` and returns a
:class:`ModelAdapter`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Sequence

from .._paths import offline
from ..errors import ModelError, VlbenchError
from ..registry import models as MODELS

EMBED_CODE_VERSION = "2"  # bump when the encoding code changes what a vector is
PRECISIONS = ("fp32", "fp16", "bf16")


class ModelAdapter:
    """Base class and protocol of a model adapter."""

    name: str = "model"

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

    def encode_texts(self, texts: list[str]):  # -> (n, d) tensor or array
        raise NotImplementedError

    def text_keys(self, texts: list[str]) -> list[str]:
        """What the model really sees of each text (after truncation): used to de-duplicate and as
        cache key. Default: the text itself."""
        return list(texts)

    def text_lengths(self, texts: list[str]) -> list[int]:
        """Lengths used to batch texts of similar length together (less padding)."""
        return [len(t) for t in texts]

    def model_identity(self):
        """The typed, frozen form of ``identity()`` (vlbench.benchmark.identity.ModelIdentity)."""
        from .identity import ModelIdentity

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
    cached vectors (issue #12); ctime cannot be set back by a user and a rename gives a new inode.
    """
    from .._io import atomic_write_text
    from .._paths import cache_root

    memo_path = cache_root() / "file-digests.json"
    try:
        memo = json.loads(memo_path.read_text())
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
    if changed:
        try:
            atomic_write_text(memo_path, json.dumps(memo))
        except OSError:
            pass
    return {"local_path": str(path.resolve()), "content_sha256": h.hexdigest()}


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


# ---------------------------------------------------------------------------------------------
# Hugging Face transformers dual encoders

HF_FAMILIES = {
    "clip": ("CLIPModel", "openai/clip-vit-base-patch32", "OpenAI CLIP (transformers)"),
    "align": ("AlignModel", "kakaobrain/align-base", "ALIGN (transformers)"),
    "altclip": ("AltCLIPModel", "BAAI/AltCLIP", "AltCLIP (transformers)"),
    "groupvit": ("GroupViTModel", "nvidia/groupvit-gcc-yfcc", "GroupViT (transformers)"),
}


class HFDualEncoder(ModelAdapter):
    def __init__(self, family: str, checkpoint: str | None = None, *, device: str = "cpu", precision: str = "fp32",
                 revision: str | None = None, trust_remote_code: bool = False):
        import transformers

        cls_name, default_ckpt, _ = HF_FAMILIES[family]
        self.name = family
        self.checkpoint = checkpoint or default_ckpt
        self.precision = precision
        self.device = device
        source = str(Path(self.checkpoint).expanduser()) if Path(self.checkpoint).expanduser().exists() \
            else self.checkpoint
        kw = dict(revision=revision, trust_remote_code=trust_remote_code)
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(source, **kw)
            self.image_processor = transformers.AutoImageProcessor.from_pretrained(source, **kw)
            self.config = transformers.AutoConfig.from_pretrained(source, **kw)
        except VlbenchError:
            raise
        except Exception as exc:
            raise _load_error(family, self.checkpoint, exc) from exc
        if len(self.tokenizer) < 10:  # offline CLIPTokenizer trap: an almost empty vocabulary
            raise ModelError(f"the tokenizer of {self.checkpoint!r} loaded with only {len(self.tokenizer)} tokens",
                             "the tokenizer files are missing: re-download the checkpoint")
        # the weights load on first use: a fully cached (warm) run never needs them
        self._model = None
        self._load_args = (cls_name, source, kw)
        cfg = self.config
        text_cfg = getattr(cfg, "text_config", None)
        limits = [getattr(text_cfg, "max_position_embeddings", None), getattr(self.tokenizer, "model_max_length", None)]
        limits = [x for x in limits if isinstance(x, int) and 0 < x < 100_000]
        self.max_length = min(limits) if limits else 77
        if family == "altclip":  # XLM-R positions start after the padding index
            pad = getattr(text_cfg, "pad_token_id", 1) or 1
            self.max_length = min(self.max_length, getattr(text_cfg, "max_position_embeddings", 514) - pad - 1)
        self._local = _dir_fingerprint(Path(source)) if Path(source).exists() else None
        # the resolved commit, not a moving branch name: new weights on "main" get a new hash
        self.requested_revision = revision
        self.revision = getattr(cfg, "_commit_hash", None) or revision

    @property
    def model(self):
        if self._model is None:
            import transformers

            cls_name, source, kw = self._load_args
            try:
                model = getattr(transformers, cls_name).from_pretrained(source, **kw)
            except Exception as exc:
                raise _load_error(self.name, self.checkpoint, exc) from exc
            self._model = model.eval().to(device=self.device, dtype=torch_dtype(self.precision))
        return self._model

    def identity(self) -> dict:
        ip = self.image_processor
        pre = {k: getattr(ip, k, None) for k in ("size", "crop_size", "do_center_crop", "do_resize", "resample",
                                                   "image_mean", "image_std", "do_normalize", "rescale_factor")}
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
            "embed_dim": int(getattr(self.config, "projection_dim", 0) or 0),
        }

    def preprocess(self, image):
        return self.image_processor(images=image, return_tensors="pt")["pixel_values"][0]

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


def _hf_factory(family):
    def factory(checkpoint=None, *, device="cpu", precision="fp32", revision=None, trust_remote_code=False, **_):
        return HFDualEncoder(family, checkpoint, device=device, precision=precision, revision=revision,
                             trust_remote_code=trust_remote_code)
    factory.__name__ = f"load_{family}"
    return factory


load_clip = _hf_factory("clip")
load_align = _hf_factory("align")
load_altclip = _hf_factory("altclip")
load_groupvit = _hf_factory("groupvit")


# ---------------------------------------------------------------------------------------------
# open_clip

OPENCLIP_DEFAULT = "ViT-B-32/laion2b_s34b_b79k"


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
                arch, _, tag = ck.partition("/")
                if arch not in open_clip.list_models():
                    from ..registry import close_matches
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


for _fam, (_cls, _default, _desc) in HF_FAMILIES.items():
    MODELS.register(_fam, f"vlbench.benchmark.models:load_{_fam}", description=f"{_desc}; default {_default}")
MODELS.register("openclip", "vlbench.benchmark.models:load_openclip",
                description=f"any open_clip model, ARCH/TAG; default {OPENCLIP_DEFAULT}")


def parse_model_spec(spec: str) -> tuple[str, str | None]:
    name, sep, ckpt = spec.partition(":")
    return name.strip(), (ckpt.strip() or None) if sep else None


def load_model(spec: str, *, device: str | None = None, precision: str = "fp32", trust_remote_code: bool = False,
               revision: str | None = None) -> ModelAdapter:
    """Load ``NAME[:CHECKPOINT]`` through the registry (built-ins and plug-ins alike)."""
    name, ckpt = parse_model_spec(spec)
    factory = MODELS.get(name)  # unknown name -> close matches
    device = pick_device(device)
    torch_dtype(precision)
    if precision == "fp16" and device == "cpu":
        raise VlbenchError("fp16 is not supported on the CPU by many kernels",
                           "use --precision fp32 or bf16 on the CPU (fp16 on CUDA)")
    kwargs = dict(device=device, precision=precision, trust_remote_code=trust_remote_code)
    if revision:
        kwargs["revision"] = revision
    try:
        adapter = factory(ckpt, **kwargs)
    except VlbenchError:
        raise
    except Exception as exc:
        raise ModelError(f"model {spec!r} failed to load: {type(exc).__name__}: {exc}",
                         "check the checkpoint name or path; run 'vlbench ls' for the model names") from exc
    if not isinstance(adapter, ModelAdapter):
        missing = [m for m in ("identity", "encode_images", "encode_texts") if not hasattr(adapter, m)]
        if missing:
            raise ModelError(f"model plug-in {name!r} returned an object without {', '.join(missing)}",
                             "subclass vlbench.benchmark.models.ModelAdapter")
    adapter.spec = spec
    adapter.device = getattr(adapter, "device", device)
    return adapter
