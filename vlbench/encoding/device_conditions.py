"""Image conditions made on the model's device: ``--pixels device`` with transforms that run there.

A condition's transform that says ``on_device`` (the torch corruption backend bound to a model that makes its
pixels on its device: vlbench/imageperturb/ondevice.py) gets the gallery as the device path decodes it
(encoding/device_pixels.py: JPEGs on the device, other files through PIL), as uint8 (3, H, W) tensors, and
transforms them there with ``apply_batch``; the model's ``to_pixels`` and ``from_pixels`` follow on the same
device. Nothing of it runs in DataLoader workers, so the device never waits for CPU corruptions.

The encoder's batches are the ones the workers' path makes (the same jobs in the same order, image-major), so
the model sees the same batches. The work is done in windows of consecutive batches: each window's files are read
in a thread while the previous window runs, each file is decoded once per window, and each condition's images in
the window are transformed in one call (a batch per condition, not one image at a time). A window holds up to
:data:`WINDOW_JOBS` transformed images (about 0.6 GB of uint8 pixels at 224 x 224).
"""

from __future__ import annotations

import concurrent.futures
import time

from ..errors import DataError, VlbenchError
from .device_pixels import DeviceBatches, _read, device_readable

#: the most transformed images a window holds before the encoder takes its batches
WINDOW_JOBS = 4096


class DeviceConditionBatches:
    """``for keys, batch in DeviceConditionBatches(...)``: model-input batches of transformed images made on the
    device. ``job_of``: key -> (path, gallery index, content key, transform), as the workers' jobs."""

    def __init__(self, adapter, batches: list[list[str]], job_of: dict, stats):
        self.adapter, self.job_of, self.stats = adapter, job_of, stats
        self.decoder = DeviceBatches(adapter, [], {}, stats)
        conditions = len({id(job[3]) for job in job_of.values()}) or 1
        size = max((len(b) for b in batches), default=1)
        per = max(1, min(conditions, WINDOW_JOBS // size))
        self.windows = [batches[i:i + per] for i in range(0, len(batches), per)]

    def _files(self, window: list) -> tuple[list, list, list]:
        """(the window's distinct files, which the device decoder may take, their bytes): read in a thread."""
        paths = list(dict.fromkeys(str(self.job_of[k][0]) for b in window for k in b))
        fast = [device_readable(p) for p in paths]
        return paths, fast, _read([p for p, f in zip(paths, fast) if f])

    def __iter__(self):
        if not self.windows:
            return
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(self._files, self.windows[0])
            for i, window in enumerate(self.windows):
                files = pending.result()
                if i + 1 < len(self.windows):
                    pending = pool.submit(self._files, self.windows[i + 1])
                yield from self._window(window, *files)

    def _window(self, window: list, paths: list, fast: list, data: list):
        images, on_device = self.decoder.images(paths, fast, data)
        self.stats.images_decoded += len(paths)
        self.stats.images_device_decoded += on_device
        made = self._transform([k for b in window for k in b], dict(zip(paths, images)))
        for keys in window:
            yield keys, self.adapter.from_pixels(self.adapter.to_pixels([made[k] for k in keys]))

    def _transform(self, keys: list, decoded: dict) -> dict:
        """{key: transformed uint8 (3, H, W) tensor}: one ``apply_batch`` call per condition of the window."""
        groups: dict[int, list] = {}
        for k in keys:
            groups.setdefault(id(self.job_of[k][3]), []).append(k)
        memo: dict = {}  # what the conditions of one image share (its fit to the model's input)
        made: dict = {}
        for ks in groups.values():
            jobs = [self.job_of[k] for k in ks]
            t0 = time.perf_counter()
            out = _apply(jobs[0][3], [decoded[str(j[0])] for j in jobs], jobs, memo)
            self.stats.corrupt_device_seconds += time.perf_counter() - t0
            self.stats.images_corrupted_device += len(ks)
            made.update(zip(ks, out))
        return made


def _apply(transform, images: list, jobs: list, memo: dict) -> list:
    """``transform.apply_batch`` on the images of ``jobs``; an error is raised as a DataError naming the file of
    the image at fault (found by transforming the images one by one), as the workers name it."""
    indices, contents = [j[1] for j in jobs], [j[2] for j in jobs]
    try:
        return list(transform.apply_batch(images, indices, contents, memo))
    except VlbenchError as exc:
        for img, job in zip(images, jobs):
            try:
                transform.apply_batch([img], [job[1]], [job[2]], {})
            except VlbenchError as one:
                raise DataError(f"{job[0]}: {one.message}", one.hint) from None
        raise DataError(exc.message, exc.hint) from None
