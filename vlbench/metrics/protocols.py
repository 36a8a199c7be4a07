"""The chapter authors' protocol (``hendriksen2024``): the folder gallery.

What the code of Hendriksen et al. (github.com/mariyahendriksen/model-robustness-for-itr) does, and how it
differs from vlbench's standard protocol (docs/reproducing.md): i2t Recall@k as the fraction of the image's
relevant captions in the top k (``metrics.compute.evaluate(i2t_recall="fraction")``), DCG@p with a fixed
relevance model (``--relevance``), captions cut at 330 characters (``--truncate-chars``), and the t2i gallery
of every image in the image folder (:func:`folder_gallery`, here). Row-by-row reference implementations of
the first three live in tests/protocol_reference.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..errors import DataError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff")


def folder_gallery(image_dir: str | Path, test_images: Sequence[str]) -> list[str]:
    """The t2i gallery of the authors' protocol: every image file in ``image_dir``.

    Returns file names (relative to ``image_dir``): the test images first, in the given order, then the
    other images of the folder sorted by name, so a gallery index is stable across runs.
    """
    root = Path(image_dir)
    if not root.is_dir():
        raise DataError(f"image folder {root} does not exist", "point the dataset's image folder at the images")
    names = sorted(p.name for p in root.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    present = set(names)
    missing = [t for t in test_images if t not in present]
    if missing:
        raise DataError(f"{len(missing)} test image(s) are not in {root}, e.g. {missing[0]!r}",
                        "put every image the manifest lists into the image folder")
    tests = set(test_images)
    return list(test_images) + [n for n in names if n not in tests]
