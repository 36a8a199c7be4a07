"""``--task bivlc``: BiVLC (Miranda et al. 2024, arXiv:2406.09952), vision-language compositionality both ways.

2,933 items, each a COCO 2017 val image with its COCO caption, a SugarCrepe hard-negative caption and a negative
image generated from that caption (human-selected). Released layout: the Hub dataset ``imirandam/BiVLC``, split
``test`` (``data/test-0000k-of-00002-<hash>.parquet``), columns ``image``, ``caption``, ``negative_caption``,
``negative_image`` (images), ``type`` (replace / swap / add) and ``subtype`` (obj / att / rel), read by
:mod:`.hubrows`. The authors' evaluation (github.com/IMirandaM/BiVLC, commit 84f0d17,
``src/CLIP_fine_tuning/CLIP_utils.py: evaluate_BiVLC``) with C0 = caption, C1 = negative_caption, I0 = image,
I1 = negative_image:

* **I2T** (image-to-text): ``s(C0,I0) > s(C1,I0)`` (Ipos_2T) and ``s(C1,I1) > s(C0,I1)`` (Ineg_2T);
* **T2I** (text-to-image): ``s(C0,I0) > s(C0,I1)`` (Tpos_2I) and ``s(C1,I1) > s(C1,I0)`` (Tneg_2I);
* **group**: both. Strict comparisons, as the authors' code: a tie is a miss.

Chance 25 / 25 / 16.67 percent (50 for each single comparison). The paper's finding is that models do much
worse text-to-image than image-to-text (SugarCrepe only measures the latter), so both are reported side by side,
with their difference. Blind (text-only) ceiling: 0 for I2T, T2I and group by design; Ipos_2T alone is
SugarCrepe's question (does the image's own caption beat the negative), where text plausibility can win.
"""

from __future__ import annotations

from functools import partial

from ...errors import VlbenchError
from ...util.io import sha256_json
from ..blind import SUGARCREPE_TEST_IMAGES
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

TASK = "bivlc"
HUB_REPO = "imirandam/BiVLC"
REPO = "github.com/IMirandaM/BiVLC"
COMMIT = "84f0d1751e7212d97cdeaeb01353862c09908bcb"  # evaluate_BiVLC, whose rule this module follows
N_ITEMS = 2933
#: sha256 (vlbench.util.io.sha256_json) of the sorted [caption, negative_caption, type, subtype] rows of the 2,933
#: items, from the per-item file the authors publish with their evaluation (results/BiVLC_ViT-B-32.csv of REPO at
#: COMMIT; that file's sha256 is a16d196a...): the parquet files themselves cannot be fetched here to pin
RELEASE_TEXTS_SHA256 = "ddaa60eded4499c46246286af1c556f017aea4cb5c0dcd198b68265262780d88"
SET = HubSet(TASK, HUB_REPO, "BiVLC", ("image", "negative_image"), ("caption", "negative_caption"),
             ("type", "subtype"))
SCORING = PairScoring(
    {"i0_picks_c0": "ipos_2t", "i1_picks_c1": "ineg_2t", "c0_picks_i0": "tpos_2i", "c1_picks_i1": "tneg_2i",
     "text": "i2t_score", "image": "t2i_score", "group": "accuracy"},
    {"i0_picks_c0": "Ipos_2T", "i1_picks_c1": "Ineg_2T", "c0_picks_i0": "Tpos_2I", "c1_picks_i1": "Tneg_2I",
     "text": "I2T", "image": "T2I", "group": "group"},
    "C0 caption, C1 negative_caption, I0 image, I1 negative_image; I2T: s(C0,I0) > s(C1,I0) and s(C1,I1) > "
    "s(C0,I1); T2I: s(C0,I0) > s(C0,I1) and s(C1,I1) > s(C1,I0); group: both; s = cosine similarity; a tie is a "
    "miss (as Miranda et al. 2024, evaluate_BiVLC)")


def parse_bivlc_spec(spec: str | None) -> str:
    """``bivlc`` or ``bivlc:test`` (the one released split)."""
    name, _, split = (spec or TASK).partition(":")
    split = split.strip().lower() or "test"
    if name != TASK or split != "test":
        raise VlbenchError(f"--task {TASK} reads --dataset {TASK} (its test split), not {spec!r}",
                           "leave --dataset out")
    return split


def texts_digest(rows) -> str:
    """sha256_json of the sorted [caption, negative_caption, type, subtype] rows, the form
    :data:`RELEASE_TEXTS_SHA256` pins."""
    return sha256_json(sorted([r["caption"], r["negative_caption"], r.get("type"), r.get("subtype")] for r in rows))


def bivlc_items(data_dir=None) -> tuple[list[PairItem], dict, dict]:
    """(items, image key -> file, source record) of BiVLC's test split. Item ids are the row numbers (from 0, in
    file order) since the release has no id column; ``tag`` is the item's ``type``."""
    got = read_rows(SET, "test", data_dir)
    texts = texts_digest(got.rows)
    items = []
    for n, row in enumerate(got.rows):
        kind = row.get("type")
        items.append(PairItem(str(n), (row["image"], row["negative_image"]), (row["caption"], row["negative_caption"]),
                              kind.strip().lower() if isinstance(kind, str) else ""))
    source = {**got.source, "texts_sha256": texts, "texts_match_release": texts == RELEASE_TEXTS_SHA256}
    return items, {k: got.image_dir / k for it in items for k in it.images}, source


def bivlc_sets(cfg, note=None) -> ItemSets:
    """The one item set of ``vlbench run --task bivlc``."""
    parse_bivlc_spec(cfg.dataset)
    items, images, source = bivlc_items(cfg.data_dir)
    if not source["texts_match_release"] and note:
        note(f"BiVLC: {len(items)} items whose captions, negative captions and types differ from the {N_ITEMS} "
             f"the authors' evaluation lists ({REPO}, results/BiVLC_ViT-B-32.csv): a subset or a changed file")
    cond = f"task:{TASK}"
    keys = distinct_images(items)
    desc = {"name": (cfg.dataset_name or TASK).strip(), "hash": sha256_json({"files": source["files"]}),
            "n_images": len(keys), "n_items": len(items), "source": {**source, "rule_from": f"{REPO}@{COMMIT[:7]}"}}
    return ItemSets({cond: items}, {k: images[k] for k in keys}, desc, {cond: {"items": len(items)}})


#: the published scores of this set (vlbench.published.task_scores; docs/published.md): one entry per source
PUBLISHED = (
    {'id': 'bivlc-paper-openai-vit-b-32',
     'model': "CLIP (OpenAI ViT-B-32, open_clip pretrained='openai') as the BiVLC paper names it",
     'specs': ['openclip:ViT-B-32/openai', 'clip:openai/clip-vit-base-patch32', 'st:clip-ViT-B-32'],
     'sets': {'task:bivlc': {'scores': {'i2t_score': 75.83, 't2i_score': 52.4, 'accuracy': 49.06},
                             'n_items': 2933,
                             'sha256': []}},
     'source': {'kind': 'paper',
                'citation': 'Miranda, Salaberria, Agirre and Azkune, BiVLC: Extending Vision-Language '
                            'Compositionality Evaluation with Text-to-Image Retrieval, arXiv:2406.09952, 2024',
                'table': 'the main results table (I2T, T2I, Group), row CLIP; accuracy = the group score',
                'url': 'https://github.com/IMirandaM/BiVLC',
                'read_in': "the table as the authors' repository shows it (misc/main_results.PNG at commit "
                           '84f0d17), and recomputed from their per-item file results/BiVLC_ViT-B-32.csv (sha256 '
                           'a16d196aa1ad012f826b002fc59df56926ab08bed68eae33f96ceec5cdb48c82): 2,224, 1,537 and '
                           '1,439 of 2,933 items',
                'consistency': 'each value is a whole number of the 2,933 items (2,224, 1,537 and 1,439)'},
     'protocol': {'set_version': 'the 2,933 test items of imirandam/BiVLC (Hub); no checksum of its parquet files '
                                 'is published',
                  'implementation': "open_clip (create_model_and_transforms('ViT-B-32', pretrained='openai'), the "
                                    "authors' main_evaluation_BiVLC.py)",
                  'preprocessing': "open_clip's ViT-B-32 transform (224 px, shorter side resized with bicubic, "
                                   'center crop)',
                  'precision': "fp32 (no autocast in the authors' script)",
                  'lowercase': "tokenizer's own (CLIP's BPE lower-cases)",
                  'prompt': 'none (the caption as written)',
                  'tie_rule': "strict: s(C0,I0) > s(C1,I0) etc. (the authors' evaluate_BiVLC; a tie fails)"},
     'match': {'adapter': 'vlbench.openclip',
               'preprocessing_adapter': 'vlbench.openclip',
               'precision': 'fp32',
               'strict': True},
     'note': ''},
)


BIVLC = register_task(ChoiceTask(
    TASK, "BiVLC (Miranda et al. 2024): a COCO image and caption against a SugarCrepe negative caption and a "
          "generated negative image; image-to-text (I2T), text-to-image (T2I) and group scores side by side "
          "(strict: a tie fails); files from the Hub dataset imirandam/BiVLC", bivlc_sets,
    evaluate=partial(evaluate_pairs, scoring=SCORING), text_only=partial(pairs_text_only, scoring=SCORING),
    rule=SCORING.rule, table=partial(format_pairs_table, scoring=SCORING),
    blind_excluded_images=SUGARCREPE_TEST_IMAGES,
    size="2,933 items (the test split), each a COCO val2017 image and caption, a negative caption and a generated "
         "negative image",
    licence="MIT (the Hub card and the repository's LICENSE); the positive images and captions are COCO 2017 val "
            "(images under Flickr terms, captions CC BY 4.0)",
    citation="Miranda, Salaberria, Agirre and Azkune, BiVLC: Extending Vision-Language Compositionality "
             "Evaluation with Text-to-Image Retrieval, arXiv:2406.09952, 2024",
    metrics=declared_metrics(SCORING), scores=(("i2t_score", "I2T"), ("t2i_score", "T2I"), ("accuracy", "group")),
    blind_ceiling=BLIND_CEILING, published=PUBLISHED))
