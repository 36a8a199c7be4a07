"""Matching the images of an (original, fine-grained) pair of caption sets for the paired bootstrap.

Two datasets are paired by the image paths of their manifests, in any order (pairing by
line number compared image with wrong image); sets of different images are refused unless the caller
asks for independent resampling. The pairs and the bootstrap settings are checked here before any
caption is parsed.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

import numpy as np

from ..errors import VlbenchError
from .features import FEATURES


def pair_images(base: str, fine: str, img_b: list, img_f: list, pairing: str):
    """Image keys of both datasets and whether they are paired (the same set of images).

    Images are matched by their manifest path; when the paths differ only in their folders (one
    manifest says ``images/x.jpg``, the other ``x.jpg``) and the file names are unique, by file name.
    ``pairing="image"`` refuses two datasets whose image sets differ; ``"independent"`` resamples
    them independently (and says so).
    """
    if pairing not in ("image", "independent"):
        raise VlbenchError(f"pairing {pairing!r} is not valid", "use 'image' or 'independent'")
    sb, sf = set(img_b), set(img_f)
    if sb != sf:
        base_b = {k: posixpath.basename(k) for k in sb}
        base_f = {k: posixpath.basename(k) for k in sf}
        if (len(set(base_b.values())) == len(sb) and len(set(base_f.values())) == len(sf)
                and set(base_b.values()) == set(base_f.values())):
            img_b, img_f = [base_b[k] for k in img_b], [base_f[k] for k in img_f]
            sb = sf = set(img_b)
    if sb == sf:
        return {base: img_b, fine: img_f}, True
    if pairing == "independent":
        return {base: img_b, fine: img_f}, False
    only_b, only_f = sorted(sb - sf), sorted(sf - sb)
    example = (only_b or only_f)[0]
    raise VlbenchError(
        f"{fine!r} and {base!r} do not describe the same images: {len(sb & sf):,} shared, {len(only_b):,} "
        f"only in {base!r}, {len(only_f):,} only in {fine!r} (e.g. {example!r})",
        "pair a dataset with its fine-grained version of the same images (matched by the manifests' "
        "image paths, in any order; with --limit, both must cover the same images); to compare "
        "unrelated datasets, pass --unpaired (Python: pairing='independent') to resample them independently")


def image_sums(per_caption, base: str, fine: str, pairing: str):
    """Per dataset of the pair: (image keys, per-image feature sums, per-image value counts), over
    analysed captions; images are keyed as ``pair_images`` matches them (all captions count for the
    match, so an image whose captions were all excluded in one set does not break the pairing)."""
    subs = {name: per_caption[per_caption["dataset"] == name] for name in (base, fine)}
    for name, sub in subs.items():
        if not (sub["status"] == "ok").any():
            raise VlbenchError(f"dataset {name!r} has no analysable caption", "check its captions")
    keys, paired = pair_images(base, fine, subs[base]["image"].astype(str).tolist(),
                                subs[fine]["image"].astype(str).tolist(), pairing)
    stats = {}
    for name, sub in subs.items():
        uniq, inv = np.unique(np.asarray(keys[name], dtype=object), return_inverse=True)
        ok = (sub["status"] == "ok").to_numpy()
        vals = sub[list(FEATURES)].to_numpy(dtype=float)[ok]
        valid = ~np.isnan(vals)
        sums = np.zeros((len(uniq), len(FEATURES)))
        cnts = np.zeros((len(uniq), len(FEATURES)))
        np.add.at(sums, inv[ok], np.where(valid, vals, 0.0))
        np.add.at(cnts, inv[ok], valid.astype(float))
        stats[name] = (uniq, sums, cnts)
    return stats, paired


def check_bootstrap_settings(n_boot, seed, ci) -> None:
    """Refuse bootstrap settings that cannot give an interval (before any caption is parsed)."""
    if isinstance(ci, bool) or not isinstance(ci, (int, float)) or not 0 < ci < 1:
        raise VlbenchError(f"--ci {ci} is not a confidence level: it must lie strictly between 0 and 1",
                           "give e.g. --ci 0.95 (Python: ci=0.95) for a 95% interval")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 0:
        raise VlbenchError(f"--bootstrap {n_boot} is not a number of bootstrap samples",
                           "give a whole number >= 0 (0: no intervals), e.g. --bootstrap 1000")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise VlbenchError(f"--seed {seed} is not a valid bootstrap seed: it must be a whole number >= 0",
                           "give e.g. --seed 0")


def _custom_path(spec) -> str | None:
    if not isinstance(spec, str):
        return None
    path = spec[len("custom:"):] if spec.startswith("custom:") else spec if spec.endswith(".jsonl") else None
    return None if not path else str(Path(path).expanduser().resolve())


def resolve_pairs(pairs, loaded: list[tuple]) -> list[tuple[str, str]]:
    """Each pair's two datasets as table names. A pair names a dataset as ``--dataset`` did (the same
    string, e.g. ``flickr30k-fg`` or ``custom:path/to/x.jsonl``), by its table name (``custom:x.jsonl``) or
    by another path to the same manifest; anything else is refused, naming the requested datasets."""
    by_key: dict = {}
    for name, _, spec in loaded:
        by_key.setdefault(name, name)
        if isinstance(spec, str):
            by_key.setdefault(spec.strip(), name)
            if _custom_path(spec):
                by_key.setdefault(("path", _custom_path(spec)), name)
    out = []
    for p in pairs:
        p = tuple(p) if isinstance(p, (tuple, list)) else (p,)
        got = [by_key.get(x.strip()) if isinstance(x, str) else None for x in p]
        got = [g if g is not None or not _custom_path(x) else by_key.get(("path", _custom_path(x)))
               for g, x in zip(got, p)]
        if len(p) != 2 or any(g is None for g in got):
            names = ", ".join(spec if isinstance(spec, str) else name for name, _, spec in loaded)
            raise VlbenchError(f"pair {','.join(map(str, p))!r} names a dataset that was not requested",
                               f"give --pair ORIGINAL,FINE_GRAINED with two of the requested datasets, written "
                               f"as in --dataset: {names}")
        if got[0] == got[1]:
            raise VlbenchError(f"pair {','.join(p)!r} names the same dataset twice",
                               "give an original and its fine-grained version, e.g. --pair coco,coco-fg")
        first, second = got
        assert first is not None and second is not None  # checked above
        out.append((first, second))
    return out
