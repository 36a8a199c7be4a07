"""A blind (text-only) baseline for choice tasks: which candidate is the more plausible caption, without the image.

No pretrained language model can be installed offline here, so the scorer is one that needs no weights: an
interpolated Kneser-Ney bigram language model of image captions, trained on the MS-COCO Karpathy 5k test
captions (vlbench's ``coco`` set, 25,000 captions), never on the text it is asked about:

* **by content** (every task): a training caption whose normalized text (:func:`normalized`: lower case, words
  only, so case, punctuation and spacing do not matter) equals any candidate of the evaluated items is left out
  of the training text. This does not depend on the dataset's name: the order task on COCO test captions under a
  custom name leaves out the same captions as under ``coco``. When more than half of the training captions would
  be left out (the evaluated set *is* the training text, e.g. the order task on ``coco``), the baseline is not
  available and the results say why;
* **by image** (SugarCrepe): the captions of the 183 COCO test images that any of SugarCrepe's seven sets uses
  (:data:`SUGARCREPE_TEST_IMAGES`, matched by COCO image id), whichever sets are run or present.

A candidate's score is its mean log probability per token (end token included), so longer candidates are not
penalised for their length alone.
A set on which this scorer is far above chance can be gamed by text plausibility alone (Hsieh et al. 2023
made the same point with larger models).
"""

from __future__ import annotations

from ..datasets.captionlm import (  # noqa: F401  (the scorer's names, re-exported where they always were)
    SCORER,
    BigramLM,
    coco_caption_lm,
    coco_image_id,
    normalized,
    tokens,
)
from ..errors import DataError
from .registry import get_task

MAX_EXCLUDED_SHARE = 0.5  # more of the training text than this among the evaluated captions: no baseline
# COCO ids of the Karpathy 5k test images used by SugarCrepe's seven sets (commit 0047054b24; counted from the
# files, checked by tests/unit/tasks/test_blind_baseline.py): pinned so the training text is the same whatever files
# are present
SUGARCREPE_TEST_IMAGES = frozenset((
    8277, 22892, 23034, 33638, 38048, 42070, 45550, 46497, 48924, 51961, 52017, 54593, 54931, 58636, 63602,
    69795, 78420, 78959, 84650, 84674, 85329, 86582, 87470, 87476, 88269, 90062, 93353, 94157, 95786, 97924,
    102805, 116208, 118367, 121031, 122606, 123321, 127517, 128675, 140658, 144798, 152740, 168337, 171190,
    177015, 179285, 181859, 182441, 184384, 184791, 189828, 193494, 198641, 199551, 207585, 210032, 210273,
    211120, 213224, 214224, 215245, 217957, 220858, 221291, 223182, 225946, 230008, 232348, 233139, 235836,
    236784, 239347, 248980, 252716, 255165, 256192, 256868, 257624, 259854, 265816, 266082, 268375, 269942,
    276018, 276055, 276434, 283113, 290843, 291664, 294831, 294855, 296284, 300233, 302030, 303893, 308430,
    311394, 314294, 318080, 320664, 321214, 321333, 325991, 326082, 329219, 332455, 334371, 334399, 335800,
    337055, 340175, 348012, 348708, 348881, 349184, 355905, 357978, 360960, 361551, 361919, 369541, 369771,
    372577, 374369, 383443, 399205, 403385, 405249, 405432, 410428, 410880, 412240, 414385, 415727, 415741,
    416534, 416991, 418281, 428867, 430286, 430961, 446522, 447314, 448365, 452084, 452122, 453302, 453860,
    455157, 458755, 471869, 473237, 476215, 480021, 482436, 486046, 488736, 489611, 491497, 491757, 499181,
    516316, 517687, 519764, 522889, 523194, 535306, 535578, 537991, 540280, 541664, 544444, 545129, 546964,
    550322, 550349, 553990, 554595, 557501, 562121, 569976, 571804, 578093, 579307
))
def blind_baseline(task, item_sets: dict, data_dir, seed: int = 0, note=None) -> dict:
    """The text-only accuracy per item set (``{condition: [ChoiceItem]}``) of ``task`` (a registered
    ChoiceTask or its name: its ``text_only`` scorer, its ``blind_excluded_images``), or why there is none;
    ``note`` (e.g. a console printer) is told when the baseline is unavailable or left captions out of its
    training."""

    task = get_task(task) if isinstance(task, str) else task
    evaluated = {normalized(c) for items in item_sets.values() for it in items for c in it.candidates}
    exclude_ids = set(task.blind_excluded_images)
    rule = {"overlap_rule": "training captions equal (normalized: lower case, words only) to any evaluated "
                            f"candidate are left out; more than {MAX_EXCLUDED_SHARE:.0%} left out: unavailable"}
    try:
        lm, info = coco_caption_lm(data_dir, exclude_ids, evaluated)
    except DataError as exc:
        return _unavailable(str(exc), rule, note)
    info.update(rule)
    left_out = info["excluded_captions_by_content"]
    if left_out > MAX_EXCLUDED_SHARE * info["source_captions"]:
        return _unavailable(f"{left_out:,} of its {info['source_captions']:,} training captions (COCO test) are "
                            "captions of the evaluated items (checked by content), so it would not be blind",
                            {**rule, "excluded_captions_by_content": left_out}, note)
    if left_out and note:
        note(f"blind (text-only) baseline: {left_out:,} of its {info['source_captions']:,} training captions (COCO "
             "test) equal captions of the evaluated items and were left out of its training text")
    res = {cond: task.text_only(items, lm, seed=seed) for cond, items in item_sets.items()}
    return {**info, "available": True, "sets": {c: r.as_dict() for c, r in res.items()}}


def _unavailable(why: str, extra: dict, note) -> dict:
    if note:
        note(f"blind (text-only) baseline unavailable: {why}")
    return {"scorer": SCORER, "available": False, "why": why, **extra}
