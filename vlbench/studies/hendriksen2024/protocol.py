"""The chapter authors' protocol (``hendriksen2024``) as a preset of run options, and the paper's granularity
profile.

What the code of Hendriksen et al. (github.com/mariyahendriksen/model-robustness-for-itr) does, and how it
differs from vlbench's standard protocol (docs/reproducing.md):

================  ======================  ==========================================================
setting           standard                hendriksen2024
================  ======================  ==========================================================
gallery           test (--gallery)        folder: every image in the image folder is a t2i candidate
i2t_recall        hit                     fraction: hits / min(#relevant, k)
relevance         self                    a fixed relevance model for DCG gains (:data:`RELEVANCE_MODEL`)
perturb_side      both                    t2i: perturbed captions are t2i queries only; i2t ranks clean ones
truncate_chars    none                    330 characters before encoding
perturb_variant   standard                hendriksen2024: the authors-compatible perturbations (compat.py)
dcg               DCG_CM@p and nDCG       the same; the chapter reports the unnormalized DCG_CM@p column
================  ======================  ==========================================================

Each setting stays a run option of its own (an explicit option wins; the label records the deviation,
e.g. ``hendriksen2024+gallery=test``). Row-by-row reference implementations of the fraction recall, the
fixed-relevance DCG and the cut live in the tests (tests/support/protocol_reference.py).
"""

from __future__ import annotations

from vlbench.pipeline.presets import Protocol

#: sentence-transformers ``clip-ViT-B-32`` wraps these weights (openai/clip-vit-base-patch32)
RELEVANCE_MODEL = "clip:openai/clip-vit-base-patch32"
#: the authors' relevance encoder itself (models/st.py), for ``--relevance``: the same weights through
#: sentence-transformers' own encode (an explicit --relevance wins; the label records it)
AUTHORS_RELEVANCE_MODEL = "st:clip-ViT-B-32"
NAME = "hendriksen2024"

PROTOCOL = Protocol(
    NAME, {"gallery": "folder", "i2t_recall": "fraction", "relevance": RELEVANCE_MODEL, "perturb_side": "t2i",
           "truncate_chars": 330, "perturb_variant": NAME},
    description="the chapter authors' code: folder gallery, fraction i2t recall, fixed relevance model, t2i-only "
                "perturbations, 330-character cut, authors-compatible perturbations",
    relevance_alternative=AUTHORS_RELEVANCE_MODEL,
    reference="Hendriksen et al., Assessing Brittleness of Image-Text Retrieval Benchmarks from Vision-Language "
              "Models Perspective; github.com/mariyahendriksen/model-robustness-for-itr",
    printed_metrics=("dcg_cm", "ndcg_cm"))  # the chapter reports DCG_CM (eq. 5.2) as it defines it

#: the granularity readings of the chapter (profile ``paper``): its results paragraph and its two published
#: percentages read Table 5.1 per caption ("adjectives per caption"), so the NP features are counts per
#: caption; it also takes the second round's readings, each argued in docs/granularity.md: CPs anywhere inside
#: a noun's phrase, numerals as the quantifiers, the depth of nouns and verbs, and concept diversity as the
#: number of distinct concepts per caption; and the third round's reading for CPs: every prepositional phrase of
#: the caption, whatever the parser attaches it to (a complex preposition is one phrase), so that a sentence
#: caption ("a man is standing on a ladder") and a noun-phrase caption ("a man standing on a ladder") carrying
#: the same detail count the same. The library's default profile (``per-caption``) differs in that one reading.
PAPER_PROFILE = {"np_unit": "caption", "participles": True, "predicative": True, "cp_scope": "caption",
                 "cp_relations": ("prep",), "quantifier_set": "numerals", "depth_pos": ("NOUN", "VERB"),
                 "diversity": "concepts"}
