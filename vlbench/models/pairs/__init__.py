"""Pair scorers: models that score an (image, text) pair jointly (cross-encoders, ITM heads) instead of embedding
each side alone. The protocol and its loader (protocol.py), the transformers BLIP and BLIP-2 ITM scorers
(blip.py), the two-stage rerank of a first-stage ranking and
the batched scoring of each query's top K (rerank.py) and the registrations of the built-ins
(builtin.py, read by ``vlbench.registry.pair_scorers``)."""

from __future__ import annotations

from .protocol import PAIR_CODE_VERSION, PairScorer, load_pair_scorer
from .rerank import rerank, topk_pair_scores

__all__ = ["PAIR_CODE_VERSION", "PairScorer", "load_pair_scorer", "rerank", "topk_pair_scores"]
