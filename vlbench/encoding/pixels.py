"""The preprocessed-pixel cache: each image's model input before normalisation, decoded once for every model.

Most models share a preprocessing (CLIP's shorter side to 224 bicubic + centre crop covers CLIP, most
open_clip-style and ALIGN-like checkpoints at their sizes); only the normalisation that follows differs. An
adapter that can split its preprocessing there says so (:meth:`vlbench.models.adapter.ModelAdapter.pixel_spec`,
``to_pixels``, ``from_pixels``): ``to_pixels`` makes the uint8 C x H x W array from the decoded image,
``from_pixels`` normalises a stacked batch of them on the model's device. The encode step then always goes
through that split (with or without the cache), so the model input is the same whichever way the pixels came;
tests/unit/encoding/test_pixels.py checks it equals the adapter's ``preprocess`` bit for bit.

Layout: ``<cache root>/pixels/<spec hash[:16]>/<key[:2]>/<key>.npz``; one file per image (the pixels of one
image are what a DataLoader worker reads, so a batch can mix cached and decoded images and stays the batch the
encoder would have made). The key is the image's content key (or, for an image condition, the condition's
key of the transformed image, which names the transform, its parameters and the content). The spec hash
covers the adapter's preprocessing description (sizes, interpolation, crop, the resampling library and its
version), vlbench's decoding rules and the decoder libraries' versions (:func:`decoder_versions`: Pillow and
the libjpeg(-turbo) it decodes JPEGs with); every model with the same spec shares the folder. A decoder
upgrade that changes a pixel therefore names another folder instead of serving pixels of the old decoder.

Each file proves its content as an embedding shard does: a sha256 over the spec hash, the key, the shape and
the bytes (:func:`pixel_checksum`), checked on every read. A file that fails is not used: it is moved aside as
``<name>.npz.damaged``, counted (``bad``) and its image decoded again. A file removed meanwhile (``vlbench
cache clear`` during a run) is a miss. Writes are atomic; a write whose folder vanished under a concurrent
clear is retried once and otherwise skipped (the cache is an optimisation, never a reason to fail a run).
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import stores
from ..util.env import decoder_versions
from ..util.io import cache_write_bytes, sha256_json

#: bump when decoding (images.load_image) or the way pixels are stored changes what a cached array is
PIXEL_CODE_VERSION = "1"


def spec_hash(spec: dict) -> str:
    """The hash that names a preprocessing: the adapter's spec, vlbench's decoding rules and the decoder
    libraries' versions (:func:`decoder_versions`)."""
    return sha256_json({"spec": spec, "pixel_code": PIXEL_CODE_VERSION, "decoders": decoder_versions()})


def pixel_checksum(spec: str, key: str, pixels: np.ndarray) -> str:
    h = hashlib.sha256(b"vlbench-pixels-v1\0")
    h.update(f"{spec}\0{key}\0{pixels.dtype.str}\0{tuple(pixels.shape)}\0".encode())
    h.update(np.ascontiguousarray(pixels).tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class PixelStore:
    """The pixel files of one preprocessing spec (picklable: DataLoader workers read and write it).
    ``read``/``write``: use the files (False under --restart / --no-cache)."""

    folder: Path
    spec: str  # spec hash
    read: bool = True
    write: bool = True

    @classmethod
    def open(cls, root: str | os.PathLike | None, spec: dict, *, read: bool = True, write: bool = True) -> PixelStore:
        digest = spec_hash(spec)
        return cls(stores.path("pixels", stores.root(root)) / digest[:16], digest, read, write)

    def path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.npz"

    def get(self, key: str) -> tuple[np.ndarray | None, str]:
        """(pixels, "hit") or (None, "miss" | "bad"): a damaged file is moved aside and reported once."""
        if not self.read:
            return None, "miss"
        p = self.path(key)
        try:
            with np.load(p, allow_pickle=False) as z:
                pixels, stored = z["pixels"], str(z["checksum"])
        except FileNotFoundError:
            return None, "miss"
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
            return self._damaged(p, f"unreadable: {type(exc).__name__}")
        if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixel_checksum(self.spec, key, pixels) != stored:
            return self._damaged(p, "its checksum does not match its pixels")
        return pixels, "hit"

    def put(self, key: str, pixels: np.ndarray) -> None:
        if not self.write:
            return
        pixels = np.ascontiguousarray(pixels)
        buf = io.BytesIO()
        np.savez(buf, pixels=pixels, checksum=np.array(pixel_checksum(self.spec, key, pixels)))
        try:  # a concurrent `cache clear` removing the folder is retried (util.io.cache_write_bytes)
            cache_write_bytes(self.path(key), buf.getvalue())
        except OSError:  # a full or read-only disk: the run goes on, the image is decoded next time
            pass

    def _damaged(self, p: Path, problem: str) -> tuple[None, str]:
        try:
            os.replace(p, p.with_name(p.name + ".damaged"))
        except OSError:
            pass
        print(f"vlbench: warning: pixel cache file {p} is damaged ({problem}); it is not used and the image is "
              f"decoded again", file=sys.stderr, flush=True)
        return None, "bad"


@dataclass(frozen=True)
class PixelJob:
    """What a DataLoader worker needs to make one image's pixels: read them from the store, else decode,
    transform (an image condition) and ``to_pixels`` them, then store them."""

    key: str  # the pixel key (content key, or the condition's key of the transformed image)
    path: str
    index: int = 0
    content: str = ""
    transform: object = None  # an ImageTransform, or None for the clean image


@dataclass(frozen=True)
class PixelItem:
    """A worker's answer: the pixels and how they were obtained ("hit", "miss" (decoded), "bad" (decoded
    after a damaged file)."""

    pixels: np.ndarray
    how: str


def collate_pixels(items) -> tuple:
    """(uint8 N x C x H x W tensor, images decoded, damaged files met) of a batch of PixelItems."""
    import torch  # lazy: runs inside encoding, where torch is loaded

    arr = np.stack([it.pixels for it in items])
    return (torch.from_numpy(arr), sum(it.how != "hit" for it in items), sum(it.how == "bad" for it in items))
