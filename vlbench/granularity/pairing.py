"""Matching the images of an (original, fine-grained) pair of caption sets for the paired bootstrap.

Two datasets are paired by the image paths of their manifests, in any order (issue #12: pairing by
line number compared image with wrong image); sets of different images are refused unless the caller
asks for independent resampling.
"""

from __future__ import annotations

import posixpath

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
        f"pair a dataset with its fine-grained version of the same images (matched by the manifests' "
        f"image paths, in any order; with --limit, both must cover the same images); to compare "
        f"unrelated datasets, pass --unpaired (Python: pairing='independent') to resample them independently")


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
