"""Encoding the images of run conditions that change them (image corruptions, shortcut probes).

Each condition's images are the dataset's gallery passed through its :class:`~vlbench.conditions.ImageTransform`
after decoding, in the DataLoader workers, before the model's preprocessing; a transform that runs on the model's
device (``on_device``, under ``--pixels device``) gets the images decoded there instead
(encoding/device_conditions.py). Every transformed image is encoded once and cached under a key naming the
transform and its parameters and the image file's content hash, so a second run encodes nothing.
"""

from __future__ import annotations

import time

import numpy as np

from ..conditions import Variant
from ..errors import DataError, VlbenchError
from .cache import item_key
from .device_conditions import DeviceConditionBatches
from .device_pixels import check_device_path
from .encode import (
    EncodeStats,
    _encode_batches,
    _Encoder,
    _Failed,
    _from_cache,
    _raise_failed,
    _slice,
    file_key,
    image_batches,
    load_image,
)
from .pixels import PixelJob


class _VariantImages:
    """A torch Dataset of (path, index, content, transform) jobs: decode, transform, preprocess."""

    def __init__(self, jobs, preprocess):
        self.jobs = jobs
        self.preprocess = preprocess

    def __len__(self):
        return len(self.jobs)

    def __getitem__(self, i):
        path, index, content, transform = self.jobs[i]
        try:
            image = self._decoded(path)
        except DataError as exc:
            return _Failed(exc.message, exc.hint)
        try:
            image = transform(image, index, content)
        except VlbenchError as exc:  # e.g. a plug-in's error or bad output, an image above the pixel limit
            return _Failed(f"{path}: {exc.message}", exc.hint)
        try:
            return self.preprocess(image)
        except DataError as exc:
            return _Failed(exc.message, exc.hint)

    def _decoded(self, path):
        """The decoded image, reused while consecutive jobs (the conditions of one image, which the encoder
        orders together) name the same file: each image is decoded once per batch, not once per condition.
        Transforms copy their input, so the reused image is never changed."""
        last = getattr(self, "_last", None)
        if last is None or last[0] != path:
            self._last = last = (path, load_image(path))
        return last[1]


def variant_key(transform, index: int, content: str) -> str:
    """The cache key of gallery image ``index`` (content key ``content``) under an image transform: its clean
    key when the transform leaves the image alone (its ``key`` is None), else one keyed by the transform too.
    The encode step and the run's embedding index (vlbench rescore) both use this one rule."""
    k = transform.key(index, content)
    return item_key(content) if k is None else item_key(f"{k}|{content}")


class _Geometry:
    """The model as a transform's ``bind`` sees it. Binding reads only the geometry of the model's preprocessing
    (the shape it gives a probe image), so ``preprocess`` answers with a read-only zero array of the shape the
    model's own preprocessing gives an image of that size, remembered beside the model's identity
    (:meth:`vlbench.models.lazy.LazyModel.preprocessed_shape`): a warm run whose vectors are all cached loads
    no model for it. Without that memo, or when the output has no shape, it is the model's own."""

    def __init__(self, adapter):
        self._adapter = adapter

    def __getattr__(self, name):
        return getattr(self._adapter, name)

    def preprocess(self, image):
        shape = self._adapter.preprocessed_shape(image.size)
        if shape is None:
            return self._adapter.preprocess(image)
        return np.broadcast_to(np.zeros((), dtype=np.float32), shape)


def bind_transforms(adapter, conditions: list) -> dict[str, dict]:
    """Bind each condition's image transform to the model (e.g. the corruption geometry follows the model's
    input size); returns {condition name: what its results entry gains}, for the record step to place."""
    out = {}
    seen = _Geometry(adapter) if hasattr(adapter, "preprocessed_shape") else adapter
    for c in conditions:
        bind = getattr(c.image, "bind", None)
        if bind is not None:
            out[c.name] = dict(bind(seen) or {})
    return out


def encode_variant_images(adapter, paths: list, variants: list[Variant], *, batch_size: int = 64,
                          num_workers: int | None = None, cache=None, stats: EncodeStats | None = None,
                          progress: bool = True, contents: list[str] | None = None,
                          clean: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """{variant label: (len(paths), d) embeddings} for the variants that transform images.

    All variants share one DataLoader (workers decode and transform while the model encodes), except those whose
    transform runs on the model's device (``on_device``: the torch corruptions under ``--pixels device``), which
    are made there (encoding/device_conditions.py); an image a transform leaves alone (key None) reuses the clean
    embedding (``clean``, rows aligned with ``paths``).
    """
    from tqdm.auto import tqdm

    stats = stats if stats is not None else EncodeStats()
    t_start = time.perf_counter()
    contents = contents or [file_key(p) for p in paths]  # the transforms are bound first (bind_transforms)
    keys_of: dict[str, list[str]] = {}
    first_job: dict[str, tuple] = {}
    for v in variants:
        if v.image is None:
            continue
        row = []
        for i, (p, c) in enumerate(zip(paths, contents)):
            k = variant_key(v.image, i, c)
            row.append(k)
            if k not in first_job:
                first_job[k] = (str(p), i, c, v.image if k != item_key(c) else _identity)
        keys_of[v.label] = row
    vec_of: dict[str, np.ndarray] = {}
    if clean is not None:
        vec_of.update((item_key(c), clean[i]) for i, c in enumerate(contents))
    todo = _from_cache(cache, "image", [k for k in first_job if k not in vec_of], vec_of)
    stats.images_cached += len(first_job) - len(todo)
    todo.sort(key=lambda k: first_job[k][1])  # image-major (stable: conditions keep their order): decode once
    if todo:
        t_load = time.perf_counter()
        getattr(adapter, "real", None)  # load a lazy model once, here
        stats.model_load_seconds += time.perf_counter() - t_load
        here = {k for k in todo if getattr(first_job[k][3], "on_device", False)}  # --pixels device: on the device
        routes = [r for r in ((_device_pairs, [k for k in todo if k in here]),
                              (_worker_pairs, [k for k in todo if k not in here])) if r[1]]
        enc = _Encoder(adapter.encode_images, _slice, "images", stats, "image_forward_seconds", adapter)
        with tqdm(total=len(todo), desc="image conditions", unit="img", disable=not progress, leave=False) as bar:
            for route, keys in routes:
                batches = [keys[i:i + batch_size] for i in range(0, len(keys), batch_size)]
                pairs = route(adapter, batches, first_job, num_workers=num_workers, cache=cache, stats=stats)
                _encode_batches(pairs, enc, "image", cache, vec_of, set(), stats, bar)
    stats.image_seconds += time.perf_counter() - t_start
    return {label: np.stack([vec_of[k] for k in row]) for label, row in keys_of.items()}


def _worker_pairs(adapter, batches: list, first_job: dict, *, num_workers, cache, stats):
    """(keys, model inputs) of condition images decoded, transformed and preprocessed in DataLoader workers; the
    main process's wait for them is timed (``condition_wait_seconds``: the CPU stage of image conditions)."""
    todo = [k for b in batches for k in b]
    jobs = [PixelJob(k, *first_job[k]) for k in todo]  # the pixel cache's key: the transformed image's key
    loader = image_batches(adapter, jobs, [len(b) for b in batches],
                           _VariantImages([first_job[k] for k in todo], adapter.preprocess),
                           num_workers=num_workers, cache=cache, stats=stats)
    return _raise_failed(zip(batches, _waited(loader, batches, stats)))


def _waited(loader, batches: list, stats):
    it = iter(loader)
    for b in batches:
        t0 = time.perf_counter()
        batch = next(it)
        stats.condition_wait_seconds += time.perf_counter() - t0
        stats.images_transformed_workers += len(b)
        yield batch


def _device_pairs(adapter, batches: list, first_job: dict, *, num_workers, cache, stats):
    """(keys, model inputs) of condition images transformed on the model's device (encoding/device_conditions.py)."""
    check_device_path(adapter, getattr(adapter, "spec", adapter.name))
    return iter(DeviceConditionBatches(adapter, batches, first_job, stats))


def _identity(image, index, content):
    return image
