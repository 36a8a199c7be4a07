"""Extended positives for the MS-COCO 5k test set: CxC and ECCV Caption.

Both annotate extra matching (caption, image) pairs by COCO ids. vlbench maps them to dataset
indices through ``coco5k_test_ids.jsonl`` (the COCO image id and the five caption ids of every test
image, in Karpathy order) and adds them to the original positives (the union): every query stays a
query, R grows where annotations add positives, and R-precision / mAP@R use it.

Files (in ``--data-dir``, as in the ECCV Caption repository ``naver-ai/eccv-caption``,
``eccv_caption/data/``): ``coco5k_test_ids.jsonl`` and ``eccv_caption/{eccv,cxc}_caption_to_image.json``
+ ``eccv_caption/{eccv,cxc}_image_to_caption.json``. Ids that are not in the 5k test set (ECCV lists
two such caption ids) are dropped and counted.

Two protocols each (vlbench/datasets/official.py):

- ``eccv`` (default, official): ECCV Caption's protocol, over its annotated queries only (1,332 caption and
  1,261 image queries) against their ECCV positives, with the package's metric definitions; reported as the
  ``eccv_*`` metrics beside the standard metrics, which keep the original positives. ``eccv-all``: every
  query, the ECCV positives added to the original ones (the union above).
- ``cxc`` (default, official): CxC Recall@K as the eccv_caption package defines it (SITS pairs rated >= 3,
  its queries, CxC positives only), as ``cxc_recall@k``. ``cxc-union``: CxC positives added to the original ones.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ..errors import DataError
from ..util.io import sha256_file
from .core import no_extra_positives
from .official import attach_official
from .specs import BUILTIN, EXTRA_POSITIVE_KINDS

KINDS = EXTRA_POSITIVE_KINDS
OFFICIAL = ("cxc", "eccv")
ECCV_REPO = "https://github.com/naver-ai/eccv-caption/tree/b51f56cfd1a5f530a04c8f54eba880d302ccd7a5/eccv_caption/data"


def _find(data_dir: Path, name: str) -> Path:
    for cand in (data_dir / name, data_dir / "eccv_caption" / name, data_dir / "captions" / name):
        if cand.is_file():
            return cand
    raise DataError(f"extended-positive file {name!r} is not in {data_dir}",
                    f"download it from {ECCV_REPO} into {data_dir / 'eccv_caption'}")


def _map_ids(path: Path, query_index: dict, target_index: dict) -> tuple[dict, int]:
    """{query COCO id: [target COCO ids]} -> {query index: [target indices]}, and the ids dropped."""
    out, dropped = {}, 0
    for q_id, t_ids in json.loads(path.read_text()).items():
        q = query_index.get(int(q_id))
        targets = [target_index[int(x)] for x in t_ids if int(x) in target_index]
        dropped += len(t_ids) - len(targets) + (q is None)
        if q is not None and targets:
            out[q] = targets
    return out, dropped


def load_extra_positives(ds, kind: str, data_dir):
    if kind not in KINDS:
        raise DataError(f"unknown extended positives {kind!r}", f"use one of {', '.join(KINDS)}")
    spec = BUILTIN.get(ds.name)
    if spec is None or kind not in spec.extra_positives:
        raise no_extra_positives(kind, ds.name)
    data_dir = Path(data_dir)
    ids_file = _find(data_dir, "coco5k_test_ids.jsonl")
    image_index: dict = {}
    caption_index: dict = {}
    position = {cid: n for n, cid in enumerate(ds.caption_ids)}  # "<image>#<j>" -> caption index
    for n, line in enumerate(ids_file.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        i = len(image_index)
        if i >= ds.n_images or row["image"] != ds.images[i]:
            raise DataError(f"{ids_file}: line {n} names image {row['image']!r}, but image {i} of coco is "
                            f"{ds.images[i] if i < ds.n_images else None!r}",
                            "use the coco5k_test_ids.jsonl that matches the Karpathy 5k test order")
        image_index[int(row["image_id"])] = i
        for j, cid in enumerate(row["caption_ids"]):
            if f"{row['image']}#{j}" in position:
                caption_index[int(cid)] = position[f"{row['image']}#{j}"]
    base = kind.split("-")[0]
    files = {d: _find(data_dir, f"{base}_{d}.json") for d in ("caption_to_image", "image_to_caption")}
    if kind in OFFICIAL:
        return attach_official(ds, kind, files, image_index, caption_index, ids_file)
    t2i, dropped_t2i = _map_ids(files["caption_to_image"], caption_index, image_index)
    i2t, dropped_i2t = _map_ids(files["image_to_caption"], image_index, caption_index)
    dropped = dropped_t2i + dropped_i2t
    meta = {"kind": kind, "dropped_ids": dropped, "i2t_queries": len(i2t), "t2i_queries": len(t2i),
            "files": {f.name: sha256_file(f) for f in (ids_file, *files.values())}}
    return replace(ds, extra_positives={"i2t": i2t, "t2i": t2i}, extra_positives_name=kind,
                   source={**ds.source, "extra_positives": meta})
