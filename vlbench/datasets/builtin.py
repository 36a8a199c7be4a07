"""Loading the built-in datasets from their records (:mod:`vlbench.datasets.specs`).

One loader serves every record: find (or download) the caption file, check its pinned sha256, read it
as a manifest, and apply the record's options (folds, the FG enlarged gallery). Each record is
registered in the dataset registry as ``BuiltinDataset(spec)``, a callable with the dataset plug-in
signature (see dataset_specs and docs/extending.md).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..errors import DataError, UnknownNameError
from ..registry import close_matches
from ..registry import datasets as DATASETS
from ..util.io import sha256_file
from ..util.paths import default_data_dir, offline
from .core import IMAGE_EXTS, Dataset, _build, check_images, read_manifest
from .download import fetch_captions, fetch_images
from .positives import load_extra_positives
from .specs import BUILTIN, FG_COMMIT, FG_REPO, IMAGE_SOURCES, DatasetSpec


def find_caption_file(fname: str, data_dir: Path) -> Path | None:
    base = Path(fname).name  # multi30k/x.jsonl may also sit flat in the data folder
    for cand in (data_dir / fname, data_dir / "captions" / fname, data_dir / base, data_dir / "captions" / base):
        if cand.is_file():
            return cand
    return None


def _caption_file(spec: DatasetSpec, data_dir: Path, download: bool | None) -> Path:
    cap_file = find_caption_file(spec.captions, data_dir)
    if cap_file is None:
        if (not offline()) if download is None else download:
            cap_file = fetch_captions(spec.name, data_dir)
        else:
            raise DataError(
                f"caption file {spec.captions!r} for {spec.name!r} is not in {data_dir}",
                f"run 'vlbench download {spec.name}' while online, or copy {spec.captions} into {data_dir} "
                f"(or pass --data-dir pointing at the folder that holds it)")
    digest = sha256_file(cap_file)
    if digest != spec.sha256:
        raise DataError(f"caption file {cap_file} has sha256 {digest[:16]}..., expected {spec.sha256[:16]}...",
                        f"the file is corrupt or a different version: delete it and run 'vlbench download {spec.name}'")
    return cap_file


def load_builtin(spec: DatasetSpec, *, data_dir=None, gallery: str = "test", require_images: bool = True,
                 download: bool | None = None, extra_positives: str | None = None) -> Dataset:
    """Load the built-in dataset described by ``spec`` (the dataset plug-in signature)."""
    name = spec.name
    data_dir = Path(data_dir).expanduser() if data_dir else default_data_dir()
    cap_file = _caption_file(spec, data_dir, download)
    rows, lines = read_manifest(cap_file)
    image_root = data_dir / "images" / spec.images
    url = IMAGE_SOURCES[spec.images].url
    source = {"caption_file": cap_file.name, "caption_sha256": spec.sha256,
              **({"language": spec.language} if spec.language else {}),
              "image_hint": f"run 'vlbench download {name}' while online, or download {url} and unzip its "
                            f"images into {image_root}"}
    ds = _build(name, rows, image_root, source, lines)
    if spec.folds:
        n = ds.n_images // spec.folds
        ds = replace(ds, folds=[np.arange(f * n, (f + 1) * n) for f in range(spec.folds)])
    if gallery != "test":
        if gallery != "fg-pool" or not spec.fg_pool:
            raise DataError(f"unknown gallery {gallery!r} for {name!r}",
                            "use --gallery test" + (", or fg-pool" if spec.fg_pool else ""))
        ds = _with_fg_pool(spec, data_dir, ds)
    if extra_positives:
        ds = load_extra_positives(ds, extra_positives, data_dir)
    if require_images:
        if download if download is not None else not offline():
            fetch_images(name, ds, data_dir)
        check_images(ds)
    return ds


def _read_pool_list(cand: Path, stem: str) -> list[str]:
    if cand.suffix == ".txt":
        return [ln.strip() for ln in cand.read_text().splitlines() if ln.strip()]
    try:
        arr = np.load(cand, allow_pickle=False)  # never unpickle downloaded files
    except ValueError:
        raise DataError(f"{cand} holds Python objects, which vlbench will not unpickle",
                        f"convert it to a text file {stem}.txt with one file name per line") from None
    return [str(x) for x in arr.tolist()]


def _with_fg_pool(spec: DatasetSpec, data_dir: Path, ds: Dataset) -> Dataset:
    """``ds`` with the extra COCO unlabeled2017 images of the FG release's enlarged pool as distractors."""
    pool_dir = data_dir / "fg_pool"
    stem = f"{spec.fg_pool}_FG_img_filenames"  # as in the release's Images/ folder
    cand = next((c for c in (pool_dir / f"{stem}.txt", pool_dir / f"{stem}.npy") if c.is_file()), None)
    if cand is None:
        raise DataError(
            f"the FG enlarged image pool list for {spec.name!r} is not in {pool_dir}",
            f"download Images/{stem}.npy from github.com/{FG_REPO} (commit {FG_COMMIT[:10]}) into {pool_dir}, "
            f"and the COCO unlabeled2017 images it names into {data_dir / 'images' / 'coco-unlabeled2017'}")
    names = _read_pool_list(cand, stem)
    test = set(ds.images)
    extra = list(dict.fromkeys(b for b in (os.path.basename(x) for x in names) if b not in test))
    total = len(ds.images) + len(extra)
    pool = {"list": cand.name, "distractors": len(extra), "gallery_size": total,
            "expected_gallery_size": spec.pool_size}
    if total != spec.pool_size:
        warnings.warn(f"the FG pool of {spec.name!r} has {total} images, the release describes {spec.pool_size}; "
                      f"check {cand}", stacklevel=2)
    return replace(ds, distractors=extra, gallery="fg-pool", distractor_root=data_dir / "images" / "coco-unlabeled2017",
                   source={**ds.source, "fg_pool": pool})


def images_problem(name: str, data_dir=None) -> DataError | None:
    """Why the image folder of built-in ``name`` cannot be complete, found without its caption file (so a
    check that meets missing captions lists the images in the same message), or None."""
    spec = BUILTIN.get(name)
    if spec is None or spec.n_images is None:
        return None
    data_dir = Path(data_dir).expanduser() if data_dir else default_data_dir()
    root = data_dir / "images" / spec.images
    have = 0
    if root.is_dir():
        with os.scandir(root) as it:
            have = sum(1 for e in it if e.name.lower().endswith(IMAGE_EXTS) and e.is_file())
    if have >= spec.n_images:
        return None
    where = "does not exist" if not root.is_dir() else f"holds {have:,} image file(s)"
    return DataError(f"the image folder {root} {where}; {name!r} has {spec.n_images:,} test images",
                     f"run 'vlbench download {name}' while online, or download {IMAGE_SOURCES[spec.images].url} "
                     f"and unzip its images into {root}")


class BuiltinDataset:
    """The registry entry of one built-in dataset: a factory with the dataset plug-in signature."""

    def __init__(self, spec: DatasetSpec):
        self.spec = spec
        self.__name__ = f"builtin:{spec.name}"

    def __call__(self, **kw) -> Dataset:
        return load_builtin(self.spec, **kw)


for _spec in BUILTIN.values():
    DATASETS.register(_spec.name, BuiltinDataset(_spec), description=_spec.description,
                      licence=_spec.licence, citation=_spec.citation)

from . import (  # noqa: E402  these register themselves: the long-caption sets (urban1k, docci, iiw-*, dci-*)
    langsets,  # and the multilingual sets (xm3600, xtd10)
    longcaptions,
    negbench,  # noqa: F401  NegBench's COCO retrieval CSVs (negbench-coco, negbench-coco-original)
)


def download_dataset(name: str, data_dir=None, captions_only: bool = False) -> None:
    """``vlbench download NAME``: the caption file and (unless ``captions_only``) the images."""

    if name in longcaptions.SETS:  # the caption source when published at a URL; the images: where to get them
        s = longcaptions.SETS[name]
        path = longcaptions.fetch_text(s, data_dir)
        print(f"{name}: captions {path}" if path else f"{name}: no caption file to download; get {s.images}")
        if not captions_only:
            print(f"{name}: images are not downloaded by vlbench; get {s.images}")
        return
    if name in langsets.SETS:  # the caption files vlbench can fetch; what to get by hand
        print("\n".join(langsets.download_sources(name, data_dir)))
        return
    if name in negbench.FILES:  # on the authors' Google Drive only: where to get the file and the images
        print(negbench.download_hint(name, data_dir))
        return
    if name not in BUILTIN:
        known = [*BUILTIN, *longcaptions.SETS, *langsets.SETS]
        # a family name whose variants are the downloadable sets (dci -> dci-extra, dci-short-extra): name them all
        variants = [n for n in longcaptions.SETS if n.startswith(f"{name}-")] if name else []
        matches = variants or close_matches(name, known)
        raise UnknownNameError(f"vlbench cannot download dataset {name!r}: it is not a built-in dataset"
                               + (" (it needs its variant named)" if variants else ""),
                               (f"did you mean {', '.join(repr(m) for m in matches)}? " if matches else "") +
                               f"the built-ins are {', '.join(known)}; a custom dataset is a local manifest "
                               f"(custom:<manifest.jsonl>) and needs no download")
    data_dir = Path(data_dir) if data_dir else default_data_dir()
    data_dir.mkdir(parents=True, exist_ok=True)
    path = fetch_captions(name, data_dir)
    print(f"{name}: captions {path}")
    if not captions_only:
        ds = load_builtin(BUILTIN[name], data_dir=data_dir, require_images=False)
        fetch_images(name, ds, data_dir)
        print(f"{name}: images in {Path(data_dir) / 'images'}")
