"""Encoding: every image once, every distinct model input once, batched, cached, normalized.

* Images are decoded and preprocessed in DataLoader worker processes while the model runs.
* Texts are de-duplicated on what the model actually sees (token ids after truncation) and
  batched by token length, so padding is small.
* Each finished batch is written to the embedding cache at once: a killed run loses at most the
  batch in flight, and the next run with the same arguments picks up the rest.
* A batch that runs out of memory is retried with half the batch size, down to 1 (recorded).
* Vectors are L2-normalized in float32 here, for every adapter alike.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import DataError, ModelError
from .cache import EmbeddingCache, item_key


@dataclass
class EncodeStats:
    images_encoded: int = 0
    images_cached: int = 0
    texts_total: int = 0
    texts_distinct: int = 0
    texts_encoded: int = 0
    texts_cached: int = 0
    image_seconds: float = 0.0
    text_seconds: float = 0.0
    forward_seconds: float = 0.0
    oom_retries: list = field(default_factory=list)

    def as_dict(self):
        return dict(self.__dict__)


# ---------------------------------------------------------------------------------------------
# images

def load_image(path: str | os.PathLike):
    """Open an image as RGB with the documented rules (docs/robustness.md):
    EXIF orientation applied; CMYK/grayscale/palette converted; 16-bit scaled to 8-bit;
    transparency composited on white; PIL's decompression-bomb limit enforced."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    path = Path(path)
    if not path.is_file():
        raise DataError(f"image file {str(path)!r} is missing", "put the file there or fix the manifest")
    if path.stat().st_size == 0:
        raise DataError(f"image file {str(path)!r} is empty (0 bytes)", "re-download or replace the file")
    try:
        with Image.open(path) as im:
            im.load()
            im = ImageOps.exif_transpose(im)
            if im.mode in ("I;16", "I;16B", "I;16L", "I"):
                arr = np.asarray(im, dtype=np.float64)
                hi = 65535.0 if im.mode.startswith("I;16") or arr.max() > 255 else 255.0
                im = Image.fromarray(np.clip(arr / hi * 255.0 + 0.5, 0, 255).astype(np.uint8), "L")
            if im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info):
                im = im.convert("RGBA")
                bg = Image.new("RGBA", im.size, (255, 255, 255, 255))
                im = Image.alpha_composite(bg, im)
            return im.convert("RGB")
    except Image.DecompressionBombError as exc:
        raise DataError(f"image file {str(path)!r} is too large to decode safely ({exc})",
                        "downscale it, or raise PIL.Image.MAX_IMAGE_PIXELS if you trust the file") from None
    except UnidentifiedImageError:
        raise DataError(f"image file {str(path)!r} is not an image PIL can read",
                        "replace it with a valid JPEG/PNG file") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise DataError(f"image file {str(path)!r} is corrupt or truncated ({exc})",
                        "re-download or replace the file") from None


def file_key(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except FileNotFoundError:
        raise DataError(f"image file {str(path)!r} is missing", "put the file there or fix the manifest") from None
    return "img:" + h.hexdigest()


class _ImageSet:
    def __init__(self, paths, preprocess):
        self.paths = paths
        self.preprocess = preprocess

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return self.preprocess(load_image(self.paths[i]))


def _is_oom(exc: BaseException) -> bool:
    name = type(exc).__name__
    return "OutOfMemory" in name or "out of memory" in str(exc).lower()


def _normalize(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().float().cpu().numpy()
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise ModelError(f"the model returned embeddings of shape {x.shape}, expected (batch, dim)",
                         "the adapter must return one vector per input")
    if not np.isfinite(x).all():
        bad = int(np.flatnonzero(~np.isfinite(x).all(axis=1))[0])
        raise ModelError(f"the model returned NaN or infinite embeddings (item {bad} of a batch)",
                         "check the checkpoint and precision (fp16 overflow?); try --precision fp32")
    x64 = x.astype(np.float64)  # float64: tiny-magnitude vectors must not underflow to a zero norm
    norms = np.linalg.norm(x64, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ModelError("the model returned an all-zero embedding, which has no direction",
                         "check the checkpoint")
    return (x64 / norms).astype(np.float32)


def _run_batches(items, encode: Callable, batch_size: int, stats: EncodeStats, what: str, on_batch: Callable):
    """Encode ``items`` in batches, halving the batch size on out-of-memory errors."""
    import time

    i, bs = 0, batch_size
    while i < len(items):
        chunk = items[i:i + bs]
        t0 = time.perf_counter()
        try:
            out = encode(chunk)
        except Exception as exc:
            if _is_oom(exc) and bs > 1:
                new = max(1, bs // 2)
                stats.oom_retries.append({"what": what, "from": bs, "to": new})
                warnings.warn(f"out of memory encoding {what} with batch size {bs}; retrying with {new}")
                try:
                    import torch

                    if torch.cuda.is_available():
                        torch.cuda.empty_cache()
                except Exception:
                    pass
                bs = new
                continue
            raise
        stats.forward_seconds += time.perf_counter() - t0
        on_batch(i, chunk, _normalize(out))
        i += len(chunk)


def encode_images(adapter, paths: list, *, batch_size: int = 64, num_workers: int | None = None,
                  cache: EmbeddingCache | None = None, stats: EncodeStats | None = None,
                  progress: bool = True) -> np.ndarray:
    import time

    from tqdm.auto import tqdm

    stats = stats if stats is not None else EncodeStats()
    t_start = time.perf_counter()
    keys = [item_key(file_key(p)) for p in paths]
    out: list[np.ndarray | None] = [None] * len(paths)
    todo = list(range(len(paths)))
    if cache is not None:
        found, vecs = cache.lookup("image", keys)
        if vecs is not None:
            for v, idx in zip(vecs, np.flatnonzero(found)):
                out[idx] = v
        todo = [int(i) for i in np.flatnonzero(~found)]
        stats.images_cached += len(paths) - len(todo)
    # the same file content twice in a gallery is encoded once
    first: dict[str, int] = {}
    uniq = []
    for i in todo:
        if keys[i] not in first:
            first[keys[i]] = i
            uniq.append(i)
    if uniq:
        import torch

        workers = num_workers if num_workers is not None else min(4, max(0, (os.cpu_count() or 1) - 1))
        bar = tqdm(total=len(uniq), desc="images", unit="img", disable=not progress, leave=False)
        ds = _ImageSet([paths[i] for i in uniq], adapter.preprocess)
        bs = batch_size
        pos = 0
        while pos < len(uniq):
            sub = torch.utils.data.Subset(ds, range(pos, len(uniq)))
            loader = torch.utils.data.DataLoader(sub, batch_size=bs, num_workers=workers, collate_fn=adapter.collate,
                                                 persistent_workers=False)
            restart = False
            for batch in loader:
                n = len(batch)
                idxs = uniq[pos:pos + n]

                def store(_i, _chunk, vecs, idxs=idxs):
                    for j, v in zip(idxs, vecs):
                        out[j] = v
                    if cache is not None:
                        cache.add("image", [keys[j] for j in idxs], vecs)

                t0 = time.perf_counter()
                try:
                    vecs = adapter.encode_images(batch)
                except Exception as exc:
                    if _is_oom(exc) and bs > 1:
                        stats.oom_retries.append({"what": "images", "from": bs, "to": max(1, bs // 2)})
                        warnings.warn(f"out of memory encoding images with batch size {bs}; retrying with {bs // 2}")
                        bs = max(1, bs // 2)
                        restart = True
                        break
                    raise
                stats.forward_seconds += time.perf_counter() - t0
                store(0, None, _normalize(vecs))
                stats.images_encoded += n
                pos += n
                bar.update(n)
            if not restart and pos < len(uniq):
                break
        bar.close()
        for i in todo:
            if out[i] is None:
                out[i] = out[first[keys[i]]]
    stats.image_seconds += time.perf_counter() - t_start
    _check_dims(out, "image")
    return np.stack(out) if out else np.zeros((0, 0), np.float32)


def _check_dims(vectors, what):
    dims = {len(v) for v in vectors if v is not None}
    if len(dims) > 1:
        raise ModelError(f"the model returned {what} embeddings of different sizes {sorted(dims)}",
                         "the adapter must return a fixed embedding size")


def encode_texts(adapter, texts: list[str], *, batch_size: int = 256, cache: EmbeddingCache | None = None,
                 stats: EncodeStats | None = None, progress: bool = True) -> np.ndarray:
    """Encode texts; identical model inputs are encoded once. Returns (len(texts), d)."""
    import time

    from tqdm.auto import tqdm

    stats = stats if stats is not None else EncodeStats()
    t_start = time.perf_counter()
    stats.texts_total += len(texts)
    model_keys = adapter.text_keys(texts)
    keys = [item_key("txt:" + k) for k in model_keys]
    first: dict[str, int] = {}
    uniq: list[int] = []
    for i, k in enumerate(keys):
        if k not in first:
            first[k] = i
            uniq.append(i)
    stats.texts_distinct += len(uniq)
    vec_of: dict[str, np.ndarray] = {}
    todo = uniq
    if cache is not None:
        found, vecs = cache.lookup("text", [keys[i] for i in uniq])
        if vecs is not None:
            for v, i in zip(vecs, np.asarray(uniq)[found]):
                vec_of[keys[i]] = v
        todo = [i for i, f in zip(uniq, found) if not f]
        stats.texts_cached += len(uniq) - len(todo)
    if todo:
        lengths = adapter.text_lengths([texts[i] for i in todo])
        order = [todo[j] for j in np.argsort(np.asarray(lengths), kind="stable")[::-1]]  # longest first
        bar = tqdm(total=len(order), desc="texts", unit="txt", disable=not progress, leave=False)

        def store(start, chunk, vecs):
            ks = [keys[i] for i in chunk]
            for k, v in zip(ks, vecs):
                vec_of[k] = v
            if cache is not None:
                cache.add("text", ks, vecs)
            stats.texts_encoded += len(chunk)
            bar.update(len(chunk))

        _run_batches(order, lambda chunk: adapter.encode_texts([texts[i] for i in chunk]), batch_size, stats,
                     "texts", store)
        bar.close()
    stats.text_seconds += time.perf_counter() - t_start
    out = [vec_of[k] for k in keys]
    _check_dims(out, "text")
    return np.stack(out) if out else np.zeros((0, 0), np.float32)
