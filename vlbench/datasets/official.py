"""The official ECCV Caption / CxC protocols inside a run (``--extra-positives eccv`` / ``cxc``).

The dataset keeps its original positives (the standard metrics are unchanged) and carries the ground truth
with the COCO ids of its rows and columns (``official_positives``); the scoring step passes that to
``vlbench.metrics.compute.evaluate(official=...)``, which scores it on the condition's similarities
(vlbench/metrics/official.py) as the registered metrics ``eccv_map_at_r``, ``eccv_r_precision``, ``eccv_r1``
(percent; ECCV's annotated queries only) or ``cxc_recall@k`` (percent; CxC's queries and positives).
"""

from __future__ import annotations

import json
from dataclasses import replace

from ..errors import DataError
from ..util.io import sha256_file


def _read(path) -> dict:
    return {int(k): [int(x) for x in v] for k, v in json.loads(path.read_text()).items()}


def attach_official(ds, kind: str, files: dict, image_index: dict, caption_index: dict, ids_file):
    """``ds`` with the ground truth (COCO ids) and the ids of the dataset's rows and columns."""
    image_ids = [None] * ds.n_images
    for cid, i in image_index.items():
        image_ids[i] = cid
    caption_ids = [None] * ds.n_captions
    for cid, j in caption_index.items():
        caption_ids[j] = cid
    if None in image_ids or None in caption_ids:
        raise DataError(f"--extra-positives {kind}: {image_ids.count(None)} image(s) and {caption_ids.count(None)} "
                        f"caption(s) of {ds.name} have no COCO id in {ids_file}",
                        "use the coco5k_test_ids.jsonl of the Karpathy 5k test split")
    gt = {"t2i": _read(files["caption_to_image"]), "i2t": _read(files["image_to_caption"])}
    meta = {"kind": kind, "protocol": "official (eccv_caption package definitions)",
            "i2t_queries": len(gt["i2t"]), "t2i_queries": len(gt["t2i"]),
            "files": {f.name: sha256_file(f) for f in (ids_file, *files.values())}}
    return replace(ds, official_positives={"kind": kind, "image_ids": image_ids, "caption_ids": caption_ids, "gt": gt},
                   extra_positives_name=kind, source={**ds.source, "extra_positives": meta})

