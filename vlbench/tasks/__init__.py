"""Compositional choice tasks (``vlbench run --task NAME``): given an image, pick the right caption among candidates.

What lives here: the task records and their registry (:mod:`.registry`: ``ChoiceTask``, ``register_task``,
``get_task``); the sets, one module each in :mod:`.sets` (order, SugarCrepe, SugarCrepe++, Winoground, What'sUp,
ColorSwap, BiVLC, ARO, MMVP, VALSE), each a declaration the registry finds there; the shapes the sets share
(:mod:`.shapes`: 2x2 pairs, N-captions JSON sets, the Hub's parquet rows); the shared scoring (:mod:`.choice`:
:func:`evaluate_choice` from embeddings, :func:`run_choice_task` from a model adapter), item sources and bounded
task-file reading (:mod:`.sources`), the blind text-only baseline (:mod:`.blind`), the run (:mod:`.run`) and a set
scored by a pair scorer (:mod:`.pair_run`: ``--model blip-itm``).

To add a set: one module in vlbench/tasks/sets/ that builds a ``ChoiceTask`` and calls ``register_task``; nothing
else changes (docs/tasks.md, "Adding a set"). This file holds no logic: it re-exports the public names.
"""

from .choice import (
           ChoiceItem,
           ChoiceRecord,
           ChoiceResult,
           PairScores,
           distinct_images,
           distinct_texts,
           evaluate_choice,
           evaluate_text_only,
           run_choice_task,
)
from .pair_run import is_pair_scorer  # a pair scorer as a task's model; declares the task-pair-scores store
from .registry import ChoiceTask, ItemSets, get_task, register_task, tasks, unregister_task
from .sets.sugarcrepe_pp import SCPP_SUBSETS, TripletItem, TripletResult, evaluate_triplets, scpp_items
from .sources import ORDER_PERTURBATIONS, SUGARCREPE_SUBSETS, coco_val2017_dir, order_items, sugarcrepe_items

__all__ = ["ChoiceItem", "ChoiceRecord", "ChoiceResult", "distinct_images", "distinct_texts", "evaluate_choice",
           "evaluate_text_only", "run_choice_task", "ChoiceTask", "ItemSets", "get_task", "register_task", "tasks",
           "unregister_task", "ORDER_PERTURBATIONS", "SUGARCREPE_SUBSETS", "coco_val2017_dir", "order_items",
           "sugarcrepe_items", "PairScores", "is_pair_scorer", "SCPP_SUBSETS", "TripletItem", "TripletResult",
           "evaluate_triplets", "scpp_items"]
