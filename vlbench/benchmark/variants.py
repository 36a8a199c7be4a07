"""Run conditions that change the images (and possibly the captions): image corruptions, shortcut probes.

A :class:`Variant` is one condition of a run besides clean and the caption perturbations. Its images are
the dataset's gallery passed through an :class:`ImageTransform` after decoding, in the DataLoader workers,
before the model's preprocessing; its captions are the clean ones or its own list. Both directions use the
variant's images: i2t queries with transformed images, t2i ranks a transformed gallery.

Every transformed image is encoded once and cached under a key naming the transform and its parameters
(corruption, severity, seed, implementation version; or the shortcut number, seed and digit source) and the
image file's content hash, so a second run encodes nothing.
"""

from __future__ import annotations

import time

import numpy as np

from ..errors import DataError
from .cache import item_key
from .variant_types import ImageTransform, Variant  # noqa: F401  (re-exported)
from .encode import EncodeStats, _Collate, _Encoder, _encode_batches, _Failed, _from_cache, _raise_failed, _slice, \
    file_key, load_image


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
            return self.preprocess(transform(self._decoded(path), index, content))
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


def transformed_image(path, transform: ImageTransform, index: int):
    """One transformed image as a PIL image (what the model's preprocessing receives)."""
    return transform(load_image(path), index, file_key(path))


def encode_variant_images(adapter, paths: list, variants: list[Variant], *, batch_size: int = 64,
                          num_workers: int | None = None, cache=None, stats: EncodeStats | None = None,
                          progress: bool = True, contents: list[str] | None = None,
                          clean: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """{variant label: (len(paths), d) embeddings} for the variants that transform images.

    All variants share one DataLoader (workers decode and transform while the model encodes); an image a
    transform leaves alone (key None) reuses the clean embedding (``clean``, rows aligned with ``paths``).
    """
    import os

    from tqdm.auto import tqdm

    stats = stats if stats is not None else EncodeStats()
    t_start = time.perf_counter()
    contents = contents or [file_key(p) for p in paths]
    for v in variants:  # e.g. the corruption geometry follows the model's input size
        bind = getattr(v.image, "bind", None)
        if bind is not None:
            bind(adapter)
    keys: dict[str, list[str]] = {}
    first_job: dict[str, tuple] = {}
    for v in variants:
        if v.image is None:
            continue
        row = []
        for i, (p, c) in enumerate(zip(paths, contents)):
            k = v.image.key(i, c)
            k = item_key(c) if k is None else item_key(f"{k}|{c}")
            row.append(k)
            if k not in first_job:
                first_job[k] = (str(p), i, c, v.image if k != item_key(c) else _identity)
        keys[v.label] = row
    vec_of: dict[str, np.ndarray] = {}
    if clean is not None:
        vec_of.update((item_key(c), clean[i]) for i, c in enumerate(contents))
    todo = _from_cache(cache, "image", [k for k in first_job if k not in vec_of], vec_of)
    stats.images_cached += len(first_job) - len(todo)
    todo.sort(key=lambda k: first_job[k][1])  # image-major (stable: conditions keep their order): decode once
    if todo:
        import torch

        getattr(adapter, "real", None)  # load a lazy model once, here
        workers = num_workers if num_workers is not None else min(4, max(0, (os.cpu_count() or 1) - 1))
        batches = [todo[i:i + batch_size] for i in range(0, len(todo), batch_size)]
        loader = torch.utils.data.DataLoader(_VariantImages([first_job[k] for k in todo], adapter.preprocess),
                                             batch_size=batch_size, shuffle=False, num_workers=workers,
                                             collate_fn=_Collate(adapter.collate))
        enc = _Encoder(adapter.encode_images, _slice, "images", stats, "image_forward_seconds")
        with tqdm(total=len(todo), desc="image conditions", unit="img", disable=not progress, leave=False) as bar:
            _encode_batches(_raise_failed(zip(batches, loader)), enc, "image", cache, vec_of, set(), stats, bar)
    stats.image_seconds += time.perf_counter() - t_start
    return {label: np.stack([vec_of[k] for k in row]) for label, row in keys.items()}


def _identity(image, index, content):
    return image


def plan_variants(cfg, ds) -> list[Variant]:
    """The image-side conditions a run's options ask for: ``--perturb-images``, ``--shortcuts``."""
    from ..imageperturb.conditions import image_variants

    out = image_variants(cfg.perturb_images, cfg.seed, cfg.corrupt_at)
    if cfg.shortcuts:
        from ..shortcuts.conditions import shortcut_variants

        out += shortcut_variants(cfg.shortcuts, ds, seed=cfg.seed, digits=cfg.digits, cache_dir=cfg.cache_dir)
    if cfg.mce_reference:
        from ..errors import VlbenchError
        from ..imageperturb.conditions import read_reference

        if not cfg.perturb_images:
            raise VlbenchError("--mce-reference needs --perturb-images", "add e.g. --perturb-images all:1-5")
        read_reference(cfg.mce_reference)  # a bad path fails before any encoding
    return out


def variant_summaries(cfg, plan, rec) -> dict:
    """Extra results.json sections of the run record ``rec``: ``image_corruptions`` (mCE) and
    ``shortcuts`` (digit source)."""
    out = {}
    if cfg.perturb_images:
        from ..imageperturb.conditions import corruption_summary, read_reference

        ref = read_reference(cfg.mce_reference) if cfg.mce_reference else None
        out["image_corruptions"] = corruption_summary(rec, ref)
    if cfg.shortcuts:
        from ..shortcuts.conditions import shortcut_summary

        out["shortcuts"] = shortcut_summary(plan.variants)
    return out
