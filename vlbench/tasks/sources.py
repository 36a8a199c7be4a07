"""Where choice items come from: ARO's order tasks and SugarCrepe's hard negatives."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import DataError, VlbenchError
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
    from ..perturbations import perturb_captions

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
    from .. import stores

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
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path} is not valid JSON ({exc})", "download the file again") from exc
    items = []
    for key, row in raw.items():
        if not all(isinstance(row.get(f), str) and row.get(f) for f in ("filename", "caption", "negative_caption")):
            raise DataError(f"{path} item {key!r} lacks filename / caption / negative_caption",
                            "use the unmodified SugarCrepe file")
        items.append(ChoiceItem(f"{subset}:{key}", row["filename"], (row["caption"], row["negative_caption"]), 0,
                                ("positive", f"negative:{subset}")))
    if check_images:
        folder = Path(images_dir) if images_dir is not None else coco_val2017_dir()
        missing = [it.image for it in items if not (folder / it.image).is_file()]
        if missing:
            raise DataError(f"{len(missing)} of {len(items)} COCO val2017 images of SugarCrepe {subset} are missing "
                            f"from {folder} (first: {missing[0]})",
                            f"unzip {COCO_VAL_URL} so the .jpg files sit in {folder}, or pass images_dir")
    return items
