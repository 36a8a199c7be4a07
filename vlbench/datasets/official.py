"""The official ECCV Caption / CxC protocols inside a run (``--extra-positives eccv`` / ``cxc``).

The dataset keeps its original positives (the standard metrics are unchanged); the official numbers come
from vlbench/datasets/eccv.py on the condition's similarity matrix, with the COCO ids of its rows and
columns, and are added as extra metric records: ``eccv_map_at_r``, ``eccv_r_precision``, ``eccv_r1``
(percent; ECCV's annotated queries only) or ``cxc_recall@k`` (percent; CxC's queries and positives).
"""

from __future__ import annotations

import json

import numpy as np

from ..util.io import sha256_file
from ..errors import DataError
from . import eccv as E


def _read(path) -> dict:
    return {int(k): [int(x) for x in v] for k, v in json.loads(path.read_text()).items()}


def attach_official(ds, kind: str, files: dict, image_index: dict, caption_index: dict, ids_file) -> None:
    """Keep the ground truth (COCO ids) and the ids of the dataset's rows and columns on ``ds``."""
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
    ds.official_positives = {"kind": kind, "image_ids": image_ids, "caption_ids": caption_ids, "gt": gt}
    ds.extra_positives_name = kind
    ds.source["extra_positives"] = {
        "kind": kind, "protocol": "official (eccv_caption package definitions)",
        "i2t_queries": len(gt["i2t"]), "t2i_queries": len(gt["t2i"]),
        "files": {f.name: sha256_file(f) for f in (ids_file, *files.values())}}


def official_records(official: dict, sim: np.ndarray, ks=(1, 5, 10)) -> list[dict]:
    """Metric records (percent) of the official protocol on one (images x captions) similarity matrix."""
    kind, img_ids, cap_ids, gt = official["kind"], official["image_ids"], official["caption_ids"], official["gt"]
    if kind == "eccv":
        m = E.eccv_metrics(sim, img_ids, cap_ids, gt)
        names = {"map_at_r": "eccv_map_at_r", "rprecision": "eccv_r_precision", "r1": "eccv_r1"}
        return [dict(direction=d, metric=names[key], k=None, value=100.0 * m[d][key])
                for d in ("i2t", "t2i") for key in names]
    r = E.cxc_recalls(sim, img_ids, cap_ids, gt, ks=tuple(ks))
    return [dict(direction=d, metric="cxc_recall", k=int(k), value=100.0 * r[d][k]) for d in ("i2t", "t2i") for k in ks]


def add_official(cfg, plan, enc, evals: dict) -> dict:
    """Append the official records to every condition's evaluation (no folds: the COCO 5k test set)."""
    official = getattr(plan.ds, "official_positives", None)
    if not official:
        return evals
    n = plan.ds.n_captions
    for cond, off in enc.offsets.items():
        img = np.asarray(enc.variant_img.get(cond, enc.img_emb), dtype=np.float32)
        sim = img @ np.asarray(enc.txt_emb[off:off + n], dtype=np.float32).T
        for ev in evals[cond]:
            ev.extra.setdefault("records", []).extend(official_records(official, sim, cfg.k))
    return evals
