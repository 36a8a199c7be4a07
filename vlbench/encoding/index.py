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
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import VlbenchError
from ..runfolder import EMBEDDING_KEYS, is_sha256, read_results, run_file
from .cache import item_key
from .images import file_key
from .variant_images import variant_key

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
    """(meta, arrays) of a run folder's index, proven by the run's file hashes (vlbench.runfolder.run_file) and
    checked field by field before use (:func:`check_index`). Raises VlbenchError naming the fix."""
    run_dir = Path(run_dir)
    results = read_results(run_dir)
    path = run_file(run_dir, results, FILENAME)
    if path is None:
        raise VlbenchError(f"run {run_dir} has no {FILENAME}: it was written by a vlbench without "
                           "'vlbench rescore' support (or the file was removed)",
                           "re-run the same 'vlbench run' command with a new --out: the embedding cache makes it "
                           "cheap (nothing is encoded again)")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {name: z[name] for name in z.files}
        meta = json.loads(str(arrays.pop("meta")))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
        raise VlbenchError(f"{path} cannot be read ({type(exc).__name__}: {exc})",
                           "re-run the 'vlbench run' command with a new --out to write it again") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        got = meta.get("format") if isinstance(meta, dict) else None
        raise VlbenchError(f"{path} has format {got!r}; this vlbench reads {FORMAT!r}",
                           "use the vlbench version that wrote the run, or re-run it")
    check_index(path, meta, arrays, results)
    return meta, arrays


def _bad(path, what: str) -> VlbenchError:
    return VlbenchError(f"{path} is not a valid embedding index: {what}",
                        "re-run the 'vlbench run' command with a new --out to write it again")


def _ints(x, lo: int, hi: int) -> bool:
    """``x`` is a list of ints, each in [lo, hi)."""
    return isinstance(x, list) and all(isinstance(v, int) and not isinstance(v, bool) and lo <= v < hi for v in x)


def _count(meta: dict, gt: dict, name: str, path) -> int:
    v = meta.get(name) if name in meta else gt.get(name)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise _bad(path, f"{name} is {v!r}, not a count")
    return v


def check_index(path, meta: dict, arrays: dict, results: dict) -> None:
    """Every value rescore takes from the index, checked before use: the fields are there, the model hash is a
    sha256 (it becomes a cache path) and the run's own, the run id is the run's, the keys are sha256 keys, every
    offset and index is in range. VlbenchError names the first problem."""
    need = ("model_hash", "run_id", "n_captions", "cache_dir", "conditions", "ground_truth")
    missing = [n for n in need if n not in meta]
    if missing or not isinstance(meta["ground_truth"], dict) or not isinstance(meta["conditions"], list):
        raise _bad(path, f"no field {missing[0]!r}" if missing else "'ground_truth' or 'conditions' is malformed")
    model = (results.get("model") or {}).get("hash")
    if not is_sha256(meta["model_hash"]) or meta["model_hash"] != model:
        raise _bad(path, f"its model hash {str(meta['model_hash'])[:80]!r} is not the run's ({model}): the file "
                         "belongs to another run or was edited")
    if meta["run_id"] != results.get("run_id"):
        raise _bad(path, f"it names run {str(meta['run_id'])[:80]!r}, not {results.get('run_id')!r}: the file "
                         "belongs to another run")
    if meta["cache_dir"] is not None and not isinstance(meta["cache_dir"], str):
        raise _bad(path, "'cache_dir' is not a folder name")
    gt = meta["ground_truth"]
    n, n_gallery = _count(meta, gt, "n_captions", path), _count(meta, gt, "n_gallery", path)
    keys = {name: a for name, a in arrays.items() if name == "text_keys" or name.startswith("image_keys|")}
    if "text_keys" not in keys or "image_keys|clean" not in keys:
        raise _bad(path, "no text_keys or image_keys|clean array")
    for name, a in keys.items():
        if a.ndim != 1 or not all(is_sha256(k) for k in a.tolist()):
            raise _bad(path, f"{name} holds something other than sha256 cache keys")
        if name != "text_keys" and len(a) != n_gallery:
            raise _bad(path, f"{name} has {len(a)} keys for a gallery of {n_gallery}")
    for c in meta["conditions"]:
        ok = (isinstance(c, dict) and isinstance(c.get("name"), str) and f"image_keys|{c.get('images')}" in keys
              and _ints([c.get("text_offset")], 0, len(keys["text_keys"]) - n + 1))
        if not ok:
            raise _bad(path, f"condition entry {str(c)[:120]} names no image keys or an offset out of range")
    _check_ground_truth(path, gt, n, n_gallery)


def _check_ground_truth(path, gt: dict, n: int, n_gallery: int) -> None:
    if not (_ints(gt.get("caption_to_image"), 0, n_gallery) and len(gt["caption_to_image"]) == n):
        raise _bad(path, f"caption_to_image is not {n} image indices below {n_gallery}")
    folds = gt.get("folds")
    if folds is not None and not (isinstance(folds, list) and all(_ints(f, 0, n_gallery) for f in folds)):
        raise _bad(path, f"folds are not lists of image indices below {n_gallery}")
    extra = gt.get("extra_positives")
    if extra is not None:
        limits = {"t2i": n_gallery, "i2t": n}

        def rows(v):  # a direction's positives: a list per query, or {query: list}
            return v.values() if isinstance(v, dict) else v if isinstance(v, list) else [None]

        if not (isinstance(extra, dict) and set(extra) <= set(limits)
                and all(_ints(r, 0, limits[d]) for d, v in extra.items() for r in rows(v))):
            raise _bad(path, "extra_positives are not lists of candidate indices in range")
    off = gt.get("official")
    if off is not None and not (isinstance(off, dict) and off.get("kind") in ("eccv", "cxc")
                                and isinstance(off.get("image_ids"), list) and isinstance(off.get("caption_ids"), list)
                                and isinstance(off.get("gt"), dict)):
        raise _bad(path, "the official ground truth is malformed")
