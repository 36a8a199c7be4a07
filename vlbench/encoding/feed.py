"""Feeding the model: the image batches the encode step reads, made in DataLoader workers while the model runs.

Two routes (encoding/pixels.py): an adapter with the pixel split gets uint8 pixels (from the pixel cache, or
decoded once and stored), pinned in host memory on a GPU, copied without blocking and normalised on the device;
any other adapter gets its own ``preprocess`` outputs. A bad image is carried out of a worker as data and raised
as the batch comes, so torch never wraps the clean message in a worker traceback.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..errors import DataError, VlbenchError
from .images import load_image
from .pixels import PixelItem, PixelJob, PixelStore, collate_pixels


@dataclass(frozen=True)
class _Failed:
    """A bad image, carried out of a DataLoader worker as data: raising there would make torch wrap the
    clean message in the worker's whole traceback."""
    message: str
    hint: str | None


class _Collate:
    """The adapter's collate, passing the first bad image of a batch through instead (picklable)."""

    def __init__(self, collate):
        self.collate = collate

    def __call__(self, items):
        bad = next((x for x in items if isinstance(x, _Failed)), None)
        return bad if bad is not None else self.collate(items)


class _PixelSet:
    """The pixel route's DataLoader dataset (encoding/pixels.py): each job's pixels from the store, else decoded,
    transformed (an image condition) and made by the adapter's ``to_pixels``, then stored."""

    def __init__(self, jobs: list[PixelJob], to_pixels, store: PixelStore | None):
        self.jobs, self.to_pixels, self.store = jobs, to_pixels, store

    def __len__(self):
        return len(self.jobs)

    def __getitem__(self, i):
        job = self.jobs[i]
        arr, how = self.store.get(job.key) if self.store is not None else (None, "miss")
        if arr is not None:
            return PixelItem(arr, how)
        try:
            image = self._decoded(job.path)
        except VlbenchError as exc:
            return _Failed(exc.message, exc.hint)
        try:
            if job.transform is not None:
                image = job.transform(image, job.index, job.content)
            arr = np.ascontiguousarray(np.asarray(self.to_pixels(image)), dtype=np.uint8)
        except VlbenchError as exc:  # a plug-in transform's error or bad output, an image above the pixel limit
            return _Failed(f"{job.path}: {exc.message}" if job.transform is not None else exc.message, exc.hint)
        if self.store is not None:
            self.store.put(job.key, arr)
        return PixelItem(arr, how)

    def _decoded(self, path):
        """The decoded image, reused while consecutive jobs name the same file (the conditions of one image,
        which the encoder orders together); transforms copy their input, so it is never changed."""
        last = getattr(self, "_last", None)
        if last is None or last[0] != path:
            self._last = last = (path, load_image(path))
        return last[1]


def pixel_store(adapter, cache) -> tuple[bool, PixelStore | None]:
    """(whether the adapter has the pixel split, its pixel store under the embedding cache's root or None)."""
    spec_fn = getattr(adapter, "pixel_spec", None)
    spec = spec_fn() if spec_fn is not None else None
    if spec is None:
        return False, None
    if cache is None:
        return True, None
    return True, PixelStore.open(cache.root, spec, read=cache.read, write=cache.write)


def image_batches(adapter, jobs: list[PixelJob], sizes: list[int], reference, *, num_workers: int | None,
                  cache, stats):
    """Model-input batches of ``jobs`` (consecutive batches of ``sizes``), made in DataLoader workers while the
    model runs: through the pixel route when the adapter has the split (pixels from the cache or decoded once,
    normalised on the model's device), else through ``reference`` (a Dataset giving ``adapter.preprocess``
    outputs for the same jobs). Counts the images decoded; bad files raise DataError as the batch comes."""
    import torch

    split, store = pixel_store(adapter, cache)
    workers = num_workers if num_workers is not None else default_workers()
    sampler, pos = [], 0
    for n in sizes:
        sampler.append(list(range(pos, pos + n)))
        pos += n
    device = str(getattr(adapter, "device", "cpu"))
    pin = device.startswith("cuda") and torch.cuda.is_available()
    if not split:
        loader = torch.utils.data.DataLoader(reference, batch_sampler=sampler, num_workers=workers,
                                             collate_fn=_Collate(adapter.collate), pin_memory=pin)
        for n, batch in zip(sizes, loader):
            stats.images_decoded += n
            yield batch
        return
    loader = torch.utils.data.DataLoader(_PixelSet(jobs, adapter.to_pixels, store), batch_sampler=sampler,
                                         num_workers=workers, collate_fn=_Collate(collate_pixels), pin_memory=pin)
    for batch in loader:
        if isinstance(batch, _Failed):
            yield batch
            continue
        pixels, decoded, bad = batch
        stats.images_decoded += decoded
        stats.pixels_cached += len(pixels) - decoded
        stats.pixel_files_damaged += bad
        yield adapter.from_pixels(pixels.to(device, non_blocking=True) if pin else pixels)


def _raise_failed(pairs):
    for keys, batch in pairs:
        if isinstance(batch, _Failed):
            raise DataError(batch.message, batch.hint)
        yield keys, batch


def default_workers() -> int:
    """DataLoader workers when --num-workers is not given: one CPU left to the main process, at most 4."""
    return min(4, max(0, (os.cpu_count() or 1) - 1))
