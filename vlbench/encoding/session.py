"""One encoding session: the lazy model, its embedding cache and the encode statistics, built once.

The runner, the relevance model of graded nDCG and the choice tasks all encode with a model whose
identity is remembered (so a warm run loads nothing), into the cache of that identity, counting what was
encoded and what came from the cache. :meth:`EncodingSession.open` is that set-up, written once; the
``images`` / ``texts`` / ``variant_images`` methods are the encode functions with the session's model, cache
and statistics filled in.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .. import stores
from ..models.lazy import LazyModel
from .cache import EmbeddingCache
from .encode import SINGLE, EncodeStats, Shard, encode_images, encode_texts
from .images import check_image_header
from .variant_images import encode_variant_images


@dataclass
class EncodingSession:
    model: object  # vlbench.models.lazy.LazyModel (any ModelAdapter works)
    cache: EmbeddingCache | None  # None with --no-cache
    stats: EncodeStats
    model_hash: str

    @classmethod
    def open(cls, spec: str, *, cache_dir: str | os.PathLike | None = None, no_cache: bool = False,
             restart: bool = False, device: str | None = None, precision: str = "fp32",
             trust_remote_code: bool = False, revision: str | None = None,
             stats: EncodeStats | None = None, images: list | None = None,
             pixels: str = "reference", threads: int | None = None) -> EncodingSession:
        """The session of model ``spec``. ``no_cache``: neither read nor write vectors or the identity memo;
        ``restart``: re-encode and re-identify (the cache is still written). ``stats``: share the counters
        of another session (the relevance model adds to the run's). ``images``: the run's image files, whose
        headers are checked before a model that must be loaded at once is loaded (a 20,000,000 x 1
        PNG is refused before torch is imported). ``pixels``: the path that makes the image pixels (--pixels:
        reference or device, encoding/device_pixels.py), part of the model's identity unless reference. ``threads``:
        the CPU threads of the model's forward (None: the cores this process may use; vlbench.models.lazy)."""
        root = None if no_cache else stores.root(cache_dir)
        with stores.using(cache_dir, disk=not no_cache):  # a local checkpoint's file digests: --cache-dir, none
            # with --no-cache
            model = LazyModel(spec, root, reuse=not restart, device=device, precision=precision,
                              trust_remote_code=trust_remote_code, revision=revision, pixels=pixels, threads=threads,
                              before_load=None if not images else lambda: check_headers(images))
            model_hash = model.model_hash()
        cache = None if no_cache else EmbeddingCache(root, model_hash, read=not restart, label=spec)
        return cls(model, cache, stats if stats is not None else EncodeStats(), model_hash)

    def images(self, paths: list, *, batch_size: int = 64, num_workers: int | None = None, progress: bool = True,
               shard: Shard = SINGLE) -> dict[int, np.ndarray]:
        return encode_images(self.model, paths, batch_size=batch_size, num_workers=num_workers, cache=self.cache,
                             stats=self.stats, progress=progress, shard=shard)

    def texts(self, texts: list[str], *, batch_size: int = 256, progress: bool = True,
              shard: Shard = SINGLE, keys: list[str] | None = None) -> dict[int, np.ndarray]:
        return encode_texts(self.model, texts, batch_size=batch_size, cache=self.cache, stats=self.stats,
                            progress=progress, shard=shard, keys=keys)

    def variant_images(self, paths: list, variants: list, *, batch_size: int = 64, num_workers: int | None = None,
                       progress: bool = True, clean: np.ndarray | None = None) -> dict[str, np.ndarray]:
        return encode_variant_images(self.model, paths, variants, batch_size=batch_size, num_workers=num_workers,
                                     cache=self.cache, stats=self.stats, progress=progress, clean=clean)


def check_headers(paths: list) -> None:
    """Every image file's header, checked (size, format) before anything heavy is loaded."""
    for p in paths:
        check_image_header(p)
