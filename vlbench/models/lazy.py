"""A model handle that loads the model only when something must really be encoded.

A warm run (every embedding already cached) needs three things from a model: its identity and hash,
and the key of each caption (its token ids after truncation). Importing torch and transformers and
loading a checkpoint costs seconds, more than the rest of a warm run, so these are remembered in the
cache folder:

* ``models/<key>.json``: identity and model hash, keyed by a cheap fingerprint of the model spec
  (the spec, precision, flags, and for a local checkpoint the content digests of its files as
  memoized by ``_dir_fingerprint``; for a hub id, the commit of the locally cached snapshot);
* ``text-keys/<model hash>/<digest of the text list>.npy``: the key of every caption of a run.

Anything that is not remembered, or any encoding, loads the real adapter, exactly as without this
layer; the values stored are the ones that adapter computed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .. import stores
from ..errors import ModelError
from ..registry import models as MODELS
from ..util.env import decoder_versions
from ..util.io import cache_write_bytes, sha256_json
from .adapter import EMBED_CODE_VERSION, ModelAdapter, load_model, parse_model_spec, pick_device
from .families import model_family
from .identity import ModelIdentity


def fingerprint(spec: str, *, precision: str, trust_remote_code: bool, revision: str | None,
                pixels: str = "reference", device_kind: str = "cpu") -> str | None:
    """A cheap key of everything that decides the model's identity, or None (no fast path).

    The family's own ``fingerprint`` hook (families.py) adds what only it knows (local file digests, the
    cached hub commit); a family without the hook (a plug-in's plain loader) is always loaded."""
    name, ckpt = parse_model_spec(spec)
    family = model_family(name)
    hook = family.hook("fingerprint")
    if hook is None:
        return None
    extra = hook(ckpt or family.default_checkpoint, family=name, revision=revision, precision=precision,
                 trust_remote_code=trust_remote_code)
    if extra is None:
        return None
    base = {"spec": spec, "precision": precision, "trust_remote_code": trust_remote_code, "revision": revision,
            "embed_code": EMBED_CODE_VERSION, **extra}
    if device_kind != "cpu":  # vectors made on an accelerator: another identity (the CPU's key is unchanged)
        base["device"] = device_kind
    if pixels != "reference":  # --pixels device: another identity (the reference path's key is unchanged)
        base["pixels"] = pixels
        base["pixel_decoders"] = decoder_versions(pixels)  # a decoder upgrade: another key
    source = MODELS.entry(name).source
    if source != "builtin":  # a plug-in's new version may compute other vectors: never reuse across versions
        base["source"] = source
    return sha256_json(base)


def default_threads() -> int:
    """The CPU threads of a model's forward when the run names none (``--threads``): the cores this process may
    use (its CPU affinity), the same for a run made alone and for the same run in a sweep's worker, whichever
    executor started it (an executor's ``OMP_NUM_THREADS`` per worker does not count: a CPU forward's numbers
    depend on its thread count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this platform
        return max(1, os.cpu_count() or 1)


def use_threads(threads: int | None) -> int:
    """Make torch's CPU forward use ``threads`` (None: :func:`default_threads`) if torch is imported; the count."""
    n = int(threads) if threads else default_threads()
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n


class LazyModel(ModelAdapter):
    def __init__(self, spec: str, cache_root: Path | None, *, reuse: bool = True, before_load=None, **load_kwargs):
        """``before_load``: called before a model that is not remembered is loaded here, at once (the run's
        image headers: a bad image is refused before torch and the weights take their memory). ``threads``: the
        CPU threads of every forward pass (None: :func:`default_threads`), set before each one."""
        self.spec = spec
        self.name = parse_model_spec(spec)[0]
        self.threads = load_kwargs.pop("threads", None)
        #: which path makes the image pixels (encoding/device_pixels.py): part of the identity unless "reference"
        self.pixels = load_kwargs.pop("pixels", None) or "reference"
        self._kw = load_kwargs
        #: the kind of device the vectors are made on (cpu, cuda, mps): part of the identity unless "cpu", so a
        #: GPU run never reuses (or resumes from) vectors a CPU run cached, nor the other way round: the two agree
        #: only within a tolerance (docs/metrics.md). CPU caches made before this keep their keys.
        self.device_kind = pick_device(load_kwargs.get("device")).split(":")[0]
        self._real: ModelAdapter | None = None
        self._root = Path(cache_root) if cache_root else None
        self._resolved: dict | None = None
        self._fp: str | None = None
        if self._root is not None and reuse:
            self._fp = fingerprint(spec, precision=load_kwargs.get("precision", "fp32"),
                                   trust_remote_code=load_kwargs.get("trust_remote_code", False),
                                   revision=load_kwargs.get("revision"), pixels=self.pixels,
                                   device_kind=self.device_kind)
            if self._fp:
                try:
                    self._resolved = json.loads(self._memo_path().read_text())
                except (OSError, ValueError):
                    self._resolved = None
        if self._resolved is None:
            if before_load is not None:
                before_load()
            _ = self.real  # unknown model: load now (errors surface before any work)

    def _memo_path(self) -> Path:
        assert self._fp is not None  # called only once the model has a fingerprint
        return stores.path("model-identity", self._root) / f"{self._fp[:32]}.json"

    @property
    def loaded(self) -> bool:
        return self._real is not None

    @property
    def real(self) -> ModelAdapter:
        if self._real is None:
            # a local checkpoint's file digests: under this cache root too (none kept without one: --no-cache)
            with stores.using(self._root, disk=self._root is not None):
                self._real = load_model(self.spec, **self._kw)
            if self._root is not None and self._fp:
                ident = self._identity_of(self._real)
                digest = self._real.model_hash() if self._plain else self._hash_of(ident)
                rec: dict[str, Any] = {"identity": ident, "model_hash": digest, "spec": self.spec}
                stale = self._resolved is not None and self._resolved.get("model_hash") != rec["model_hash"]
                if self._resolved is None or stale:
                    cache_write_bytes(self._memo_path(), json.dumps(rec, sort_keys=True, default=str).encode())
                if stale and self._resolved is not None:  # e.g. a library upgrade changed the preprocessing
                    raise ModelError(f"model {self.spec!r} now has another identity than the one remembered from "
                                     f"an earlier run (hash {self._resolved['model_hash'][:12]} -> "
                                     f"{rec['model_hash'][:12]})", "run the same command again: it will use the "
                                     "new identity and encode under it")
                self._resolved = json.loads(json.dumps(rec, default=str))
        return self._real

    @property
    def device(self):  # type: ignore[override]  # read-only here
        """The loaded model's device; a model not loaded (a warm run: every vector from the cache): the device it
        would be loaded on, resolved as loading resolves it (--device, else CUDA, MPS or the CPU), which is where
        the warm run computes its similarities, so results.json records the device the run ran on."""
        return self._real.device if self._real is not None else self.scoring_device()

    def scoring_device(self) -> str:
        """The device the loaded model runs (or would run) on, without loading it: a warm run that loads no
        model computes its similarities where the cold run did, so both give the same numbers bit for bit."""
        return str(self._real.device) if self._real is not None else pick_device(self._kw.get("device"))

    def preprocessed_shape(self, size: tuple[int, int]) -> tuple | None:
        """The shape of ``preprocess`` of a blank RGB image of ``size`` (width, height), remembered beside the
        identity: what an image condition reads to fit its geometry to the model's input (a warm run whose
        vectors are all cached then loads no model for it). None: the output has no shape (a dict, a list)."""
        name = f"{int(size[0])}x{int(size[1])}"
        shapes = (self._resolved or {}).get("preprocessed_shapes") or {}
        if name in shapes:
            return None if shapes[name] is None else tuple(shapes[name])
        from PIL import Image  # lazy: only image conditions ask, and they have decoded images already

        probe = Image.new("RGB", (int(size[0]), int(size[1])), (128, 128, 128))
        shape = getattr(self.real.preprocess(probe), "shape", None)
        found = None if shape is None else [int(x) for x in shape]
        if self._root is not None and self._fp and self._resolved is not None:
            self._resolved = {**self._resolved, "preprocessed_shapes": {**shapes, name: found}}
            cache_write_bytes(self._memo_path(), json.dumps(self._resolved, sort_keys=True, default=str).encode())
        return None if found is None else tuple(found)

    @property
    def _plain(self) -> bool:
        """Whether the identity is the adapter's own (reference pixels on the CPU): existing caches stay valid."""
        return self.pixels == "reference" and self.device_kind == "cpu"

    def _identity_of(self, real: ModelAdapter) -> dict:
        ident = real.identity()
        if self.device_kind != "cpu":
            ident = {**ident, "device": self.device_kind}
        if self.pixels == "reference":  # unchanged, so existing caches stay valid (decoders: the pixel spec)
            return ident
        return {**ident, "pixels": self.pixels, "pixel_decoders": decoder_versions(self.pixels)}

    def _hash_of(self, ident: dict) -> str:
        return ModelIdentity.from_dict(ident).hash(EMBED_CODE_VERSION)

    def identity(self):
        return self._resolved["identity"] if self._resolved else self._identity_of(self.real)

    def model_hash(self):
        if self._resolved:
            return self._resolved["model_hash"]
        return self.real.model_hash() if self._plain else self._hash_of(self.identity())

    def text_keys(self, texts):
        """Digests of the model's own text keys (token ids after truncation), remembered per text list."""
        if self._root is None:
            return ["d:" + hashlib.sha256(k.encode("utf-8", "surrogatepass")).hexdigest()
                    for k in self.real.text_keys(texts)]
        h = hashlib.sha256()
        for t in texts:  # length-prefixed: no two different lists give the same byte stream
            b = t.encode("utf-8", "surrogatepass")
            h.update(len(b).to_bytes(8, "little") + b)
        path = stores.path("text-keys", self._root) / self.model_hash()[:16] / f"{h.hexdigest()[:32]}.npy"
        if path.is_file():
            try:
                keys = np.load(path, allow_pickle=False)
                if len(keys) == len(texts):
                    return [k.decode() for k in keys.tolist()]
            except (OSError, ValueError):
                pass
        keys = self.real.text_keys(texts)
        digests = [hashlib.sha256(k.encode("utf-8", "surrogatepass")).hexdigest() for k in keys]
        buf = io.BytesIO()
        np.save(buf, np.array(["d:" + d for d in digests], dtype="S66"), allow_pickle=False)
        cache_write_bytes(path, buf.getvalue())
        return ["d:" + d for d in digests]

    # everything else needs the real model
    def preprocess(self, image):
        return self.real.preprocess(image)

    def collate(self, items):
        return self.real.collate(items)

    def _forward(self) -> ModelAdapter:
        """The real model, torch's threads set to the run's count (another run in this process may have changed
        them)."""
        real = self.real
        use_threads(self.threads)
        return real

    def encode_images(self, batch):
        return self._forward().encode_images(batch)

    def attention_implementation(self):
        fn = getattr(self._real, "attention_implementation", None)
        return fn() if callable(fn) else None

    def pixel_spec(self):
        return self.real.pixel_spec()

    def to_pixels(self, image):
        return self.real.to_pixels(image)

    def from_pixels(self, batch):
        return self._forward().from_pixels(batch)

    def encode_texts(self, texts):
        return self._forward().encode_texts(texts)

    def text_lengths(self, texts):
        return self.real.text_lengths(texts)

    def text_context_length(self):
        return self.real.text_context_length()

    def cut_texts(self, texts, budgets):
        return self.real.cut_texts(texts, budgets)
