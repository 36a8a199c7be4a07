"""The t2i gallery of a run (``--gallery NAME``): a registered :class:`GalleryProvider`
(``vlbench.registry.galleries``; ``vlbench ls galleries``). The built-ins: the test set's images (``test``),
the FG release's enlarged pool (``fg-pool``, applied by the dataset loader) and every image of the test
images' folder (``folder``). A study or a plug-in adds one by registering a provider: what the dataset loader
is asked for, what is done to the loaded dataset, what the preflight checks and what the protocol label adds.

A folder gallery is checked against the dataset's record: a built-in dataset's image source names the full
folder its test images come from and that folder's size (``ImageSource.folder_size``); a smaller folder is
refused unless ``--allow-partial-gallery`` (then the protocol label names the size: ``[gallery=N]``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import registry
from ..datasets.builtin import BUILTIN
from ..datasets.folders import folder_gallery
from ..datasets.specs import IMAGE_SOURCES
from ..errors import VlbenchError


@dataclass(frozen=True)
class GalleryProvider:
    """One ``--gallery`` choice. ``loader_gallery``: the gallery the dataset loader is asked for; ``apply(ds,
    cfg)``: the run's dataset from the loaded one; ``problem(cfg, ds)``: (what, fix) the preflight reports, or
    None; ``partial(cfg, ds)``: (size, expected) when the gallery is smaller than it should be (the protocol
    label then says ``[gallery=size]``), or None."""

    name: str
    description: str
    loader_gallery: str = "test"
    apply: Callable | None = None
    problem: Callable | None = None
    partial: Callable | None = None


#: the choices of --gallery, the built-ins first (read when used: a study may register more)
GALLERIES = registry.Names(registry.galleries, first=("test", "fg-pool", "folder"))


def provider(cfg) -> GalleryProvider:
    return registry.galleries.get(cfg.gallery or "test")


def _source(cfg):
    spec = BUILTIN.get(cfg.dataset) if isinstance(cfg.dataset, str) else None
    return IMAGE_SOURCES.get(spec.images) if spec is not None else None


def expected_gallery(cfg) -> int | None:
    """The size of the full image folder of ``cfg.dataset`` (built-in datasets only), or None."""
    source = _source(cfg)
    return source.folder_size if source is not None else None


def partial_gallery(cfg, ds) -> tuple[int, int] | None:
    """(size, expected) when the run's gallery is smaller than it should be (its provider says), else None."""
    check = provider(cfg).partial
    return check(cfg, ds) if check is not None and ds is not None else None


def gallery_problem(cfg, ds) -> tuple[str, str] | None:
    """(what, fix) for the preflight when the run's gallery cannot be used as asked (its provider says)."""
    check = provider(cfg).problem
    return check(cfg, ds) if check is not None and ds is not None else None


def dataset_gallery(cfg) -> str:
    """The gallery to ask the dataset loader for (a provider's own step comes afterwards: apply_gallery)."""
    return provider(cfg).loader_gallery


def apply_gallery(ds, cfg):
    """The run's dataset with its gallery: the provider's ``apply`` (``folder``: every other image of the test
    images' folder becomes a t2i distractor)."""
    step = provider(cfg).apply
    return step(ds, cfg) if step is not None else ds


def _folder_partial(cfg, ds) -> tuple[int, int] | None:
    """(size, expected) when ``ds``'s folder gallery is smaller than the dataset's full folder, else None."""
    expected = expected_gallery(cfg) if ds is not None else None
    if expected is None:
        return None
    n = len(ds.gallery_images)
    return (n, expected) if n < expected else None


def _folder_problem(cfg, ds) -> tuple[str, str] | None:
    """(what, fix) when the folder gallery is smaller than the dataset's full folder and
    --allow-partial-gallery was not given; None otherwise. Counts the image files (no image is read)."""
    expected = expected_gallery(cfg) if ds is not None else None
    if expected is None or cfg.allow_partial_gallery:
        return None
    try:
        folder, names = _gallery_names(ds)
    except VlbenchError:
        return None  # the image check reports the folder itself
    if len(names) >= expected:
        return None
    source = _source(cfg)
    what = (source.folder if source is not None else None) or "image"
    return (f"--gallery folder: {folder} holds {len(names):,} images, the protocol's t2i gallery is the whole "
            f"{what} folder ({expected:,} images); a comparison with the published t2i numbers would be invalid",
            f"put all {expected:,} images of {what} into {folder} (the test images stay where they are), or pass "
            f"--allow-partial-gallery to run on {len(names):,} (the protocol label then says [gallery={len(names)}]), "
            f"or --gallery test")


def _apply_folder(ds, cfg):
    """Every other image of the test images' folder becomes a t2i distractor."""
    problem = _folder_problem(cfg, ds)
    if problem:
        raise VlbenchError(*problem)
    folder, names = _gallery_names(ds)
    sub = folder.relative_to(ds.image_root).as_posix()
    prefix = "" if sub in ("", ".") else sub + "/"
    return dataclasses.replace(ds, distractors=[prefix + n for n in names[ds.n_images:]],
                               distractor_root=ds.image_root, gallery="folder")


def _gallery_names(ds) -> tuple[Path, list[str]]:
    """The test images' folder and every image file name in it (test images first, then the rest by name)."""
    if ds.image_root is None:
        raise VlbenchError(f"--gallery folder: dataset {ds.name!r} has no image folder", "pass --data-dir")
    parents = {str(Path(p).parent) for p in ds.images}
    if len(parents) != 1:
        raise VlbenchError(f"--gallery folder: the images of {ds.name} lie in {len(parents)} folders "
                           f"(e.g. {sorted(parents)[:2]})", "put the test images into one image folder")
    folder = ds.image_root / parents.pop()
    return folder, folder_gallery(folder, [Path(p).name for p in ds.images])


for _provider in (
        GalleryProvider("test", "the test set's images"),
        GalleryProvider("fg-pool", "the FG release's enlarged image pool (Flickr30k-FG, MS-COCO-FG)",
                        loader_gallery="fg-pool"),
        GalleryProvider("folder", "every image of the test images' folder (checked against the dataset's full "
                                  "folder size; --allow-partial-gallery)", apply=_apply_folder,
                        problem=_folder_problem, partial=_folder_partial)):
    registry.galleries.register(_provider.name, _provider, description=_provider.description)
