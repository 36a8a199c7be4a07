"""Multilingual retrieval sets: ``xm3600`` (Crossmodal-3600, 36 languages) and ``xtd10`` (XTD10, 11 languages),
each read in its released layout (:mod:`.xm3600`, :mod:`.xtd10`) and registered in the dataset registry.

``--dataset xm3600?languages=de,fr,ja`` selects languages (default: all of the set); one run scores every
selected language in both directions and reports their mean (each language is a fold: :mod:`.common`), with the
per-language values in results.json ``languages`` (docs/multilingual.md).
"""

from __future__ import annotations

from pathlib import Path

from ...errors import DataError
from ...registry import datasets as DATASETS
from ...util.paths import default_data_dir, offline
from ..core import check_images
from . import xm3600, xtd10
from .common import LanguageSet, build, per_language  # noqa: F401  per_language: the run's record reads it

SETS: dict[str, LanguageSet] = {xm3600.XM3600.name: xm3600.XM3600, xtd10.XTD10.name: xtd10.XTD10}


def load_language_set(name: str, *, options: str | None = None, data_dir=None, gallery: str = "test",
                      require_images: bool = True, download: bool | None = None):
    """The Dataset of language set ``name`` with ``options`` (the part after ``?``)."""
    if gallery != "test":
        raise DataError(f"--gallery {gallery} does not apply to {name}", "leave --gallery out")
    root = Path(data_dir).expanduser() if data_dir else default_data_dir()
    if name == "xtd10":
        s, images, captions, selected, source = xtd10.load(
            root, options, download_missing=(not offline()) if download is None else bool(download))
    else:
        s, images, captions, selected, source = xm3600.load(root, options)
    ds = build(s, images, captions, selected, root / "images" / s.images, source)
    if require_images:
        check_images(ds)
    return ds


def download_sources(name: str, data_dir=None) -> list[str]:
    """``vlbench download xm3600|xtd10``: the caption files vlbench can fetch (XTD10's, pinned), and what to get by
    hand (XM3600's captions are released inside a zip; the images of both); the lines to print."""
    s = SETS[name]
    root = Path(data_dir).expanduser() if data_dir else default_data_dir()
    if name == "xtd10":
        for src in (xtd10.IMAGE_LIST, *xtd10.FILES.values()):
            xtd10.fetch(root / s.folder, src, True)
        lines = [f"{name}: captions in {root / s.folder} ({len(xtd10.FILES)} languages, checksums pinned)"]
    else:
        lines = [f"{name}: no caption file to download as is; get {xm3600.CAPTIONS_HINT} into {root / s.folder}"]
    where = root / "images" / s.images
    return lines + [f"{name}: images are not downloaded by vlbench; get {s.image_hint} into {where}"]


def _factory(s: LanguageSet):
    def load(data_dir=None, gallery: str = "test", require_images: bool = True, download=None, options=None, **_):
        return load_language_set(s.name, options=options, data_dir=data_dir, gallery=gallery,
                                 require_images=require_images, download=download)
    load.__name__ = f"load_{s.name}"
    load.takes_options = s.options  # type: ignore[attr-defined]  # load_dataset passes the spec's ?options
    return load


for _s in SETS.values():
    DATASETS.register(_s.name, _factory(_s), description=_s.description, licence=_s.licence, citation=_s.citation)
