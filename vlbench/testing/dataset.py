"""``check_dataset``: a dataset (a :class:`~vlbench.datasets.core.Dataset`, a plug-in factory or a registered name)
against what the run steps read from it: images listed once each, every image with a caption, ``caption_to_image``
in range, unique caption ids (they seed the perturbations), every unusable caption reported in ``issues``,
distractors and folds that fit the gallery, positives the ranking step accepts, a stable content hash, and, with
``require_images``, image files that exist and decode.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..datasets.core import Dataset, caption_problem, check_images, load_dataset, normalize_image_path
from ..metrics.ranking import build_positives
from .common import Checker, Report, json_problem, short


def _load(target, data_dir, require_images: bool) -> Dataset:
    kw = dict(data_dir=data_dir, require_images=require_images, download=False)
    if isinstance(target, str):
        return load_dataset(target, **kw)
    if callable(target) and not isinstance(target, Dataset):  # the plug-in factory, called as load_dataset does
        return target(gallery="test", **kw)
    return target


def _check_lists(c: Checker, ds: Dataset) -> None:
    with c.check("images"):
        c.expect(isinstance(ds.name, str) and bool(ds.name), "name: a non-empty str", short(ds.name))
        c.expect(len(ds.images) > 0, "at least one image", 0)
        c.expect(all(isinstance(x, str) and x.strip() for x in ds.images), "image names: non-empty str",
                 short([x for x in ds.images if not isinstance(x, str) or not x.strip()][:3]))
        dup = [x for x, n in Counter(map(normalize_image_path, ds.images)).items() if n > 1]
        c.expect(not dup, "every image listed once", f"listed twice: {short(dup[:3])}")
    with c.check("captions"):
        n = len(ds.captions)
        c.expect(n > 0 and all(isinstance(t, str) for t in ds.captions), "a non-empty list of str captions",
                 f"{n} captions" if n == 0 else "a caption that is not a str")
        c2i = np.asarray(ds.caption_to_image)
        c.expect(c2i.shape == (n,) and c2i.dtype.kind in "iu", f"caption_to_image: {n} integers",
                 f"shape {c2i.shape}, dtype {c2i.dtype}")
        c.expect(bool(((c2i >= 0) & (c2i < ds.n_images)).all()), f"image indices in 0..{ds.n_images - 1}",
                 short(sorted({int(i) for i in c2i if not 0 <= i < ds.n_images})[:5]))
        without = np.flatnonzero(np.bincount(c2i, minlength=ds.n_images) == 0)
        c.expect(len(without) == 0, "every image with at least one caption (an uncaptioned image is a distractor)",
                 f"{len(without)} images without one, e.g. {short([ds.images[i] for i in without[:3]])}")
    with c.check("caption ids"):
        ids = ds.caption_ids
        c.expect(len(ids) == len(ds.captions) and all(isinstance(i, str) and i for i in ids),
                 f"{len(ds.captions)} non-empty str caption ids", f"{len(ids)} ids")
        dup = [x for x, n in Counter(ids).items() if n > 1]
        c.expect(not dup, "unique caption ids (they seed the perturbations)", f"repeated: {short(dup[:3])}")
    with c.check("caption issues reported"):
        reported = {i.get("caption_id") for i in ds.issues}
        silent = [cid for cid, t in zip(ds.caption_ids, ds.captions) if caption_problem(t) and cid not in reported]
        c.expect(not silent, "every unusable caption (empty, no letters) listed in issues", short(silent[:3]))


def _check_gallery(c: Checker, ds: Dataset) -> None:
    with c.check("gallery"):
        dup = set(ds.distractors) & set(ds.images)
        c.expect(not dup and len(set(ds.distractors)) == len(ds.distractors),
                 "distractors listed once, none of them a test image", short(sorted(dup)[:3]))
        if ds.folds is not None:
            seen = np.concatenate([np.asarray(f) for f in ds.folds]) if ds.folds else np.zeros(0, int)
            c.expect(len(set(seen.tolist())) == len(seen) and bool(((seen >= 0) & (seen < ds.n_images)).all()),
                     f"disjoint folds of image indices in 0..{ds.n_images - 1}", short(seen[:10].tolist()))
        build_positives(ds.caption_to_image, len(ds.gallery_images), ds.extra_positives)
        c.expect(ds.extra_positives is None or bool(ds.extra_positives_name),
                 "extra_positives_name set with extra_positives", short(ds.extra_positives_name))
    with c.check("description"):
        described = ds.describe()
        problem = json_problem(described)
        c.expect(problem is None, "describe() is plain JSON (it is written into results)", problem)
        c.expect(described["hash"] == ds.content_hash(), "a stable content hash", "two hashes")


def _check_files(c: Checker, ds: Dataset, require_images: bool) -> None:
    if not require_images:
        c.skip("image files", "require_images=False")
        return
    from PIL import Image

    with c.check("image files"):
        check_images(ds)
        for i in range(min(3, len(ds.gallery_images))):
            with Image.open(ds.image_path(i)) as im:
                im.convert("RGB").load()


def check_dataset(dataset, *, data_dir=None, require_images: bool = True) -> Report:
    """Check a dataset: a ``Dataset``, its plug-in factory, a registered name or ``custom:<manifest>`` (loaded
    with ``data_dir``, no download). ``require_images=False`` checks the captions alone. Returns the
    :class:`Report` of the checks passed; raises :class:`ConformanceError` at the first failure."""
    label = dataset if isinstance(dataset, str) else str(getattr(dataset, "name", None) or
                                                         getattr(dataset, "__name__", type(dataset).__name__))
    c = Checker("dataset", label)
    with c.check("loads"):
        ds = _load(dataset, data_dir, require_images)
        c.expect(isinstance(ds, Dataset), "a vlbench Dataset", type(ds).__name__)
    _check_lists(c, ds)
    _check_gallery(c, ds)
    if not isinstance(dataset, Dataset):
        with c.check("loads the same twice"):
            again = _load(dataset, data_dir, require_images)
            c.expect(again.content_hash() == ds.content_hash(), "the same content on a second load",
                     "a different content hash")
    else:
        c.skip("loads the same twice", "given a Dataset, not how to load it")
    _check_files(c, ds, require_images)
    return c.report
