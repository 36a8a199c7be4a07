"""Encoding for multi-vector models (ColQwen2, ColPali): token vectors per item, each image once, each distinct
caption once, cached by content.

A multi-vector adapter (vlbench.models.multivector) says ``multivector = True`` and gives, per item, its token
vectors (tokens x dim, ragged across items) with ``encode_image_tokens`` / ``encode_text_tokens``. Images are keyed
by their file content (``file_key``), captions by the model's own token ids (``text_keys``), as the single-vector
path keys them; each distinct key is encoded once, in batches, and every batch is stored at once in the
``token-vectors`` store (one ``.npy`` per item under the model hash: ragged items do not fit the vector cache's
shards), so a second run, or a second condition that shares captions, encodes nothing again. The result is one
:class:`~vlbench.metrics.scan.maxsim.TokenVectors` per side, in the run's order; scoring reads it through
``MaxSimSource``.

Before anything is encoded, :func:`check_memory` states the memory the run's token vectors will hold (tokens x dim
x 4 bytes per image, at the model's largest image resolution) and refuses a run that cannot fit its budget.
"""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import numpy as np

from .. import stores
from ..errors import VlbenchError
from ..metrics.scan.maxsim import TokenVectors, plan_bytes
from ..models.lazy import use_threads
from ..util.io import cache_write_bytes
from .cache import item_key
from .images import file_key, load_image
from .variant_images import bind_transforms, variant_key


def is_multivector(model) -> bool:
    """Whether the (lazy) model gives token vectors; read from its identity, so a warm run loads nothing."""
    real = getattr(model, "_real", None) or model
    if getattr(real, "multivector", False):
        return True
    ident = model.identity() if callable(getattr(model, "identity", None)) else {}
    return str((ident or {}).get("vectors", "")).startswith("multi")


class TokenStore:
    """Token vectors by content key, one ``.npy`` per item under ``token-vectors/<model hash>/<modality>/``."""

    def __init__(self, root: str | os.PathLike | None, model_hash: str, *, read: bool = True):
        self.base = stores.path("token-vectors", root) / model_hash[:32]
        self.read = read

    def _path(self, modality: str, key: str) -> Path:
        return self.base / modality / key[:2] / f"{key}.npy"

    def get(self, modality: str, key: str) -> np.ndarray | None:
        p = self._path(modality, key)
        if not self.read or not p.is_file():
            return None
        try:
            x = np.load(p, allow_pickle=False)
        except (OSError, ValueError):
            return None  # a damaged file: encoded again
        return x if x.ndim == 2 and x.dtype == np.float32 and len(x) else None

    def put(self, modality: str, key: str, x: np.ndarray) -> None:
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(x, dtype=np.float32), allow_pickle=False)
        cache_write_bytes(self._path(modality, key), buf.getvalue())


def _encode(keys: list[str], modality: str, inputs, encode, store: TokenStore | None, batch_size: int,
            what: str) -> tuple[TokenVectors, int, int, float]:
    """Each distinct key once: from the store or encoded in batches (``inputs(i)``: item i's model input;
    ``encode``: a batch of inputs -> their token vectors); (vectors in order, encoded, cached, forward seconds)."""
    first: dict[str, int] = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    got: dict[str, np.ndarray] = {}
    for k in first:
        x = store.get(modality, k) if store is not None else None
        if x is not None:
            got[k] = x
    todo = [k for k in first if k not in got]
    seconds = 0.0
    for b0 in range(0, len(todo), batch_size):
        bkeys = todo[b0:b0 + batch_size]
        t0 = time.perf_counter()
        outs = encode([inputs(first[k]) for k in bkeys])
        seconds += time.perf_counter() - t0
        if len(outs) != len(bkeys):
            raise VlbenchError(f"the model returned {len(outs)} token vector sets for {len(bkeys)} {what}",
                               "a multi-vector adapter returns one (tokens, dim) array per input")
        for k, x in zip(bkeys, outs):
            x = np.asarray(x, dtype=np.float32)
            if x.ndim != 2 or not len(x) or not np.isfinite(x).all():
                raise VlbenchError(f"the model gave {what[:-1]} {first[k]} token vectors of shape {x.shape}"
                                   + ("" if x.ndim != 2 or not len(x) else " with NaN or infinite values"),
                                   "a multi-vector adapter returns finite (tokens >= 1, dim) arrays")
            got[k] = x
            if store is not None:
                store.put(modality, k, x)
    return TokenVectors.from_items([got[k] for k in keys]), len(todo), len(first) - len(todo), seconds


def image_tokens(session, paths: list, *, batch_size: int = 8, store: TokenStore | None = None) -> TokenVectors:
    """The token vectors of image files (in order), each file content once, counted in the session's statistics."""
    model, stats = session.model, session.stats
    t0 = time.perf_counter()
    img, enc, cached, fwd = _encode([item_key(file_key(p)) for p in paths], "image", lambda i: load_image(paths[i]),
                                    lambda batch: _real(model).encode_image_tokens(batch), store, batch_size,
                                    "images")
    stats.images_encoded += enc
    stats.images_cached += cached
    stats.images_decoded += enc
    stats.image_forward_seconds += fwd
    stats.image_seconds += time.perf_counter() - t0
    return img


def caption_tokens(session, texts: list[str], keys: list[str], *, batch_size: int = 32,
                   store: TokenStore | None = None) -> TokenVectors:
    """The token vectors of captions (in order), each distinct key (the model's token ids) once, counted."""
    model, stats = session.model, session.stats
    t0 = time.perf_counter()
    txt, enc, cached, fwd = _encode([item_key(k) for k in keys], "text", lambda i: texts[i],
                                    lambda batch: _real(model).encode_text_tokens(batch), store, batch_size,
                                    "captions")
    stats.texts_total += len(texts)
    stats.texts_distinct += enc + cached
    stats.texts_encoded += enc
    stats.texts_cached += cached
    stats.text_forward_seconds += fwd
    stats.text_seconds += time.perf_counter() - t0
    return txt


def encode_multivector(session, paths: list, texts: list[str], keys: list[str], *, batch_size: int = 8,
                       store: TokenStore | None = None) -> tuple[TokenVectors, TokenVectors]:
    """The gallery's and the captions' token vectors (in the run's order), each image and each distinct caption
    (by ``keys``, the model's token ids) once; the session's statistics count what was encoded and cached."""
    img = image_tokens(session, paths, batch_size=batch_size, store=store)
    txt = caption_tokens(session, texts, keys, batch_size=max(batch_size, 32), store=store)
    if img.dim != txt.dim:
        raise VlbenchError(f"the model gives image token vectors of size {img.dim} but caption token vectors of "
                           f"size {txt.dim}", "a multi-vector model maps both sides into one token space")
    return img, txt


def encode_injected(session, conditions: list, truncate, *, batch_size: int = 8,
                    store: TokenStore | None = None) -> dict[str, tuple]:
    """{gallery condition (--distractors): (its injected images' token vectors or None, its injected captions'
    or None)}, through the token store (a clean image or caption injected again is not encoded again);
    ``truncate``: the run's caption truncation (--truncate-chars)."""
    out = {}
    for c in conditions:
        d = c.gallery
        img = image_tokens(session, list(d.images), batch_size=batch_size, store=store) if d.images else None
        texts = truncate(list(d.captions))
        txt = caption_tokens(session, texts, list(session.model.text_keys(texts)), batch_size=max(batch_size, 32),
                             store=store) if texts else None
        out[c.name] = (img, txt)
    return out


GIB = float(1 << 30)


def check_memory(n_images: int, image_tokens: int, caption_tokens: list[int], dim: int, budget_gb: float,
                 spec: str, galleries: int = 1, injected: int = 0) -> dict:
    """The memory the run's token vectors and the MaxSim scan will hold (bytes, :func:`plan_bytes`), refused
    before encoding when it is above ``budget_gb``; ``image_tokens``: the most tokens one image can have (the
    model's largest resolution); ``galleries``: the clean gallery and one per image condition (each corrupted
    gallery holds its own token vectors); ``injected``: distractor images (--distractors), held once."""
    longest = max(caption_tokens, default=1)
    need = plan_bytes(n_images + injected, image_tokens, len(caption_tokens), longest, dim)
    need["images"] = need["per_image"] * (n_images * galleries + injected)
    need["galleries"] = galleries
    need["captions"] = 4 * dim * int(sum(caption_tokens))  # the captions' real token counts
    total = need["images"] + need["captions"] + need["scan"]
    need["total"] = total
    if total > budget_gb * GIB:
        raise VlbenchError(
            f"model {spec!r} keeps {image_tokens:,} token vectors of {dim} floats per image "
            f"({need['per_image'] / 2**20:.2f} MiB per image): {n_images:,} images"
            + (f" in {galleries} galleries (clean and {galleries - 1} image condition(s))" if galleries > 1 else "")
            + (f" and {injected:,} injected distractor images" if injected else "")
            + f" take "
            f"{need['images'] / GIB:.2f} GiB, the captions {need['captions'] / GIB:.2f} GiB and the MaxSim scan "
            f"{need['scan'] / GIB:.2f} GiB, {total / GIB:.2f} GiB in all, above the budget of {budget_gb:g} GiB "
            "(--token-memory)",
            "raise --token-memory (GiB) if the machine has the memory, lower the model's image resolution "
            "(max_pixels), or evaluate fewer images (--limit) or fewer image conditions (--perturb-images)")
    return need


def image_tokens_at_most(adapter) -> int:
    """The most token vectors one image can give: the model's processor run on a blank image at its largest
    resolution (ColQwen2: max_pixels; a fixed-size model: its size), without the weights."""
    from PIL import Image  # lazy: with the model's processor

    res = adapter.image_resolution() if callable(getattr(adapter, "image_resolution", None)) else {}
    size = (int(np.sqrt(res["max_pixels"])),) * 2 if res.get("max_pixels") else \
        (int(res.get("width", 448)), int(res.get("height", 448)))
    batch = adapter.processor.process_images([Image.new("RGB", size)])
    n = int(batch["attention_mask"].sum())
    grid = batch.get("image_grid_thw")
    if grid is not None and res.get("max_pixels"):  # a dynamic resolution: the image tokens at max_pixels at most
        merge, patch = int(res.get("merge_size", 2)), int(res.get("patch_size", 14))
        n += int(res["max_pixels"]) // (patch * merge) ** 2 - int(grid[0].prod()) // merge ** 2
    return n


def available_gib() -> float:
    """The memory this machine has available now, in GiB (the default --token-memory)."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / GIB
    except (ValueError, OSError, AttributeError):
        return float("inf")  # not known here: no default budget


def encode_conditions(session, paths: list, conditions: list, *, batch_size: int = 8,
                      store: TokenStore | None = None) -> dict[str, TokenVectors]:
    """{condition name: its gallery's token vectors} for the image conditions (corruptions): each image decoded,
    passed through the condition's transform (bound to the model first: :func:`bind_transforms`) and encoded
    once, keyed by the transform and the image's content (:func:`variant_key`, the single-vector path's key), so a
    second run or a condition that leaves an image alone (its clean key) encodes nothing again."""
    model, stats = session.model, session.stats
    contents = [file_key(p) for p in paths]
    out = {}
    for c in conditions:
        keys = [variant_key(c.image, i, content) for i, content in enumerate(contents)]

        def made(i, c=c, keys=keys):  # the transformed image; a key equal to the clean one: the image as it is
            image = load_image(paths[i])
            return image if keys[i] == item_key(contents[i]) else c.image(image, i, contents[i])
        t0 = time.perf_counter()
        out[c.name], enc, cached, fwd = _encode(keys, "image", made,
                                                lambda batch: _real(model).encode_image_tokens(batch), store,
                                                batch_size, "images")
        stats.images_encoded += enc
        stats.images_cached += cached
        stats.images_decoded += enc
        stats.image_forward_seconds += fwd
        stats.image_seconds += time.perf_counter() - t0
    return out


def _real(model):
    """The adapter itself (a LazyModel loads it only now: a warm run never does)."""
    if getattr(model, "multivector", False):
        return model
    use_threads(getattr(model, "threads", None))
    return model.real


def check_on_cpu(conditions: list, spec: str) -> None:
    """Refuse image conditions bound to run on the model's device (``--pixels device`` with ``--corrupt-backend
    torch``): a multi-vector model's processor makes its pixels on the CPU, where its conditions are made too."""
    on = [c.name for c in conditions if getattr(c.image, "on_device", False)]
    if on:
        raise VlbenchError(f"a multi-vector model ({spec}) makes its pixels with its own processor on the CPU, so "
                           f"{on[0]} cannot be corrupted on the device (--pixels device with --corrupt-backend torch)",
                           "drop --pixels device: the corruptions then run on the CPU (the same torch code with "
                           "--corrupt-backend torch)")


def refuse_unsupported(cfg, plan, world: int) -> None:
    """What a multi-vector run does not do yet, refused before anything is encoded."""
    unsupported = [what for what, on in (("shortcut probes (--shortcuts)",
                                          any(c.kind == "shortcut" for c in plan.variants)),
                                         ("meaning-changing probes (--probes)", bool(cfg.probes)),
                                         ("a relevance model (--relevance, --graded minilm)",
                                          cfg.relevance not in (None, "self") or "minilm" in cfg.graded),
                                         ("torchrun", world > 1)) if on]
    if unsupported:
        raise VlbenchError(f"a multi-vector model ({cfg.model_opts.model}) cannot run with "
                           f"{', '.join(unsupported)} yet", "run it without them; caption perturbations, image "
                           "corruptions (--perturb-images), gallery distractors (--distractors), --limit, "
                           "--score-block and the metrics work (docs/models.md, 'Multi-vector models')")


def multivector_inputs(session, cfg, plan, paths: list, texts: list[str], world: int, log, truncate) -> tuple:
    """A run's token vectors: (images, every caption of Plan.texts(), the caption keys, {image condition: its
    gallery's token vectors}, {image condition: what binding to the model adds to its results entry}, {gallery
    condition: (injected images, injected captions)}). What the run asks is checked first (conditions a
    multi-vector run does not have yet are refused), then the memory (every gallery and the injected items
    counted), then encoded. ``truncate``: the run's caption truncation, for injected captions."""
    if not is_multivector(session.model):
        raise VlbenchError(f"--token-memory applies to multi-vector models (colqwen2, colpali) only; "
                           f"{cfg.model_opts.model} gives one vector per item", "drop --token-memory")
    refuse_unsupported(cfg, plan, world)
    budget = cfg.token_memory if cfg.token_memory is not None else available_gib()
    if not budget > 0:
        raise VlbenchError(f"--token-memory must be a positive number of GiB, got {budget}", "e.g. --token-memory 16")
    model = session.model
    conditions = [c for c in plan.variants if c.image is not None]
    galleries = [c for c in plan.conditions if c.kind == "gallery"]
    bound = bind_transforms(model, conditions)  # the corruption geometry, from the model's preprocessing
    check_on_cpu(conditions, cfg.model_opts.model)
    keys = list(model.text_keys(texts))
    adapter = model if getattr(model, "multivector", False) else model.real
    more_images = sum(len(c.gallery.images) for c in galleries)
    more_texts = [t for c in galleries for t in truncate(list(c.gallery.captions))]
    need = check_memory(len(set(paths)), image_tokens_at_most(adapter), adapter.text_lengths(texts + more_texts),
                        int(adapter.identity().get("embed_dim") or 0) or 128, budget, cfg.model_opts.model,
                        galleries=1 + len(conditions), injected=more_images)
    log(cfg, f"token vectors: {need['per_image'] / 2**20:.2f} MiB per image at most, {need['total'] / GIB:.3f} GiB "
             f"in all with the MaxSim scan"
             + (f" ({need['galleries']} galleries: clean and each image condition)" if conditions else "")
             + f" (budget {budget:.1f} GiB)")
    root = None if cfg.output_opts.no_cache else stores.root(cfg.output_opts.cache_dir)
    store = None if root is None else TokenStore(root, session.model_hash, read=not cfg.output_opts.restart)
    batch = cfg.model_opts.batch_size
    img, txt = encode_multivector(session, paths, texts, keys, batch_size=batch, store=store)
    variant = encode_conditions(session, paths, conditions, batch_size=batch, store=store)
    injected = encode_injected(session, galleries, truncate, batch_size=batch, store=store)
    return img, txt, keys, variant, bound, injected
