"""``--task order``: ARO-style word order (COCO-Order / Flickr30k-Order), one registered record.

Each caption of ``--dataset`` is one item: the caption against its word-order shuffles (vlbench's own
perturbations, :func:`vlbench.tasks.sources.order_items`), scored as a plain choice task.
"""

from __future__ import annotations

import numpy as np

from ...datasets.core import load_dataset
from ...errors import DataError, VlbenchError
from ..registry import ChoiceTask, ItemSets, register_task
from ..sources import order_items


def order_sets(cfg, note) -> ItemSets:
    """The one item set of ``--task order``: every caption of ``--dataset`` against its word-order shuffles."""

    if not cfg.dataset:
        raise VlbenchError("--task order needs --dataset", "e.g. --dataset flickr30k (Flickr30k-Order) or coco")
    ds = load_dataset(cfg.dataset, data_dir=cfg.data_dir, require_images=True)
    items = order_items(ds, seed=cfg.seed)
    skipped = ds.n_captions - len(items)
    if not items:
        raise DataError(f"--task order: no word-order shuffle changes any of the {ds.n_captions} captions of "
                        f"{cfg.dataset!r} (e.g. one-word captions, or every word the same), so there is no item",
                        "use captions of several distinct words (the order task compares each caption with its "
                        "shuffles)")
    if skipped:
        note(f"--task order skips {skipped} of {ds.n_captions} captions that no word-order shuffle "
                  "changes (counted in results.json as skipped_captions)")
    paths = {}
    for i, name in enumerate(ds.images):
        paths[name] = ds.image_path(i)
    desc = ds.describe()
    if cfg.dataset_name:
        desc["name"] = cfg.dataset_name.strip()
    n_cand = np.bincount([len(it.candidates) for it in items], minlength=6)[2:].tolist()
    return ItemSets({"task:order": items}, paths, desc,
                    {"task:order": {"items": len(items), "captions": ds.n_captions, "skipped_captions": skipped,
                                    "items_by_candidates": dict(zip(["2", "3", "4", "5"], n_cand))}})


ORDER = register_task(ChoiceTask(
    "order", "ARO-style word order (COCO-Order / Flickr30k-Order): each caption against its word-order shuffles; "
             "--dataset names the captions (flickr30k, coco, custom:...)", order_sets,
    size="one item per caption of --dataset that a word-order shuffle changes (counted per run)",
    licence="the captions' own (the dataset's record: vlbench ls datasets); the shuffles are vlbench's",
    citation="Yuksekgonul, Bianchi, Kalluri, Jurafsky and Zou, When and why vision-language models behave like "
             "bags-of-words, and what to do about it?, ICLR 2023 (COCO-Order, Flickr30k-Order)"))
