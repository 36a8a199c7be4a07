"""Encoding: every image once, every distinct model input once, batched, cached, normalized.

* Images are decoded and preprocessed in DataLoader worker processes while the model runs.
* Texts are de-duplicated on what the model actually sees (token ids after truncation) and
  batched by token length, so padding is small.
* Each finished batch is written to the embedding cache at once, texts as images: a killed run (SIGKILL
  included) loses only the batch it was computing, and the next run with the same arguments picks up the rest.
  An adapter whose outputs are already on the host (NumPy, CPU tensors: the forward has run) has its batch
  written before the next batch starts; outputs still on an asynchronous device (CUDA, MPS) are read back once
  the next batch is queued, so a GPU never waits for the host between batches (then the batch just queued
  is in flight too).
* A batch that runs out of memory is split in halves, down to single items; later batches use the
  reduced size. Every reduction is recorded.
* Vectors are L2-normalized here (in float64, stored as float32), for every adapter alike.
* Distributed (torchrun): all ranks plan the same global batches from the same cache state; rank r
  encodes batches r, r + world, ...; so every batch is the batch a single process would encode and
  the gathered vectors are identical to a single-process run.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import ModelError, VlbenchError
from .cache import EmbeddingCache, item_key
from .device_pixels import DeviceBatches, check_device_path
from .feed import _Collate, _Failed, _raise_failed, default_workers, image_batches, pixel_store  # noqa: F401 -- re-exported
from .images import MAX_ASPECT, check_image_header, file_key, file_problem, load_image, max_aspect  # noqa: F401 -- re-exported
from .pixels import PixelJob


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
    image_forward_seconds: float = 0.0
    images_decoded: int = 0  # image files decoded and preprocessed (encoding/pixels.py: not those from the cache)
    pixels_cached: int = 0  # images whose preprocessed pixels came from the pixel cache
    images_device_decoded: int = 0  # of images_decoded: JPEGs decoded on the model's device (--pixels device)
    pixel_files_damaged: int = 0
    text_forward_seconds: float = 0.0
    model_load_seconds: float = 0.0  # loading the model where encoding first needs it (pipeline/timing.py)
    #: image conditions made in DataLoader workers: the main process's wait for their batches, and how many
    condition_wait_seconds: float = 0.0
    images_transformed_workers: int = 0
    #: image conditions made on the model's device (--pixels device, torch corruptions): time in the transforms
    corrupt_device_seconds: float = 0.0
    images_corrupted_device: int = 0
    oom_retries: list = field(default_factory=list)

    def as_dict(self):
        return dict(self.__dict__)


@dataclass
class Shard:
    """This process's part of a distributed encoding: rank, world size, and ``agree`` (every rank
    gets rank 0's value: a broadcast)."""

    rank: int = 0
    world: int = 1
    agree: Callable = lambda obj: obj

    def mine(self, batch_index: int) -> bool:
        return batch_index % self.world == self.rank

    def keep(self, key: str, encoded_here: set) -> bool:
        """What this rank sends to rank 0: rank 0 keeps everything, others only what they encoded."""
        return self.rank == 0 or key in encoded_here


SINGLE = Shard()


# ---------------------------------------------------------------------------------------------
# images: the file checks and decoding rules live in images.py (re-exported here, where callers import them)

class _ImageSet:
    def __init__(self, paths, preprocess):
        self.paths = paths
        self.preprocess = preprocess

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        try:
            return self.preprocess(load_image(self.paths[i]))
        except VlbenchError as exc:  # a bad file, or a bad VLBENCH_MAX_IMAGE_ASPECT
            return _Failed(exc.message, exc.hint)


def _is_oom(exc: BaseException) -> bool:
    return "OutOfMemory" in type(exc).__name__ or "out of memory" in str(exc).lower()


def _normalize(x, source: str = "the model") -> np.ndarray:
    """L2-normalised float32 vectors of one batch's output; ``source`` names the adapter's method in errors
    (``counting.encode_texts``)."""
    if hasattr(x, "detach"):
        x = x.detach().float().cpu().numpy()
    x = _as_floats(x, source)
    if x.ndim != 2:
        raise ModelError(f"{source} returned embeddings of shape {x.shape}, expected (batch, dim)",
                         "the adapter must return one vector per input")
    if not np.isfinite(x).all():
        bad = int(np.flatnonzero(~np.isfinite(x).all(axis=1))[0])
        raise ModelError(f"{source} returned NaN or infinite embeddings (item {bad} of a batch)",
                         "check the checkpoint and precision (fp16 overflow?); try --precision fp32")
    x64 = x.astype(np.float64)  # tiny-magnitude vectors must not underflow to a zero norm
    norms = np.linalg.norm(x64, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ModelError(f"{source} returned an all-zero embedding, which has no direction", "check the checkpoint")
    return (x64 / norms).astype(np.float32)


def _as_floats(x, source: str) -> np.ndarray:
    """``x`` as a float32 array, or a ModelError naming the adapter's method and what it returned instead
    (strings, None, objects, ragged lists) rather than NumPy's own error from deep inside the run."""
    what = type(x).__name__
    if isinstance(x, (str, bytes)) or x is None:
        raise ModelError(f"{source} returned {what} {str(x)[:40]!r}, not an array of embeddings",
                         "return a (batch, dim) float array: a NumPy array or a torch tensor, one row per input")
    try:
        arr = np.asarray(x)
    except ValueError as exc:  # ragged lists of rows
        raise ModelError(f"{source} returned a {what} that is not a rectangular array ({exc})",
                         "return a (batch, dim) float array: one row of the same length per input") from None
    if arr.dtype.kind not in "fiub":
        kind = {"U": "str", "S": "bytes", "O": "object"}.get(arr.dtype.kind, str(arr.dtype))
        sample = arr.reshape(-1)[:1].tolist()
        raise ModelError(f"{source} returned a {what} of {kind} values (first: {str(sample[0])[:40]!r}), not numbers"
                         if sample else f"{source} returned a {what} of {kind} values, not numbers",
                         "return a (batch, dim) float array: a NumPy array or a torch tensor, one row per input")
    return arr.astype(np.float32, copy=False)


class _Encoder:
    """Runs ``encode`` on a batch, splitting it on out-of-memory errors (down to single items)."""

    def __init__(self, encode, slicer, what: str, stats: EncodeStats, timer: str, adapter=None):
        self.encode, self.slicer, self.what, self.stats, self.timer = encode, slicer, what, stats, timer
        self.adapter = adapter  # named in errors about what its encode method returned
        self.limit: int | None = None

    @property
    def source(self) -> str:
        if self.adapter is None:
            return "the model"
        return _method(self.adapter, getattr(self.encode, "__name__", f"encode_{self.what}"))

    def __call__(self, batch, n: int) -> np.ndarray:
        return self.finish(self.start(batch, n))

    def start(self, batch, n: int) -> list:
        """Run the model on the batch (in parts after an out-of-memory error); on a GPU the work is only queued:
        the outputs are read by :meth:`finish`, after the next batch was queued (no synchronisation per batch)."""
        size = min(n, self.limit or n)
        outs, start = [], 0
        while start < n:
            part = self.slicer(batch, start, min(n, start + size)) if (start, size) != (0, n) else batch
            t0 = time.perf_counter()
            try:
                out = self.encode(part)
            except Exception as exc:
                if not _is_oom(exc) or size == 1:
                    raise
                new = max(1, size // 2)
                self.stats.oom_retries.append({"what": self.what, "from": size, "to": new})
                warnings.warn(f"out of memory encoding {self.what} with batch size {size}; retrying with {new}",
                              stacklevel=1)  # the encoder's own loop, where the retry happens
                _free_gpu()
                size = self.limit = new
                continue
            self._add_time(time.perf_counter() - t0)
            outs.append((out, min(n, start + size) - start))
            start += outs[-1][1]
        return outs

    def finish(self, outs: list) -> np.ndarray:
        """The normalised vectors of :meth:`start`'s outputs (waiting for the device: forward time too)."""
        t0 = time.perf_counter()
        vecs = []
        for out, expected in outs:
            vecs.append(_normalize(out, self.source))
            if len(vecs[-1]) != expected:
                raise ModelError(f"{self.source} returned {len(vecs[-1])} {self.what} embeddings for a batch of "
                                 f"{expected}", "the adapter must return exactly one vector per input")
        self._add_time(time.perf_counter() - t0)
        return np.concatenate(vecs) if len(vecs) > 1 else vecs[0]

    @staticmethod
    def on_host(outs: list) -> bool:
        """Whether :meth:`start`'s outputs are already on the host (NumPy, lists, CPU tensors): the forward has
        run and reading them waits for nothing, so the batch is written at once instead of after the next."""
        for out, _ in outs:
            dev = getattr(out, "device", None)
            if dev is not None and str(getattr(dev, "type", dev)) != "cpu":
                return False
        return True

    def _add_time(self, seconds: float) -> None:
        setattr(self.stats, self.timer, getattr(self.stats, self.timer) + seconds)


def _free_gpu():
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:
        pass


def _from_cache(cache: EmbeddingCache | None, modality: str, keys: list[str], vec_of: dict) -> list[str]:
    """Fill ``vec_of`` with the cached vectors of ``keys``; returns the keys still to encode."""
    if cache is None:
        return list(keys)
    found, vecs = cache.lookup(modality, keys)
    if vecs is not None:
        vec_of.update(zip([k for k, f in zip(keys, found) if f], vecs))
    return [k for k, f in zip(keys, found) if not f]


def _encode_batches(pairs, enc: _Encoder, modality: str, cache, vec_of: dict, encoded: set, stats: EncodeStats,
                    bar) -> None:
    """Encode (keys, model inputs) batches; each finished batch goes to the cache at once. A batch computed on the
    host is cached before the next starts; one queued on an asynchronous device is read back only after batch
    i + 1 was queued, so the device never waits for the host between batches."""

    def keep(b_keys, started):
        vecs = enc.finish(started)
        vec_of.update(zip(b_keys, vecs))
        encoded.update(b_keys)
        if cache is not None:
            cache.add(modality, b_keys, vecs)
        setattr(stats, f"{modality}s_encoded", getattr(stats, f"{modality}s_encoded") + len(b_keys))
        bar.update(len(b_keys))

    held = None
    try:
        for b_keys, batch in pairs:
            started = (b_keys, enc.start(batch, len(b_keys)))
            if held is not None:
                keep(*held)
                held = None
            if enc.on_host(started[1]):  # computed already (CPU): cached now, so a crash from here keeps it
                keep(*started)
            else:  # queued on an asynchronous device: read back after the next batch is queued
                held = started
    except BaseException:  # the next batch failed (a bad image, Ctrl-C): the finished one is still kept
        if held is not None:
            with contextlib.suppress(Exception):
                keep(*held)
        raise
    if held is not None:
        keep(*held)


def _method(adapter, method: str) -> str:
    """``name.method`` of an adapter (the model plug-in as the user named it), for errors about its output."""
    name = getattr(adapter, "spec", None) or getattr(adapter, "name", None) or type(adapter).__name__
    return f"model adapter {name!r} ({type(getattr(adapter, '_real', None) or adapter).__name__}.{method})"


def _slice(batch, a, b):
    return batch[a:b]


def encode_images(adapter, paths: list, *, batch_size: int = 64, num_workers: int | None = None,
                  cache: EmbeddingCache | None = None, stats: EncodeStats | None = None, progress: bool = True,
                  shard: Shard = SINGLE) -> dict[int, np.ndarray]:
    """Encode images; returns {index: vector} for the images this process holds (all, unless sharded)."""
    from tqdm.auto import tqdm

    stats = stats if stats is not None else EncodeStats()
    t_start = time.perf_counter()
    keys = [item_key(file_key(p)) for p in paths]
    vec_of: dict[str, np.ndarray] = {}
    uniq = list(dict.fromkeys(keys))  # the same file content twice is encoded once
    todo = _from_cache(cache, "image", uniq, vec_of)
    cached = len(uniq) - len(todo)  # counted as done by the bar: it counts to the distinct images announced
    stats.images_cached += cached
    todo = shard.agree(todo)  # every rank follows rank 0's plan (caches may differ between machines)
    encoded: set = set()
    first_path: dict = {}
    for k, p in zip(keys, paths):
        first_path.setdefault(k, p)
    batches = [todo[i:i + batch_size] for i in range(0, len(todo), batch_size)]
    mine = [b for i, b in enumerate(batches) if shard.mine(i)]
    if mine:
        for b in mine:  # bad files fail here, before the model and torch are loaded
            for k in b:
                check_image_header(first_path[k])
        t_load = time.perf_counter()
        getattr(adapter, "real", None)  # load a lazy model here, once, not in every DataLoader worker
        stats.model_load_seconds += time.perf_counter() - t_load
        flat = [k for b in mine for k in b]
        if getattr(adapter, "pixels", "reference") == "device":  # --pixels device (device_pixels.py)
            check_device_path(adapter, getattr(adapter, "spec", adapter.name))
            pairs = iter(DeviceBatches(adapter, mine, first_path, stats))
        else:
            jobs = [PixelJob(k, str(first_path[k])) for k in flat]
            loader = image_batches(adapter, jobs, [len(b) for b in mine], _ImageSet([first_path[k] for k in flat],
                                   adapter.preprocess), num_workers=num_workers, cache=cache, stats=stats)
            pairs = _raise_failed(zip(mine, loader))
        enc = _Encoder(adapter.encode_images, _slice, "images", stats, "image_forward_seconds", adapter)
        with tqdm(total=cached + len(flat), initial=cached, desc="images", unit="img", disable=not progress,
                  leave=False) as bar:
            _encode_batches(pairs, enc, "image", cache, vec_of, encoded, stats, bar)
    stats.image_seconds += time.perf_counter() - t_start
    return {i: vec_of[k] for i, k in enumerate(keys) if k in vec_of and shard.keep(k, encoded)}


def encode_texts(adapter, texts: list[str], *, batch_size: int = 256, cache: EmbeddingCache | None = None,
                 stats: EncodeStats | None = None, progress: bool = True,
                 shard: Shard = SINGLE, keys: list[str] | None = None) -> dict[int, np.ndarray]:
    """Encode texts; identical model inputs are encoded once. Returns {index: vector} held here.
    ``keys``: the model's keys of ``texts`` (``adapter.text_keys(texts)``) when the caller has them already."""
    from tqdm.auto import tqdm

    stats = stats if stats is not None else EncodeStats()
    t_start = time.perf_counter()
    stats.texts_total += len(texts)
    keys = [item_key("txt:" + k) for k in (adapter.text_keys(texts) if keys is None else keys)]
    first: dict[str, int] = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    uniq = list(first)
    stats.texts_distinct += len(uniq)
    vec_of: dict[str, np.ndarray] = {}
    todo = _from_cache(cache, "text", uniq, vec_of)
    cached = len(uniq) - len(todo)  # counted as done by the bar: it counts to the distinct texts announced
    stats.texts_cached += cached
    todo = shard.agree(todo)
    encoded: set = set()
    if todo:
        lengths = np.asarray(adapter.text_lengths([texts[first[k]] for k in todo]))
        order = [todo[j] for j in np.argsort(-lengths, kind="stable")]  # longest first: OOM shows up early
        batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
        mine = [b for i, b in enumerate(batches) if shard.mine(i)]
        enc = _Encoder(adapter.encode_texts, _slice, "texts", stats, "text_forward_seconds", adapter)
        with tqdm(total=cached + sum(map(len, mine)), initial=cached, desc="texts", unit="txt",
                  disable=not progress, leave=False) as bar:
            _encode_batches(((b, [texts[first[k]] for k in b]) for b in mine), enc, "text", cache, vec_of,
                            encoded, stats, bar)
    stats.text_seconds += time.perf_counter() - t_start
    return {i: vec_of[k] for i, k in enumerate(keys) if k in vec_of and shard.keep(k, encoded)}


def stack(vectors: dict[int, np.ndarray], n: int, what: str) -> np.ndarray:
    """The (n, d) matrix from {index: vector}; every index must be present."""
    missing = [i for i in range(n) if i not in vectors]
    if missing:
        raise ModelError(f"{len(missing)} {what} embedding(s) are missing after encoding (first: {missing[0]})",
                         "this is a bug in vlbench; please report it")
    dims = {len(v) for v in vectors.values()}
    if len(dims) > 1:
        raise ModelError(f"the model returned {what} embeddings of different sizes {sorted(dims)}",
                         "the adapter must return a fixed embedding size")
    return np.stack([vectors[i] for i in range(n)]) if n else np.zeros((0, 0), np.float32)
