"""Every image of a folder as a gallery (``--gallery folder``): the test images first, then the rest by name."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..errors import DataError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff")


def folder_gallery(image_dir: str | Path, test_images: Sequence[str]) -> list[str]:
    """Every image file in ``image_dir`` as file names relative to it: the test images first, in the given
    order, then the other images of the folder sorted by name, so a gallery index is stable across runs."""
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
