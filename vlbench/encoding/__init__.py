"""Encoding: a model's embeddings of a run's images and texts, and their cache.

What lives here: the encoding session of a run (:mod:`.session`: the lazy model, its embedding cache,
encode statistics), batched encoding (:mod:`.encode`), image loading and content keys (:mod:`.images`),
image conditions bound to the model (:mod:`.variant_images`), the embedding cache (:mod:`.cache`) and
torchrun sharding (:mod:`.distributed`).

To add a model, write an adapter (vlbench.models), not code here: every model is encoded through the same
session. This file holds no logic.
"""
