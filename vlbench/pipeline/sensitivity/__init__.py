"""Meaning-changing probes as run conditions (``vlbench run --probes``): made once (:mod:`.plan`, cached beside the
perturbed captions), their captions encoded once with the rest, scored as retrieval like every caption condition
and, apart, by their own definitions (:mod:`.scores`): pairwise for a probe that makes the caption false, by the
denial shares of the negated queries for a true denial. :mod:`.summary` writes results.json ``sensitivity``, the
per-item rows and the table's section. Their results carry kind "sensitivity" and are never averaged with the
meaning-preserving (invariance) conditions. docs/perturbations.md, "Scoring probes in a run".
"""

from __future__ import annotations

from .plan import probe_conditions, probe_names, probe_sets
from .scores import MentionIndex, denial_shares, pair_scores, pairwise, top_k, word_forms
from .summary import DEFINITIONS, effect, probe_results, probe_table, write_per_item

__all__ = ["probe_conditions", "probe_names", "probe_sets", "MentionIndex", "denial_shares", "pair_scores",
           "pairwise", "top_k", "word_forms", "DEFINITIONS", "effect", "probe_results", "probe_table",
           "write_per_item"]
