"""``--task colorswap``: ColorSwap (Burapacheep et al., Findings of ACL 2024), colour-word order.

1,000 examples of two images and two captions with the same words, the colour words swapped between objects
("someone holding a yellow umbrella wearing a white dress" / "... a white umbrella ... a yellow dress"),
released as a ``train`` split (700) and the ``test`` split (300) the paper evaluates on. Two released layouts
(github.com/Top34051/colorswap, commit 4f2c9e4, README):

* the Hub dataset ``stanfordnlp/colorswap`` (gated: accept its terms, then ``HF_TOKEN``): parquet files with
  the columns ``id``, ``image_1``, ``image_2`` (images), ``caption_1``, ``caption_2``, ``image_source``,
  ``caption_source`` (read by :mod:`.hubrows`);
* the authors' Google Drive archive: ``data/{train,test}.json`` (a list of objects with the same fields,
  ``image_1`` / ``image_2`` naming ``images/img_<id>_<k>.png``) beside ``data/images/`` (``images.zip`` unpacked).

Scores, Winoground's (Thrush et al. 2022) as the paper uses them, ``caption_k`` describing ``image_k``: text
score (each image picks its caption), image score (each caption picks its image), group score (both); strict
comparisons, a tie is a miss. Chance 25 / 25 / 16.67 percent. The blind (text-only) ceiling is 0 by design:
a score that cannot see the image cannot order two images, nor prefer different captions under each.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from ...errors import DataError, VlbenchError
from ...util import paths
from ...util.io import sha256_file, sha256_json
from ..choice import distinct_images
from ..registry import ChoiceTask, ItemSets, register_task
from ..shapes.hubrows import HubSet, read_rows
from ..shapes.pairs import (
    BLIND_CEILING,
    PairItem,
    PairScoring,
    declared_metrics,
    evaluate_pairs,
    format_pairs_table,
    pairs_text_only,
)
from ..sources import _bad_image_name, _image_present, read_task_text, shown_name

TASK = "colorswap"
HUB_REPO = "stanfordnlp/colorswap"
REPO = "github.com/Top34051/colorswap"
COMMIT = "4f2c9e40ab4cf9db9e4c7b89410d0b15dccb404a"  # the README whose layout this module reads
SPLITS = {"test": 300, "train": 700}  # released sizes (the paper's test split: the 300 ids of its vlm_results/)
#: sha256 (vlbench.util.io.sha256_json) of the test split's sorted [id, caption_1, caption_2] rows, from the six
#: vlm_results/*.json files of REPO at COMMIT (they agree on all 300): the data files cannot be fetched here to pin
TEST_TEXTS_SHA256 = "e5a6f7257bd0aac27a62270c8c6b33ce1b34347360f2320d020c3b6451d3d1b3"
FIELDS = ("image_1", "image_2", "caption_1", "caption_2")
SET = HubSet(TASK, HUB_REPO, "ColorSwap", ("image_1", "image_2"), ("caption_1", "caption_2"),
             ("id", "image_source", "caption_source"))
SCORING = PairScoring({"text": "text_score", "image": "image_score", "group": "accuracy"},
                      {"text": "text", "image": "image", "group": "group"},
                      "caption_k describes image_k; text: each image scores its caption strictly above the other; "
                      "image: each caption scores its image strictly above the other; group: both; s = cosine "
                      "similarity; a tie is a miss (Winoground's scores, as Burapacheep et al. 2024)")


def parse_colorswap_spec(spec: str | None) -> str:
    """``colorswap`` (the test split) or ``colorswap:train``."""
    name, _, split = (spec or TASK).partition(":")
    split = split.strip().lower() or "test"
    if name != TASK or split not in SPLITS:
        raise VlbenchError(f"--task {TASK} reads --dataset {TASK}[:SPLIT], not {spec!r}",
                           "leave --dataset out (the test split) or give one of "
                           f"{', '.join(f'{TASK}:{s}' for s in SPLITS)}")
    return split


def _json_fix() -> str:
    return (f"use the unmodified data/test.json (or train.json) of the archive linked in {REPO}'s README, with "
            "data/images.zip unpacked beside it, or the Hub's parquet files")


def _item(row: dict, key: str, images: tuple[str, str]) -> PairItem:
    tag = row.get("image_source")
    return PairItem(key, images, (row["caption_1"], row["caption_2"]), tag if isinstance(tag, str) else "")


def _key(row: dict, n: int, seen: set, where: str) -> str:
    key = str(row["id"]) if row.get("id") is not None else str(n)
    if key in seen:
        raise DataError(f"{where}: field 'id' repeats {key!r}", _json_fix())
    seen.add(key)
    return key


def read_colorswap_json(path: Path) -> list[PairItem]:
    """The items of the archive's ``test.json`` / ``train.json``; a DataError naming the file, the item and the
    field when it is not a JSON list of objects with non-empty string image_1 / image_2 / caption_1 / caption_2."""
    text = read_task_text(path, "ColorSwap file", _json_fix())
    try:
        raw = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise DataError(f"ColorSwap file {path} is not valid JSON ({exc})", _json_fix()) from None
    if not isinstance(raw, list) or not raw:
        raise DataError(f"ColorSwap file {path} holds {'no items' if raw == [] else 'a JSON ' + type(raw).__name__}, "
                        "not a list of items", _json_fix())
    items: list[PairItem] = []
    seen: set = set()
    for n, row in enumerate(raw):
        where = f"ColorSwap file {path} item {n}"
        if not isinstance(row, dict):
            raise DataError(f"{where} is a JSON {type(row).__name__}, not an object", _json_fix())
        for f in FIELDS:
            if not isinstance(row.get(f), str) or not row[f].strip():
                raise DataError(f"{where}: field {f!r} is {'missing' if f not in row else 'not a non-empty string'}",
                                _json_fix())
        for f in ("image_1", "image_2"):
            why = _bad_image_name(row[f])
            if why:
                raise DataError(f"{where}: field {f!r}: image name {shown_name(row[f])} {why}",
                                "image names must be file names inside the data folder (images/img_<id>_<k>.png)")
        items.append(_item(row, _key(row, n, seen, where), (row["image_1"], row["image_2"])))
    return items


def _json_file(base: Path, split: str) -> Path | None:
    for cand in (base / TASK / "data", base / TASK):  # not <data-dir>/test.json: too common a name to claim
        if (cand / f"{split}.json").is_file():
            return cand / f"{split}.json"
    return None


def colorswap_items(data_dir=None, split: str = "test") -> tuple[list[PairItem], dict, dict]:
    """(items, image key -> file, source record) of ``split``: the archive's JSON layout when its file is there,
    else the Hub's parquet files (:mod:`.hubrows`)."""
    base = Path(data_dir).expanduser() if data_dir else paths.default_data_dir()
    path = _json_file(base, split)
    if path is not None:
        items = read_colorswap_json(path)
        folder = path.parent
        missing = [k for it in items for k in it.images if not _image_present(folder, k, "ColorSwap")]
        if missing:
            raise DataError(f"{len(missing)} of {2 * len(items)} ColorSwap images are missing from {folder} "
                            f"(first: {missing[0]})", f"unzip data/images.zip of the archive in {folder}")
        images = {k: folder / k for it in items for k in it.images}
        return items, images, {"annotations": str(path), "sha256": sha256_file(path), "layout": "archive json",
                               "repository": f"{REPO}@{COMMIT[:7]}"}
    got = read_rows(SET, split, data_dir)
    seen: set = set()
    rows = [_item(row, _key(row, n, seen, f"ColorSwap split {split!r} row {n + 1}"), (row["image_1"], row["image_2"]))
            for n, row in enumerate(got.rows)]
    return rows, {k: got.image_dir / k for it in rows for k in it.images}, {**got.source, "layout": "hub parquet"}


def texts_digest(items) -> str:
    """sha256_json of the items' sorted [id, caption_1, caption_2] rows (numeric ids as numbers), the form
    :data:`TEST_TEXTS_SHA256` pins."""
    rows = [[int(it.item_id) if it.item_id.isdigit() else it.item_id, *it.candidates] for it in items]
    return sha256_json(sorted(rows, key=lambda r: (isinstance(r[0], str), r)))


def colorswap_sets(cfg, note=None) -> ItemSets:
    """The one item set of ``vlbench run --task colorswap``."""
    split = parse_colorswap_spec(cfg.dataset)
    items, images, source = colorswap_items(cfg.data_dir, split)
    source["texts_sha256"] = texts_digest(items)
    if split == "test":
        source["texts_match_release"] = source["texts_sha256"] == TEST_TEXTS_SHA256
    if not source.get("texts_match_release", len(items) == SPLITS[split]) and note:
        note(f"ColorSwap {split}: {len(items)} items; " + ("their ids and captions differ from the 300 of the "
             f"authors' vlm_results ({REPO})" if split == "test" else f"the release has {SPLITS[split]}") +
             " (a subset or a changed file)")
    cond = f"task:{TASK}:{split}"
    keys = distinct_images(items)
    desc = {"name": (cfg.dataset_name or TASK).strip(), "hash": sha256_json({k: v for k, v in source.items()
                                                                            if k in ("sha256", "files")}),
            "n_images": len(keys), "n_items": len(items), "split": split, "source": source}
    return ItemSets({cond: items}, {k: images[k] for k in keys}, desc, {cond: {"items": len(items), "split": split}})


COLORSWAP = register_task(ChoiceTask(
    TASK, "ColorSwap (Burapacheep et al. 2024): 2 images x 2 captions whose colour words are swapped; text, image "
          "and group scores (strict: a tie fails); --dataset colorswap[:test|train] (test by default); files from "
          "the gated Hub dataset stanfordnlp/colorswap or the authors' archive", colorswap_sets,
    evaluate=partial(evaluate_pairs, scoring=SCORING), text_only=partial(pairs_text_only, scoring=SCORING),
    rule=SCORING.rule, table=partial(format_pairs_table, scoring=SCORING),
    size="1,000 items (2,000 images and captions): test 300 (the paper's evaluation split), train 700",
    licence="MIT (the repository's LICENSE and the Hub card; the Hub files are gated: share contact details to "
            "download); images generated by Midjourney, DALL-E 3 and Stable Diffusion",
    citation="Burapacheep, Gaur, Bhatia and Thrush, ColorSwap: A Color and Word Order Dataset for Multimodal "
             "Evaluation, Findings of ACL 2024",
    metrics=declared_metrics(SCORING), scores=(("text_score", "text"), ("image_score", "image"), ("accuracy", "group")),
    blind_ceiling=BLIND_CEILING))
