"""``embedding_keys.npz``: what a finished run needs to find its embeddings again without a model.

A run writes, beside results.json, the model's content hash and embedding-cache folder, the ordered cache
keys of the gallery images (clean, and each image condition's transformed gallery) and of every model input
of the run (clean captions first, then each condition's own captions, at the offsets the run used), and the
ground truth it scored against (caption -> image, folds, extra and official ECCV / CxC positives). With
these, ``vlbench rescore`` reads the vectors from the embedding cache and re-scores them under other
suites' conventions; no model is loaded and torch is not imported.

Keys are the cache's own (``encoding.cache.item_key`` of the image file's content hash, of
``<transform key>|<content hash>`` for a transformed image, of ``txt:<model key>`` for a text), so an
entry of the index is found in the cache exactly as the encoder stored it. The file is compressed
(a 25,000-caption run with ten perturbations: a few MB).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ..encoding.cache import item_key
from ..encoding.images import file_key
from ..encoding.variant_images import variant_key
from ..errors import VlbenchError
from ..runfolder import EMBEDDING_KEYS, require_finished

FILENAME = EMBEDDING_KEYS  # the name older code imported; vlbench.runfolder owns it
FORMAT = "vlbench-embedding-keys/1"
#: the condition kinds whose gallery is the dataset's (clean or transformed image by image); others (a
#: gallery grown by --distractors) are listed in ``not_indexed`` and not re-scored
INDEXED = ("clean", "caption", "image", "shortcut")


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


def _ground_truth(ds) -> dict:
    return {"caption_to_image": [int(x) for x in ds.caption_to_image], "n_images": ds.n_images,
            "n_gallery": len(ds.gallery_images), "folds": _jsonable(ds.folds),
            "extra_positives": _jsonable(ds.extra_positives), "extra_positives_name": ds.extra_positives_name,
            "official": _jsonable(getattr(ds, "official_positives", None))}


def write_index(out: Path | None, plan, enc) -> Path | None:
    """Write ``out/embedding_keys.npz`` for the run (``plan``, ``enc``: the runner's Plan and Encoded)."""
    if out is None:
        return None

    ds = plan.ds
    contents = [file_key(ds.image_path(i)) for i in range(len(ds.gallery_images))]
    arrays: dict[str, Any] = {"image_keys|clean": np.array([item_key(c) for c in contents], dtype="U64")}
    conditions, skipped = [], []
    for c in plan.conditions:
        if c.kind not in INDEXED or c.name not in enc.offsets:  # e.g. a gallery with injected distractors
            skipped.append(c.name)
            continue
        images = "clean"
        if c.image is not None and c.name in enc.variant_img:
            images = c.name
            keys = [variant_key(c.image, i, content) for i, content in enumerate(contents)]
            arrays[f"image_keys|{c.name}"] = np.array(keys, dtype="U64")
        conditions.append({"name": c.name, "kind": c.kind, "images": images, "text_offset": enc.offsets[c.name]})
    arrays["text_keys"] = np.array([item_key("txt:" + k) for k in enc.text_keys], dtype="U64")
    meta = {"format": FORMAT, "model_hash": enc.model_hash, "run_id": enc.run_id, "n_captions": ds.n_captions,
            "cache_dir": str(enc.cache.root) if enc.cache is not None else None, "conditions": conditions,
            "not_indexed": skipped, "ground_truth": _ground_truth(ds)}
    arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
    path = Path(out) / FILENAME
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    tmp.replace(path)
    return path


def read_index(run_dir) -> tuple[dict, dict]:
    """(meta, arrays) of a run folder's index. Raises VlbenchError naming the fix when the run has none."""
    run_dir = Path(run_dir)
    path = run_dir / FILENAME
    require_finished(run_dir)
    if not path.is_file():
        raise VlbenchError(f"run {run_dir} has no {FILENAME}: it was written by a vlbench without "
                           "'vlbench rescore' support (or the file was removed)",
                           "re-run the same 'vlbench run' command with a new --out: the embedding cache makes it "
                           "cheap (nothing is encoded again)")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {name: z[name] for name in z.files}
        meta = json.loads(str(arrays.pop("meta")))
    except (OSError, ValueError, KeyError) as exc:
        raise VlbenchError(f"{path} cannot be read ({type(exc).__name__}: {exc})",
                           "re-run the 'vlbench run' command with a new --out to write it again") from None
    if meta.get("format") != FORMAT:
        raise VlbenchError(f"{path} has format {meta.get('format')!r}; this vlbench reads {FORMAT!r}",
                           "use the vlbench version that wrote the run, or re-run it")
    return meta, arrays
