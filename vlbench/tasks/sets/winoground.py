"""``--task winoground``: Winoground (Thrush et al., CVPR 2022), 400 items of two images and two captions.

Files, in the layout released on the Hub (``facebook/winoground``, gated: accept its terms, then ``HF_TOKEN``):
``examples.jsonl`` (one JSON object a line: ``id``, ``image_0``, ``image_1``, ``caption_0``, ``caption_1``,
``tag``, ``secondary_tag``, ``num_main_preds``, ``collapsed_tag``) and ``images/<image_k>.png`` (``images.zip``
unpacked). Images are never shipped with vlbench.

Scores, from the model's 2x2 similarity matrix ``s(c_i, I_j)`` of each item, as the paper defines them:

* **text score**: ``s(c0, I0) > s(c1, I0)`` and ``s(c1, I1) > s(c0, I1)`` (each image picks its caption);
* **image score**: ``s(c0, I0) > s(c0, I1)`` and ``s(c1, I1) > s(c1, I0)`` (each caption picks its image);
* **group score**: both.

Every comparison is strict: a tie is a failure. Chance (random scores): 25 / 25 / 16.67 percent.
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
from ..shapes.pairs import (
    BLIND_CEILING,
    PairItem,
    PairScoring,
    declared_metrics,
    evaluate_pairs,
    format_pairs_table,
    pairs_text_only,
)
from ..shapes.pairs import CHANCE as PAIR_CHANCE
from ..sources import _bad_image_name, _image_present, read_task_text, shown_name

TASK = "winoground"
HUB_REPO = "facebook/winoground"
#: no sha256 is pinned: the files are in a gated Hub dataset that publishes no checksum outside the gate, and the
#: release could not read it; a run records the sha256 of the examples.jsonl it read (``dataset.source.sha256``)
N_ITEMS = 400
#: chance of each score under random similarities, percent (text, image: 1/4; group: 1/6, as the paper)
CHANCE = {k: PAIR_CHANCE[k] for k in ("text", "image", "group")}
RULE = ("text: s(c0,I0) > s(c1,I0) and s(c1,I1) > s(c0,I1); image: s(c0,I0) > s(c0,I1) and s(c1,I1) > s(c1,I0); "
        "group: both; s = cosine similarity; strict (a tie is a failure), as Thrush et al. 2022")
#: metric name of each score in results.json (``accuracy`` is the group score, the strictest)
METRICS = {"group": "accuracy", "text": "text_score", "image": "image_score"}
#: the 2x2 shape's scoring (vlbench.tasks.shapes.pairs) under Winoground's names; by_kind names the paper's scores
SCORING = PairScoring({"text": METRICS["text"], "image": METRICS["image"], "group": METRICS["group"]},
                      {"text": "text", "image": "image", "group": "group"}, RULE, by_kind_names="flags")
FIELDS = ("image_0", "image_1", "caption_0", "caption_1")
FIX = (f"use the unmodified examples.jsonl of {HUB_REPO} on the Hub (one JSON object a line with id, image_0, "
       "image_1, caption_0, caption_1, tag, secondary_tag, collapsed_tag)")
#: one Winoground item is the 2x2 shape's item: ``images`` (I0, I1: file names under the images folder),
#: ``candidates`` / ``captions`` (c0, c1; c_k describes I_k), ``tag``: the collapsed tag (Object, Relation, Both)
WinogroundItem = PairItem
#: text, image and group scores from embeddings (rows follow distinct_images / distinct_texts, or mappings)
evaluate_winoground = partial(evaluate_pairs, scoring=SCORING)
#: the blind baseline: ``s(c, I) = text_score(c)`` for both images, scored by the same rule; a score that cannot
#: see the image gets 0 on text, image and group by design (Winoground's text-only ceiling, recorded, not assumed)
evaluate_winoground_text_only = partial(pairs_text_only, scoring=SCORING)


def read_winoground_file(path: Path) -> list[WinogroundItem]:
    """The items of ``examples.jsonl``; a DataError naming the file, the line and the field when a line is not
    a JSON object with non-empty string image_0 / image_1 / caption_0 / caption_1, or repeats an id."""
    text = read_task_text(path, "Winoground file", FIX)
    items, seen = [], set()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"Winoground file {path} line {n}"
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise DataError(f"{where} is not valid JSON ({exc})", FIX) from None
        if not isinstance(row, dict):
            raise DataError(f"{where} holds a JSON {type(row).__name__}, not an object", FIX)
        for f in FIELDS:
            if not isinstance(row.get(f), str) or not row[f].strip():
                raise DataError(f"{where}: field {f!r} is {'missing' if f not in row else 'not a non-empty string'}",
                                FIX)
        key = str(row.get("id", n - 1))
        if key in seen:
            raise DataError(f"{where}: field 'id' repeats {key!r}", FIX)
        seen.add(key)
        names = []
        for f in ("image_0", "image_1"):
            name = row[f] if row[f].lower().endswith(".png") else f"{row[f]}.png"
            why = _bad_image_name(name)
            if why:
                raise DataError(f"{where}: field {f!r}: image name {shown_name(name)} {why}",
                                "image names must be file names inside the images folder")
            names.append(name)
        tag = row.get("collapsed_tag")
        items.append(WinogroundItem(key, (names[0], names[1]), (row["caption_0"], row["caption_1"]),
                                    tag if isinstance(tag, str) else ""))
    if not items:
        raise DataError(f"Winoground file {path} holds no items", FIX)
    return items


def winoground_root(data_dir=None) -> Path:
    """The folder with ``examples.jsonl`` and ``images/``: <data-dir>/winoground (or its ``data/``, as the Hub
    repository lays it out), or <data-dir> itself."""
    base = Path(data_dir).expanduser() if data_dir else paths.default_data_dir()
    for cand in (base / TASK, base / TASK / "data", base):
        if (cand / "examples.jsonl").is_file():
            return cand
    raise DataError(f"Winoground's examples.jsonl is not in {base / TASK}",
                    f"accept the terms of the gated dataset {HUB_REPO} on the Hub, set HF_TOKEN, run "
                    f"'hf download {HUB_REPO} --repo-type dataset --local-dir {base / TASK}' and unzip "
                    f"data/images.zip there (examples.jsonl beside images/), or pass --data-dir naming that folder")


def winoground_items(root, *, check_images: bool = True) -> list[WinogroundItem]:
    """Winoground's items from ``root/examples.jsonl``; ``check_images``: a DataError naming the folder and the
    first missing file when an image is not in ``root/images``."""
    items = read_winoground_file(Path(root) / "examples.jsonl")
    if check_images:
        folder = Path(root) / "images"
        missing = [k for it in items for k in it.images if not _image_present(folder, k, "Winoground")]
        if missing:
            raise DataError(f"{len(missing)} of {2 * len(items)} Winoground images are missing from {folder} "
                            f"(first: {missing[0]})", f"unzip data/images.zip of {HUB_REPO} in {root}")
    return items


def winoground_sets(cfg, note=None) -> ItemSets:
    """The one item set of ``vlbench run --task winoground``."""
    if cfg.dataset not in (None, TASK):
        raise VlbenchError(f"--task {TASK} reads its own files, not --dataset {cfg.dataset!r}",
                           "leave --dataset out (--data-dir names the folder holding winoground/)")
    root = winoground_root(cfg.data_dir)
    items = winoground_items(root)
    if len(items) != N_ITEMS and note:
        note(f"Winoground: {len(items)} items, not the released {N_ITEMS} (a subset or a changed file)")
    digest = sha256_file(root / "examples.jsonl")
    keys = distinct_images(items)
    desc = {"name": (cfg.dataset_name or TASK).strip(), "hash": sha256_json({"examples.jsonl": digest}),
            "n_images": len(keys), "n_items": len(items),
            "source": {"annotations": str(root / "examples.jsonl"), "sha256": digest, "images": str(root / "images"),
                       "repository": f"huggingface.co/datasets/{HUB_REPO}"}}
    return ItemSets({f"task:{TASK}": items}, {k: root / "images" / k for k in keys}, desc,
                    {f"task:{TASK}": {"items": len(items)}})


#: the published scores of this set (vlbench.published.task_scores; docs/published.md): one entry per source
PUBLISHED = (
    {'id': 'winoground-paper-clip-vit-b-32',
     'model': "CLIP (ViT-B/32) as the Winoground paper names it: OpenAI's ViT-B/32 weights",
     'specs': ['openclip:ViT-B-32/openai', 'clip:openai/clip-vit-base-patch32', 'st:clip-ViT-B-32'],
     'sets': {'task:winoground': {'scores': {'text_score': 30.75, 'image_score': 10.5, 'accuracy': 8.0},
                                  'n_items': 400,
                                  'sha256': []}},
     'source': {'kind': 'paper',
                'citation': 'Thrush, Jiang, Bartolo, Singh, Williams, Kiela and Ross, Winoground: Probing Vision '
                            'and Language Models for Visio-Linguistic Compositionality, CVPR 2022 '
                            '(arXiv:2204.03162)',
                'table': 'Table 3 (text, image and group score over the 400 examples), row CLIP (ViT-B/32); '
                         'accuracy = the group score',
                'url': 'https://arxiv.org/abs/2204.03162',
                'read_in': 'a text copy of the paper (Table 3; Table 4 gives the same model by linguistic tag)',
                'consistency': 'each value is a whole number of the 400 examples (123, 42 and 32)'},
     'protocol': {'set_version': 'the 400 examples of facebook/winoground (Hub); no checksum of examples.jsonl is '
                                 'published',
                  'implementation': 'not stated (the paper names the model, not the code that ran it)',
                  'preprocessing': 'not stated',
                  'precision': 'not stated',
                  'lowercase': "tokenizer's own (CLIP's BPE lower-cases)",
                  'prompt': 'none (the caption as written)',
                  'tie_rule': "strict: s(C0,I0) > s(C1,I0) etc. (the paper's definitions; a tie fails)"},
     'match': {'adapter': None, 'preprocessing_adapter': None, 'precision': None, 'strict': True},
     'note': ''},
)


WINOGROUND = register_task(ChoiceTask(
    TASK, "Winoground (Thrush et al. 2022): 2 images x 2 captions per item; text, image and group scores "
          "(strict: a tie fails); files from the gated Hub dataset facebook/winoground", winoground_sets,
    evaluate=evaluate_winoground, text_only=evaluate_winoground_text_only, rule=RULE,
    table=partial(format_pairs_table, scoring=SCORING),
    size="400 items (800 images, 800 captions)",
    licence="Winoground's own terms, accepted on the Hub (gated; images licensed from Getty Images, research use)",
    citation="Thrush et al., Winoground: Probing Vision and Language Models for Visio-Linguistic "
             "Compositionality, CVPR 2022",
    metrics=declared_metrics(SCORING), scores=(("text_score", "text"), ("image_score", "image"), ("accuracy", "group")),
    blind_ceiling=BLIND_CEILING, published=PUBLISHED))
