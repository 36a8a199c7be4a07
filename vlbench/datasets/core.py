"""Test sets: the Dataset record, custom JSONL manifests, and loading any dataset by name.

The built-in Flickr30k / MS-COCO (and FG) sets are records in dataset_specs.py, loaded by
builtin_datasets.py through the dataset registry, like plug-ins.

A dataset is a list of images, a list of captions, and ``caption_to_image[j]``: the index of
caption j's image. Captions get stable ids ``"<image>#<j>"`` (j = position within its image),
which seed the perturbations and name per-query rows.

Captions only are needed for text work (perturbations, granularity); images are checked only
when ``require_images=True``.
"""

from __future__ import annotations

import difflib
import json
import os
import posixpath
import unicodedata
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..errors import DataError
from ..registry import datasets as DATASETS
from ..util.io import sha256_file, sha256_json
from .captions import caption_refusal, check_captions, refused_caption
from .folds import fold_caption_to_image, fold_captions
from .hub import is_hub_spec, load_hub

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff")


@dataclass(frozen=True)
class Dataset:
    name: str
    images: list[str]  # image file names, relative to image_root
    captions: list[str]
    caption_to_image: np.ndarray  # int64, len(captions)
    caption_ids: list[str]
    image_root: Path | None = None
    gallery: str = "test"
    distractors: list[str] = field(default_factory=list)  # extra gallery images without captions
    distractor_root: Path | None = None
    folds: list[np.ndarray] | None = None  # image-index folds (coco-1k); None = one gallery
    extra_positives: dict | None = None  # {"i2t": [[caption idx...]...], "t2i": [[image idx...]...]}
    extra_positives_name: str | None = None
    source: dict = field(default_factory=dict)
    issues: list[dict] = field(default_factory=list)  # bad captions found while loading (reported)
    #: the official ECCV Caption / CxC ground truth with the COCO ids of rows and columns (datasets/official.py)
    official_positives: dict | None = None
    #: ``--limit N``: only the first N images (with their captions) of the loaded dataset; None: all of it
    limit: int | None = None

    @property
    def n_images(self) -> int:
        return len(self.images)

    @property
    def n_captions(self) -> int:
        return len(self.captions)

    @property
    def gallery_images(self) -> list[str]:
        """Every image candidate: the test images, then distractors (no captions)."""
        return list(self.images) + list(self.distractors)

    def image_path(self, i: int) -> Path:
        if self.image_root is None:
            raise DataError(f"dataset {self.name!r} has no image folder", "pass --data-dir")
        if i >= self.n_images:
            return safe_join(self.distractor_root or self.image_root, self.distractors[i - self.n_images])
        return safe_join(self.image_root, self.images[i])

    def captions_of(self, i: int) -> list[int]:
        return [int(j) for j in np.flatnonzero(self.caption_to_image == i)]

    def content_hash(self) -> str:
        """sha256 over captions, their image assignment, the gallery list and extra positives."""
        return sha256_json({
            "images": self.gallery_images,
            "captions": self.captions,
            "caption_to_image": [int(x) for x in self.caption_to_image],
            "folds": None if self.folds is None else [[int(x) for x in f] for f in self.folds],
            "extra_positives": self.extra_positives_name,
            "extra_positives_data": None if self.extra_positives is None else
            {k: sorted([int(q), sorted(int(x) for x in row)] for q, row in
                       (v.items() if isinstance(v, dict) else enumerate(v)))
             for k, v in self.extra_positives.items()},
        })

    def describe(self) -> dict:
        return {
            "name": self.name,
            "hash": self.content_hash(),
            "n_images": self.n_images,
            "n_captions": self.n_captions,
            "gallery": self.gallery,
            "gallery_size": len(self.gallery_images),
            "folds": None if self.folds is None else len(self.folds),
            "extra_positives": self.extra_positives_name,
            "source": self.source,
            "caption_issues": len(self.issues),
            **({"limit": self.limit} if self.limit is not None else {}),
        }

    def subset(self, image_indices, name: str | None = None) -> Dataset:
        """The dataset restricted to some images (and their captions); used for coco-1k folds."""

        image_indices = np.asarray(image_indices, dtype=np.int64)
        keep = fold_captions(self.caption_to_image, image_indices)
        return Dataset(
            name=name or self.name, images=[self.images[i] for i in image_indices],
            captions=[self.captions[j] for j in keep],
            caption_to_image=fold_caption_to_image(self.caption_to_image, image_indices, self.n_images),
            caption_ids=[self.caption_ids[j] for j in keep], image_root=self.image_root,
            gallery=self.gallery, source=dict(self.source),
        )


def limited(ds: Dataset, n: int | None) -> Dataset:
    """``--limit N``: the first ``n`` images of ``ds`` with all their captions (gallery distractors kept as they
    are; a multilingual set: the first ``n`` of every language); ``ds`` itself when ``n`` is None. A dataset whose
    structure needs every image is refused."""
    if n is None or ds.limit == n:
        return ds
    if ds.folds is not None and ds.source.get("folds_are") == "languages":  # a multilingual set: n per language
        keep = [f[:n] for f in ds.folds]
        cut = ds.subset(np.concatenate(keep))
        ids = set(cut.caption_ids)
        sizes = np.cumsum([0] + [len(f) for f in keep])
        return replace(cut, folds=[np.arange(a, b) for a, b in zip(sizes[:-1], sizes[1:])], limit=n,
                       source={**ds.source, "distinct_images": len(keep[0])},
                       issues=[i for i in ds.issues if i.get("caption_id") in ids])
    if ds.folds is not None:
        raise DataError(f"--limit {n}: {ds.name!r} is scored over {len(ds.folds)} folds of its images, which a cut "
                        "to the first images would break", "use the dataset without folds (e.g. coco instead of "
                        "coco-1k) with --limit, or leave --limit out")
    if ds.extra_positives is not None or ds.official_positives is not None:
        raise DataError(f"--limit {n}: the extended positives of {ds.name!r} ({ds.extra_positives_name}) annotate "
                        "the whole test set", "leave --extra-positives or --limit out")
    cut = ds.subset(np.arange(min(n, ds.n_images)))
    ids = set(cut.caption_ids)
    return replace(cut, distractors=list(ds.distractors), distractor_root=ds.distractor_root, limit=n,
                   issues=[i for i in ds.issues if i.get("caption_id") in ids])


# ----------------------------------------------------------------------------------------------
# safety and validation

#: Extra folders that images of a data folder may link into (os.pathsep-separated). Researchers keep
#: images in a shared store and link them into a data folder; an untrusted manifest still cannot read
#: anything outside the data folder and these roots.
IMAGE_ROOTS_ENV = "VLBENCH_IMAGE_ROOTS"


def _trusted_roots() -> list[Path]:
    return [Path(os.path.realpath(os.path.expanduser(r))) for r in
            os.environ.get(IMAGE_ROOTS_ENV, "").split(os.pathsep) if r.strip()]


def normalize_image_path(rel: str) -> str:
    """One spelling per file: ``images/./a.png`` and ``images//a.png`` are ``images/a.png``."""
    return posixpath.normpath(rel.replace("\\", "/")) if rel else rel


def safe_join(root: Path, rel: str) -> Path:
    """``root / rel``, refusing absolute paths and paths that escape ``root`` (``../../etc``), unless a
    link inside ``root`` leads into a folder named in $VLBENCH_IMAGE_ROOTS."""
    if not isinstance(rel, str) or not rel.strip():
        raise DataError(f"empty image path {rel!r}", "give each image a file name")
    if "\0" in rel:
        raise DataError(f"image path {rel!r} contains a NUL character", "fix the file name in the manifest")
    p = Path(rel)
    if not p.parts:  # "." or "./": the data folder itself
        raise DataError(f"image path {rel!r} names the data folder itself, not an image file",
                        "give the image file's name relative to the manifest's folder (e.g. images/0001.jpg)")
    if p.is_absolute() or rel.startswith(("/", "\\")) or ":" in p.parts[0][1:2]:
        raise DataError(f"image path {rel!r} is absolute",
                        "image paths must be relative to the manifest's folder")
    root_r = Path(os.path.realpath(root))
    full = Path(os.path.realpath(root_r / p))

    def inside(r):
        return full == r or r in full.parents

    if not inside(root_r):
        lexical = Path(os.path.normpath(root_r / p))
        if ".." in p.parts or not (lexical == root_r or root_r in lexical.parents) or \
                not any(inside(r) for r in _trusted_roots()):
            raise DataError(f"image path {rel!r} points outside the data folder {root_r}",
                            "keep images inside the manifest's folder (no '..' components); to link images from "
                            f"a shared store, name the store in ${IMAGE_ROOTS_ENV} (e.g. export "
                            f"{IMAGE_ROOTS_ENV}=/data/images)")
    return root_r / p


def _bad_caption(cap, j: int) -> str | None:
    """Why a manifest caption is not usable text at all (an error, unlike an empty caption)."""
    if not isinstance(cap, str):
        return f"caption {j} is {'null' if cap is None else type(cap).__name__} ({json.dumps(cap)[:40]}), not a string"
    bad = next((ch for ch in cap if 0xD800 <= ord(ch) <= 0xDFFF), None)
    if bad is not None:
        return f"caption {j} contains an unpaired UTF-16 surrogate (U+{ord(bad):04X}), which is not text"
    return None


def caption_problem(text) -> str | None:
    """Why a caption cannot be used as-is, or None. Used for reporting, never silently."""
    if not isinstance(text, str):
        return f"caption is {type(text).__name__}, not a string"
    if not text.strip():
        return "empty or whitespace-only caption"
    if not any(unicodedata.category(ch)[0] in "LN" for ch in text):
        return "caption has no letters or digits"
    return None


def _build(name, rows, image_root, source, line_numbers=None) -> Dataset:
    images, captions, c2i, ids, issues = [], [], [], [], []
    seen: dict[str, int] = {}
    for i, row in enumerate(rows):
        where = f"line {line_numbers[i]}" if line_numbers else f"image {i}"
        image, caps = row["image"], row["captions"]
        if image in seen:
            raise DataError(f"{name}: {where}: image {image!r} is listed twice (first at "
                            f"{'line ' + str(line_numbers[seen[image]]) if line_numbers else seen[image]})",
                            "merge the two entries' captions into one line")
        seen[image] = i
        images.append(image)
        for j, cap in enumerate(caps):
            refused = caption_refusal(cap)  # not text, or too long to tokenize: never scored as "" or aborted on
            if refused:
                raise refused_caption(name, where, image, j, cap, refused)
            problem = caption_problem(cap)
            if problem:
                issues.append({"caption_id": f"{image}#{j}", "where": where, "problem": problem, "text": cap})
            captions.append(cap)
            c2i.append(len(images) - 1)
            ids.append(f"{image}#{j}")
    return Dataset(name=name, images=images, captions=captions, caption_to_image=np.asarray(c2i, dtype=np.int64),
                   caption_ids=ids, image_root=image_root, source=source, issues=issues)


MANIFEST_KEYS = frozenset({"image", "captions"})


def _misspelt_keys(obj: dict) -> list[str]:
    """Extra keys that look like a misspelling of a manifest key ("imgae", "caption"): refused, so a typo never
    silently drops data. Other extra keys (an id, a source, metadata) are allowed and ignored."""
    return sorted(k for k in set(obj) - MANIFEST_KEYS
                  if isinstance(k, str) and difflib.get_close_matches(k.lower(), MANIFEST_KEYS, n=1, cutoff=0.7))


def read_manifest(path: str | os.PathLike) -> tuple[list[dict], list[int]]:
    """Parse a JSONL manifest; every problem names the line and the fix."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"manifest {str(path)!r} does not exist",
                        "give the path of a JSONL file with one {\"image\", \"captions\"} object per line")
    rows, lines = [], []
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                raise DataError(f"{path}: line {n} is not valid UTF-8 ({exc.reason})",
                                "save the manifest as UTF-8") from None
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}: line {n} is not valid JSON ({exc.msg} at column {exc.colno})",
                                'each line must be {"image": "file.jpg", "captions": ["...", ...]}') from None
            if not isinstance(obj, dict) or "image" not in obj or "captions" not in obj:
                extra = sorted(set(obj) - MANIFEST_KEYS) if isinstance(obj, dict) else []
                raise DataError(f"{path}: line {n} lacks the keys 'image' and 'captions'"
                                + (f" (unknown key(s): {', '.join(map(repr, extra))})" if extra else ""),
                                'each line must be {"image": "file.jpg", "captions": ["...", ...]}')
            typos = _misspelt_keys(obj)
            if typos:
                raise DataError(f"{path}: line {n} has the key(s) {', '.join(map(repr, typos))}, close to "
                                f"'image' / 'captions'", "check the spelling (other extra keys are ignored)")
            caps = obj["captions"]
            if isinstance(caps, str):
                raise DataError(f"{path}: line {n}: 'captions' is a string, not a list of strings",
                                f'write it as a list: "captions": [{json.dumps(caps[:60])}]')
            if not isinstance(caps, list) or len(caps) == 0:
                raise DataError(f"{path}: line {n}: 'captions' must be a non-empty list of strings",
                                "give every image at least one caption")
            if not isinstance(obj["image"], str):
                raise DataError(f"{path}: line {n}: 'image' must be a string path", "fix the line")
            for j, cap in enumerate(caps):
                problem = _bad_caption(cap, j)
                if problem:
                    raise DataError(f"{path}: line {n}: {problem}",
                                    "every caption must be a JSON string of text; fix or remove it")
            rows.append({"image": normalize_image_path(obj["image"]), "captions": caps})
            lines.append(n)
    if not rows:
        raise DataError(f"manifest {str(path)!r} has no entries", "add one JSON object per image")
    return rows, lines


def check_images(ds: Dataset, limit: int = 5) -> None:
    """Fail with the missing files listed (and how to get them) if any image is absent."""
    missing = []
    for i in range(len(ds.gallery_images)):
        p = ds.image_path(i)
        try:
            present = p.is_file()
        except OSError as exc:  # a name too long for the file system: a message, no traceback
            raise DataError(f"image file name {str(p)[:80]!r}... ({len(str(p)):,} characters) of {ds.name!r} cannot "
                            f"be looked up: {exc.strerror}", "rename the file and its entry to a shorter name "
                            "(at most 255 bytes per name)") from None
        if not present:
            missing.append(str(p))
    if missing:
        more = f" (and {len(missing) - limit} more)" if len(missing) > limit else ""
        hint = ds.source.get("image_hint") or "put the image files where the manifest says"
        raise DataError(f"{len(missing)} image file(s) of {ds.name!r} are missing: "
                        f"{', '.join(missing[:limit])}{more}", hint)


# ----------------------------------------------------------------------------------------------
# custom manifests

def load_custom(manifest: str | Path, *, require_images: bool = True) -> Dataset:
    path = Path(manifest).expanduser()
    rows, lines = read_manifest(path)
    root = path.parent.resolve()
    for row, n in zip(rows, lines):  # validate paths up front: names the line
        try:
            safe_join(root, row["image"])
        except DataError as exc:
            raise DataError(f"{path}: line {n}: {exc.message}", exc.hint) from None
    ds = _build(f"custom:{path}", rows, root,
                {"manifest": str(path), "manifest_sha256": sha256_file(path)}, lines)
    ds = replace(ds, name=f"custom:{path.name}")
    if require_images:
        check_images(ds)
    return ds


def load_dataset(spec: str, *, data_dir=None, gallery: str = "test", require_images: bool = True,
                 download: bool | None = None, extra_positives: str | None = None) -> Dataset:
    """Load a dataset by registered name, ``custom:<manifest.jsonl>`` or ``hf:ORG/NAME[?options]`` (.hub)."""
    custom = spec.startswith("custom:") or (spec.endswith(".jsonl") and Path(spec).is_file()) or is_hub_spec(spec)
    if custom and extra_positives:
        raise no_extra_positives(extra_positives, spec)
    if is_hub_spec(spec):
        if gallery != "test":
            raise DataError("--gallery applies to the built-in FG datasets only",
                            "a Hub dataset's gallery is its split's images")
        return _build(*load_hub(spec, data_dir=data_dir, download=download))
    if spec.startswith("custom:"):
        if gallery != "test":
            raise DataError("--gallery applies to the built-in FG datasets only",
                            "list distractor images in the manifest instead")
        path = spec[len("custom:"):]
        if not path.strip():
            raise DataError(f"the dataset {spec!r} names no manifest: the path after 'custom:' is empty",
                            "write custom:<path of a JSONL manifest>, e.g. --dataset custom:data/my_set.jsonl")
        return load_custom(path, require_images=require_images)
    if custom:
        return load_custom(spec, require_images=require_images)
    name, sep, options = spec.partition("?")  # ``xm3600?languages=de,fr``: a registered set's own options
    factory = DATASETS.get(name)
    kwargs = dict(data_dir=data_dir, gallery=gallery, require_images=require_images, download=download)
    if sep:
        if not getattr(factory, "takes_options", None):
            raise DataError(f"dataset {name!r} takes no ?options (the dataset was given as {spec!r})",
                            f"write --dataset {name}; options after '?' exist for xm3600 and xtd10 (languages=...) "
                            "and for Hub datasets (hf:ORG/NAME?split=...)")
        kwargs["options"] = options
    if extra_positives:
        kwargs["extra_positives"] = extra_positives
    ds = factory(**kwargs)
    if not isinstance(ds, Dataset):
        raise DataError(f"dataset plug-in {spec!r} returned {type(ds).__name__}, not vlbench Dataset",
                        "return vlbench.datasets.core.Dataset from the plug-in factory")
    check_captions(ds)  # a plug-in's captions meet the bounds every other source's do
    if extra_positives and ds.extra_positives_name != extra_positives:  # a plug-in that ignored them
        raise no_extra_positives(extra_positives, spec)
    return ds


#: the datasets that have extended positives (ECCV Caption and CxC annotate the MS-COCO 5k test captions)
EXTRA_POSITIVE_DATASETS = ("coco",)


def no_extra_positives(kind: str, spec: str) -> DataError:
    """The refusal of ``--extra-positives KIND`` on a dataset that has none (never silently ignored)."""
    return DataError(f"--extra-positives {kind}: dataset {spec!r} has no extended positives (ECCV Caption and CxC "
                     f"annotate the MS-COCO 5k test captions only, i.e. {', '.join(EXTRA_POSITIVE_DATASETS)})",
                     f"use it with --dataset {EXTRA_POSITIVE_DATASETS[0]}, or leave "
                     "--extra-positives out for this dataset")
