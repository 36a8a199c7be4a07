"""Compositional choice tasks: given an image, pick the right caption among candidates.

Item sources: :func:`order_items` (ARO's COCO-Order / Flickr30k-Order built with vlbench's own word-order
perturbations) and :func:`sugarcrepe_items` (SugarCrepe's seven hard-negative sets). Scoring:
:func:`evaluate_choice` from embeddings, :func:`run_choice_task` from a model adapter.
"""

from .choice import ChoiceItem, ChoiceRecord, ChoiceResult, distinct_images, distinct_texts, evaluate_choice, \
    evaluate_text_only, run_choice_task
from .sources import ORDER_PERTURBATIONS, SUGARCREPE_SUBSETS, coco_val2017_dir, order_items, sugarcrepe_items

__all__ = ["ChoiceItem", "ChoiceRecord", "ChoiceResult", "distinct_images", "distinct_texts", "evaluate_choice",
           "evaluate_text_only", "run_choice_task", "ORDER_PERTURBATIONS", "SUGARCREPE_SUBSETS",
           "coco_val2017_dir", "order_items", "sugarcrepe_items"]
