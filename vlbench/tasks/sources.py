"""Where choice items come from: ARO's order tasks and SugarCrepe's hard negatives."""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath

from .. import stores
from ..datasets.core import safe_join
from ..errors import DataError, VlbenchError
from ..perturbations import perturb_captions
from .choice import ChoiceItem

# ARO (Yuksekgonul et al., ICLR 2023) compares each caption with 4 shuffles made by these functions
# (shuffle_nouns_and_adj, shuffle_allbut_nouns_and_adj, shuffle_within_trigrams, shuffle_trigrams).
ORDER_PERTURBATIONS = ("shuffle-nouns-adjectives", "shuffle-all-but-nouns-adjectives", "shuffle-within-trigrams",
                       "shuffle-trigrams")
SUGARCREPE_SUBSETS = ("add_att", "add_obj", "replace_att", "replace_obj", "replace_rel", "swap_att", "swap_obj")
COCO_VAL_URL = "http://images.cocodataset.org/zips/val2017.zip"


def order_items(dataset, seed: int = 0, *, perturbations=ORDER_PERTURBATIONS) -> list[ChoiceItem]:
    """One item per caption: the caption (candidate 0) against its word-order shuffles.

    ``dataset``: a vlbench Dataset (images, captions, caption_ids, caption_to_image). Shuffles come from
    vlbench.perturbations, deterministic per (seed, perturbation, caption id). A shuffle that does not apply
    to a caption or returns it unchanged is left out (ARO keeps it, so its item can hold the true caption
    twice); duplicate shuffles are kept once; a caption with no distinct shuffle gives no item.
    """

    names = list(perturbations)
    sets = perturb_captions(list(dataset.captions), list(dataset.caption_ids), names, seed=seed)
    items = []
    for j, (cap, cid) in enumerate(zip(dataset.captions, dataset.caption_ids)):
        negs: dict[str, str] = {}
        for name in names:
            ps = sets[name]
            t = ps.texts[j]
            if ps.applicable[j] and t != cap and t not in negs:
                negs[t] = name
        if negs:
            image = dataset.images[int(dataset.caption_to_image[j])]
            items.append(ChoiceItem(f"{cid}", image, (cap, *negs), 0, ("original", *negs.values())))
    return items


def coco_val2017_dir() -> Path:
    """Default folder of the COCO val2017 images: $VLBENCH_COCO_VAL2017, else <cache>/coco/val2017."""
    env = os.environ.get("VLBENCH_COCO_VAL2017")
    if env:
        return Path(env)

    return stores.path("coco-images") / "val2017"


def sugarcrepe_items(root, subset: str, *, images_dir=None, check_images: bool = True) -> list[ChoiceItem]:
    """SugarCrepe's ``subset`` (one of SUGARCREPE_SUBSETS) from ``root/<subset>.json``: 2-way items
    (positive caption, hard negative). ``check_images``: raise a DataError naming the folder when images
    are missing from ``images_dir`` (default :func:`coco_val2017_dir`). Item images are file names."""
    if subset not in SUGARCREPE_SUBSETS:
        raise VlbenchError(f"unknown SugarCrepe subset {subset!r}", f"use one of {', '.join(SUGARCREPE_SUBSETS)}")
    path = Path(root) / f"{subset}.json"
    if not path.is_file():
        raise DataError(f"SugarCrepe file {path} not found",
                        f"put {subset}.json from github.com/RAIVNLab/sugar-crepe (data/) in {root}")
    items = [ChoiceItem(f"{subset}:{key}", name, (pos, neg), 0, ("positive", f"negative:{subset}"))
             for key, name, pos, neg in read_sugarcrepe_file(path)]
    if check_images:
        check_coco_images(items, images_dir, f"SugarCrepe {subset}")
    return items


def check_coco_images(items, images_dir, what: str) -> None:
    """A DataError naming the folder when some of the items' COCO val2017 images are not in ``images_dir``
    (default: the COCO val2017 folder of ``--task sugarcrepe``); ``what`` names the item set."""
    folder = Path(images_dir) if images_dir is not None else coco_val2017_dir()
    missing = [it.image for it in items if not _image_present(folder, it.image, what)]
    if missing:
        raise DataError(f"{len(missing)} of {len(items)} COCO val2017 images of {what} are missing from {folder} "
                        f"(first: {missing[0]})", f"unzip {COCO_VAL_URL} so the .jpg files sit in {folder}, or pass "
                        "--images-dir (images_dir= from Python) naming the folder that holds them")


def _image_present(folder: Path, name: str, what: str) -> bool:
    """Whether the image is a file inside ``folder``, as custom manifests check it (datasets.core.safe_join): a
    symbolic link inside the folder that points elsewhere is refused, unless it leads into a store named
    in $VLBENCH_IMAGE_ROOTS; a name the file system cannot look up is a DataError, not a traceback."""
    try:
        return safe_join(folder, name).is_file()
    except DataError as exc:
        raise DataError(f"{what}: {exc.message}", exc.hint) from None
    except OSError as exc:
        raise DataError(f"{what}: image name {shown_name(name)} cannot be looked up in "
                        f"{folder}: {exc.strerror}", "image names must be file names inside the images folder "
                        f"(at most {NAME_MAX} bytes each)") from None


#: the longest file name (one path component, in bytes) the usual file systems take
NAME_MAX = 255
#: the longest line a task file may hold, in bytes: the released files' lines are far shorter; a longer one is
#: refused before it is held whole (a 240 MB line read whole and parsed took the process to 2.7 GB and aborted it)
MAX_LINE_BYTES = 64 * 1024 * 1024


def read_task_text(path, what: str, fix: str, *, encoding: str = "utf-8") -> str:
    """The text of a task file, read a bounded line at a time: a DataError naming ``what`` (the file's kind),
    the file and the line when a line is longer than :data:`MAX_LINE_BYTES`, or when the file is not text in
    ``encoding``. No line longer than the bound is ever held in memory."""
    parts, n = [], 0
    with open(path, "rb") as f:
        while True:
            line = f.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            n += 1
            if len(line) > MAX_LINE_BYTES:
                raise DataError(f"{what} {path} line {n} is longer than {MAX_LINE_BYTES:,} bytes (the longest line "
                                "a task file may hold); the file is not a released task file", fix)
            parts.append(line)
    data = b"".join(parts)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise DataError(f"{what} {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
                        fix) from None


def shown_name(name: str, width: int = 80) -> str:
    """An image name as a message shows it: quoted, and cut with its length said when it is long."""
    return repr(name) if len(name) <= width else f"{name[:width]!r}... ({len(name):,} characters)"


def _bad_image_name(name: str) -> str | None:
    """Why a task file's image name is not a plain file name inside the images folder (as manifests refuse)."""
    if "\0" in name:
        return "contains a NUL character"
    longest = max((len(p.encode("utf-8", "surrogatepass")) for p in name.replace("\\", "/").split("/")), default=0)
    if longest > NAME_MAX:
        return f"has a part of {longest:,} bytes: too long for a file name (file systems take at most {NAME_MAX})"
    parts = PurePosixPath(name.replace("\\", "/"))
    if parts.is_absolute() or ":" in name[1:2]:
        return "is an absolute path"
    if ".." in parts.parts:
        return "has a '..' component (it would leave the images folder)"
    if not parts.parts or parts.parts == (".",):
        return "names the images folder itself"
    return None


def read_sugarcrepe_file(path: Path) -> list[tuple[str, str, str, str]]:
    """(key, image file name, positive caption, negative caption) of each item of a SugarCrepe-format file
    (``{key: {"filename", "caption", "negative_caption"}}``); a DataError naming the file (and item) when it is
    not UTF-8 JSON of that shape, has no items, or names an image outside the images folder."""
    fix = "use the unmodified file from github.com/RAIVNLab/sugar-crepe (data/), or a file of the same format"
    text = read_task_text(path, "SugarCrepe file", fix)
    try:
        raw = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise DataError(f"SugarCrepe file {path} is not valid JSON ({exc})", fix) from None
    if not isinstance(raw, dict):
        raise DataError(f"SugarCrepe file {path} holds a JSON {type(raw).__name__}, not an object of items "
                        '({"<id>": {"filename": ..., "caption": ..., "negative_caption": ...}, ...})', fix)
    if not raw:
        raise DataError(f"SugarCrepe file {path} has no items", fix)
    out = []
    for key, row in raw.items():
        if not isinstance(row, dict):
            raise DataError(f"SugarCrepe file {path} item {key!r} is a JSON {type(row).__name__}, not an object "
                            "with filename / caption / negative_caption", fix)
        if not all(isinstance(v := row.get(f), str) and v.strip()
                   for f in ("filename", "caption", "negative_caption")):
            raise DataError(f"SugarCrepe file {path} item {key!r} lacks filename / caption / negative_caption "
                            "(each a non-empty string)", fix)
        why = _bad_image_name(row["filename"])
        if why:
            raise DataError(f"SugarCrepe file {path} item {key!r}: image name {shown_name(row['filename'])} {why}",
                            "image names must be file names inside the images folder (--images-dir), as in "
                            "manifests; fix the item or use the unmodified file")
        out.append((str(key), row["filename"], row["caption"], row["negative_caption"]))
    return out
