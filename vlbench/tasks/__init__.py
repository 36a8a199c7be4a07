"""Compositional choice tasks: given an image, pick the right caption among candidates.

Item sources: :func:`order_items` (ARO's COCO-Order / Flickr30k-Order built with vlbench's own word-order
perturbations), :func:`sugarcrepe_items` (SugarCrepe's seven hard-negative sets) and :func:`scpp_items`
(SugarCrepe++'s triplets, scored by :func:`evaluate_triplets`: ITT and TOT). Scoring:
:func:`evaluate_choice` from embeddings, :func:`run_choice_task` from a model adapter.
"""

from .choice import ChoiceItem, ChoiceRecord, ChoiceResult, distinct_images, distinct_texts, evaluate_choice, \
    evaluate_text_only, run_choice_task
from .sources import ORDER_PERTURBATIONS, SUGARCREPE_SUBSETS, coco_val2017_dir, order_items, sugarcrepe_items
from .sugarcrepe_pp import SCPP_SUBSETS, TripletItem, TripletResult, evaluate_triplets, scpp_items

__all__ = ["ChoiceItem", "ChoiceRecord", "ChoiceResult", "distinct_images", "distinct_texts", "evaluate_choice",
           "evaluate_text_only", "run_choice_task", "ORDER_PERTURBATIONS", "SUGARCREPE_SUBSETS",
           "coco_val2017_dir", "order_items", "sugarcrepe_items", "SCPP_SUBSETS", "TripletItem", "TripletResult",
           "evaluate_triplets", "scpp_items"]
