"""``--task valse``: VALSE (Parcalabescu et al., ACL 2022), linguistic phenomena as a caption against its foil.

Each entry of a piece's file (``data/<piece>.json`` of github.com/Heidelberg-NLP/VALSE) is an image
(``image_file``, from Visual7W, COCO 2017, SWiG, VisDial or FOIL-COCO as its ``dataset`` says), its ``caption``
and a ``foil`` that changes one phenomenon (existence, plurals, counting, relations, actions, coreference, FOIL-it).
As the authors' README says, only the validated entries are the benchmark: at least two of three annotators chose
the caption, but not the foil (``mturk.caption >= 2``); the others are left out. The paper's score for a
contrastive model such as CLIP is the pairwise ranking accuracy (acc_r): the caption scores above the foil, which
is vlbench's choice rule (strict: a tie is a miss). No published score is shipped: no copy of the paper's tables
was read for this release.
"""

from __future__ import annotations

from functools import partial

from ...errors import DataError
from ..choice import ChoiceItem
from ..registry import ChoiceTask, register_task
from ..shapes.captions import JsonCaptionSet, caption_sets

#: sha256 of each piece's file at the pinned commit, and its validated entries (counted from the file)
PIECES = {
    "existence": ("b20fca52eba86c544083d423345a2e28e60e601ef61c56c9ac1c73a95a3a6d18", 505),
    "plurals": ("43760db7fc8c6f2a21d3536d52f81539cb101f3370e8d2effb09de43d91486a3", 851),
    "counting-hard": ("2cc83615653675fb50914ce2d8ab4041cce1278eed7ac0abf6f319dbce5c967a", 868),
    "counting-small-quant": ("ca0645885b05738f6c6df2dffec70c669aaff64114017f33425821faab4bc374", 900),
    "counting-adversarial": ("0d23529308449c98b37a91048a865a5f377325eceb9accd73f2947bc512d12b0", 691),
    "relations": ("061fc557459c318ccd6734d07c21cfa5bf5ae87aa6b1110b8f5ec3d6b2911043", 535),
    "action-replacement": ("336ba134f29a3475d0508809067218909a6bd30f079c59309d19244eccb7917f", 648),
    "actant-swap": ("915294ac3ade7c4c067b1c6841d0db93b60cb8a61ac8e2fb6b125c2a1c0ca93a", 949),
    "coreference-standard": ("dae1d9eb018acb54e29a1c4983f3563f86ec3b6beb4037a261564270b0473e95", 708),
    "coreference-hard": ("ef54d8d971d9e0f264e07de08d9915c6e3d6129a2f239888f2b938f5c2eb4139", 104),
    "foil-it": ("6f6f0d7494271ed28f6e6f075c3ba36ba1bc45d00ecf7403920f060915130460", 943),
}


def valse_item(key: str, entry: dict, piece: str) -> ChoiceItem | None:
    """The item of one entry (caption first, then the foil), or None when the annotators did not validate it."""
    for f in ("image_file", "caption", "foil"):
        if not isinstance(entry.get(f), str) or not entry[f].strip():
            raise DataError(f"field {f!r} is {'missing' if f not in entry else 'not a non-empty string'}", "")
    votes = (entry.get("mturk") or {}).get("caption") if isinstance(entry.get("mturk"), dict) else None
    if isinstance(votes, bool) or not isinstance(votes, int):
        raise DataError("field 'mturk.caption' (the annotators' votes for the caption) is not a whole number", "")
    if votes < 2:
        return None
    return ChoiceItem(f"{piece}:{key}", entry["image_file"], (entry["caption"], entry["foil"]), 0,
                      ("caption", f"foil:{piece}"))


VALSE_SET = JsonCaptionSet(
    "valse", "VALSE", "github.com/Heidelberg-NLP/VALSE", "2152d90d4aecd11f7f74cf03420abcb63efff9c5", "data",
    {p: sha for p, (sha, _) in PIECES.items()}, {p: n for p, (_, n) in PIECES.items()}, valse_item,
    "each image named by its entry's image_file, from the dataset its entry names (Visual7W, COCO 2017, SWiG, "
    "VisDial v1.0, FOIL-COCO), into one folder")

VALSE = register_task(ChoiceTask(
    "valse", "VALSE (Parcalabescu et al. 2022): a caption against its foil, 11 pieces of 6 linguistic phenomena; the "
             "validated entries; --dataset valse[:PIECE,...], --images-dir the folder of their images",
    partial(caption_sets, VALSE_SET), images_dir=True,
    size=f"{sum(n for _, n in PIECES.values()):,} validated items in 11 pieces (2 options each): "
         + ", ".join(f"{p} {n}" for p, (_, n) in PIECES.items()),
    licence="MIT (the repository's LICENSE); the images keep their source datasets' terms (Visual7W, COCO, SWiG, "
            "VisDial, FOIL)",
    citation="Parcalabescu, Cafagna, Muradjan, Frank, Calixto and Gatt, VALSE: A Task-Independent Benchmark for "
             "Vision and Language Models Centered on Linguistic Phenomena, ACL 2022",
    scores=(("accuracy", "acc_r (caption above foil)"),)))
