"""The ECCV Caption / CxC ground-truth files (the ``eccv_caption`` package's ``data/``), read by COCO id.

The files are the package's ``{name}_image_to_caption.json`` / ``{name}_caption_to_image.json``
(name = eccv, cxc, original); they map COCO image ids to caption ids and back. The official metrics on a
similarity matrix are computed by ``vlbench.metrics.official`` (a metric, not a dataset, concern).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import DataError, VlbenchError

GT_NAMES = ("eccv", "cxc", "original")


def load_gts(folder: str | Path, name: str) -> dict[str, dict[int, list[int]]]:
    """``{"i2t": image id -> caption ids, "t2i": caption id -> image ids}`` of one ground truth."""
    if name not in GT_NAMES:
        raise VlbenchError(f"unknown ground truth {name!r}", f"use one of {', '.join(GT_NAMES)}")
    out = {}
    for key, stem in (("i2t", "image_to_caption"), ("t2i", "caption_to_image")):
        path = Path(folder) / f"{name}_{stem}.json"
        if not path.is_file():
            raise DataError(f"ground-truth file {path} is missing",
                            "copy the eccv_caption package's data/ files (pip install eccv_caption) there")
        with open(path, encoding="utf-8") as fh:
            out[key] = {int(k): [int(x) for x in v] for k, v in json.load(fh).items()}
    return out

