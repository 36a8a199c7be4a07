"""What the failure browser reads from a finished run folder, and from the dataset the run evaluated.

A run folder gives ``results.json`` (the dataset's spec, hash and source, every condition's meta: the
perturbation's name, parameters and seed, the corruption's severity, seed and geometry) and ``retrieved.npz``
(per condition and direction the top-10 candidates and the 1-based rank of the first positive, in the
dataset's query order). The captions, images and perturbed captions come from the dataset, loaded again from
the recorded spec and checked against the recorded content hash, so the page shows what the model read.
"""

from __future__ import annotations

import csv
import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..datasets.core import Dataset, safe_join
from ..datasets.folds import fold_index_maps
from ..encoding.cache import item_key
from ..encoding.images import file_key
from ..errors import DataError, VlbenchError
from ..perturbations.cache import perturbed_captions
from ..pipeline.sensitivity.plan import probe_sets
from ..runfolder import PER_ITEM, RETRIEVED, run_file

#: the direction the browser shows per condition kind: a caption perturbation changes t2i queries, an image
#: corruption i2t queries (its t2i side, a corrupted gallery, is not browsed)
DIRECTION = {"caption": "t2i", "image": "i2t", "sensitivity": "t2i"}  # sensitivity: a probe's t2i queries


def condition_kind(meta: dict) -> str:
    """clean, caption, image, shortcut, gallery, ... from a results.json condition entry."""
    if meta.get("kind"):
        return str(meta["kind"])
    return "caption" if meta.get("perturbation") else "clean"


@dataclass
class RunSource:
    """One run folder, read: its results, its retrieved lists and its dataset (images reachable)."""

    folder: Path
    results: dict
    retrieved: dict  # array name -> array (retrieved.npz)
    ds: Dataset  # content hash equal to the run's
    perturbed: dict = field(default_factory=dict)  # caption condition -> its perturbed captions (list of str)
    #: probe condition -> {caption index: (s(image, original), s(image, probe))}: the run's per_item.csv.gz
    probe_scores: dict = field(default_factory=dict)
    image_path: object = None  # gallery index -> image file (image_locator); None: the dataset's own
    flip_rows: dict = field(default_factory=dict)  # runread.read_flips: the run's flips.csv

    @property
    def conditions(self) -> dict:
        return self.results.get("conditions") or {}

    def ranks(self, condition: str, direction: str) -> np.ndarray:
        return np.asarray(self.retrieved[f"{condition}|{direction}|rank"]).astype(np.int64)

    def top(self, condition: str, direction: str) -> np.ndarray:
        return np.asarray(self.retrieved[f"{condition}|{direction}"]).astype(np.int64)

    def query_index(self, direction: str) -> np.ndarray:
        """Row of a retrieved.npz array -> the dataset's query index (caption for t2i, image for i2t): the
        identity on one gallery; with folds, rows go fold by fold (per_query.csv.gz order)."""
        ds = self.ds
        if ds.folds is None:
            return np.arange(ds.n_captions if direction == "t2i" else ds.n_images)
        side = 0 if direction == "i2t" else 1  # i2t rows are images, t2i rows captions
        return np.concatenate([m[side] for m in fold_index_maps(ds.caption_to_image, ds.folds)])

    def has(self, condition: str, direction: str) -> bool:
        return f"{condition}|{direction}" in self.retrieved and f"{condition}|{direction}|rank" in self.retrieved


def image_locator(ds, images_dir=None):
    """Gallery index -> image file. ``images_dir``: where the images are now, either as the dataset lays them out
    (``DIR/<path in the dataset>``) or all in one folder (``DIR/<file name>``), whichever holds the first image."""
    if images_dir is None:
        return ds.image_path

    root, names = Path(images_dir), ds.gallery_images
    if names and not (root / names[0]).is_file() and (root / Path(names[0]).name).is_file():
        return lambda i: root / Path(names[i]).name
    return lambda i: safe_join(root, names[i])


def injected(meta: dict) -> dict:
    """Candidates a condition adds to the run's gallery: {"t2i": injected images, "i2t": injected captions};
    zero for every condition but gallery distractors (kind "gallery", ``--distractors``), whose ids come after
    the dataset's (pipeline.report: id = dataset size + j)."""
    extra = meta.get("distractors") if condition_kind(meta) == "gallery" else None
    extra = extra if isinstance(extra, dict) else {}

    def count(key):
        n = extra.get(key)
        return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0

    return {"t2i": count("n_images"), "i2t": count("n_captions")}


def check_retrieved(src: RunSource) -> None:
    """Every list and rank of retrieved.npz the page reads is in range for the condition's own gallery: as many
    rows as queries, candidate indices below that gallery's size (t2i: the dataset's images, i2t: its captions,
    plus what a distractor condition injected; -1 pads a short list), ranks from 1 to that size. VlbenchError
    names the first array that is not."""
    ds = src.ds
    for direction, n_base in (("t2i", len(ds.gallery_images)), ("i2t", ds.n_captions)):
        n_queries = len(src.query_index(direction))
        stages = [*src.conditions.items(), *((f"rerank:{c}", m) for c, m in src.conditions.items())]
        for c, meta in stages:  # a two-stage run's final rankings (rerank:<condition>) too
            if not src.has(c, direction):
                continue
            n_cand = n_base + injected(meta if isinstance(meta, dict) else {})[direction]
            top, ranks = src.retrieved[f"{c}|{direction}"], src.retrieved[f"{c}|{direction}|rank"]
            ok = (top.ndim == 2 and ranks.ndim == 1 and len(top) == len(ranks) == n_queries
                  and top.dtype.kind in "iu" and ranks.dtype.kind in "iu"
                  and (top.size == 0 or (top.min() >= -1 and top.max() < n_cand))
                  and (ranks.size == 0 or (ranks.min() >= 1 and ranks.max() <= n_cand)))
            if not ok:
                extra = f", {n_cand - n_base} of them injected" if n_cand > n_base else ""
                raise VlbenchError(f"{src.folder / RETRIEVED}: the {direction} lists or ranks of condition {c!r} "
                                   f"are out of range for its gallery ({n_queries} queries, {n_cand} "
                                   f"candidates{extra})", "re-run the 'vlbench run' command with a new --out to "
                                                          "write it again")


def check_image_contents(locate, indices, keys, folder) -> None:
    """Every image the page shows is the one the run evaluated: its content key (the sha256 of its bytes, as
    the run's embedding index holds it) equals the run's; else one error naming the first replaced image."""
    changed = [locate(i) for i in sorted(set(int(i) for i in indices)) if item_key(file_key(locate(i))) != keys[i]]
    if changed:
        raise DataError(f"{len(changed)} image(s) the page shows are not the ones the run evaluated (their content "
                        f"differs from the run's record; first: {changed[0]}): replaced after the run?",
                        "restore the run's images, or pass --images-dir DIR naming a folder that holds them")


def check_images(locate, indices, folder) -> None:
    """Every image the page shows is a readable file; else one error naming the folder and the option."""
    missing = [locate(i) for i in sorted(set(int(i) for i in indices)) if not locate(i).is_file()]
    if missing:
        raise DataError(f"{len(missing)} image(s) the page shows are not in {folder} (first: {missing[0]})",
                        "pass --images-dir DIR (the folder that holds the run's images, as the dataset lays them "
                        "out or all in one folder) or --data-dir DIR")


def _constructor_params(meta: dict) -> dict:
    """What rebuilds a perturbation from its recorded params: a registered variant takes only its name
    (the tokenizer rules it records come with it)."""
    params = dict(meta.get("params") or {})
    variant = params.get("variant")
    return {"variant": variant} if variant not in (None, "standard") else params


def _check_hash(c: str, ps, want) -> None:
    if want and ps.captions_hash() != want:
        raise VlbenchError(f"perturbation {c!r} now gives other captions than the run's (captions hash "
                           f"{ps.captions_hash()[:12]}, the run's {want[:12]}): another vlbench or language "
                           "tool version", "explain with the vlbench and language data that made the run, "
                           "or pass its --cache-dir (where its perturbed captions are kept)")


def probe_texts(ds, conditions: dict, *, cache_dir=None, log=None) -> dict:
    """probe condition (kind sensitivity) -> its probe texts as the run made them (the probe cache first), each
    checked against the captions hash the run recorded."""
    out = {}
    for c, m in conditions.items():
        if condition_kind(m) != "sensitivity":
            continue
        name = str(m.get("name", c))
        ps = probe_sets(ds, [name], params={name: dict(m.get("params") or {})}, seed=int(m.get("seed", 0)),
                        cache_dir=cache_dir, write=False, log=log)[name]
        _check_hash(c, ps, m.get("captions_hash"))
        out[c] = list(ps.texts)
    return out


def probe_scores(folder: Path, results: dict, ds) -> dict:
    """probe condition -> {caption index: (s(image, original), s(image, probe))} from the run's per_item.csv.gz
    (proven by its file hashes); {} when the run wrote none."""
    path = run_file(folder, results, PER_ITEM)
    if path is None:
        return {}
    index = {cid: i for i, cid in enumerate(ds.caption_ids)}
    out: dict = {}
    with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            if row.get("scores") and row.get("item_id") in index:
                a, b = json.loads(row["scores"])
                out.setdefault(row["condition"], {})[index[row["item_id"]]] = (float(a), float(b))
    return out


def perturbed_texts(ds, conditions: dict, *, cache_dir=None, log=None) -> dict:
    """caption condition -> its perturbed captions as the run made them (its perturbation cache first), each
    checked against the captions hash the run recorded; probe conditions too (:func:`probe_texts`)."""

    names = [c for c, m in conditions.items() if condition_kind(m) == "caption"]
    if not names:
        return probe_texts(ds, conditions, cache_dir=cache_dir, log=log)
    seeds = {int(conditions[c].get("seed", 0)) for c in names}
    out = {}
    for seed in sorted(seeds):
        group = [c for c in names if int(conditions[c].get("seed", 0)) == seed]
        params = {conditions[c].get("name", c): _constructor_params(conditions[c]) for c in group}
        sets = perturbed_captions(ds, [conditions[c].get("name", c) for c in group], params=params, seed=seed,
                                  cache_dir=cache_dir, read=True, write=False, progress=False, log=log)
        for c in group:
            ps = sets[conditions[c].get("name", c)]
            _check_hash(c, ps, conditions[c].get("captions_hash"))
            out[c] = list(ps.texts)
    return {**out, **probe_texts(ds, conditions, cache_dir=cache_dir, log=log)}
