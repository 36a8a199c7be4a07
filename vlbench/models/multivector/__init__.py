"""Multi-vector (late interaction) models: ColQwen2 and ColPali through transformers.

A multi-vector model gives each image and each caption its token vectors (tokens x dim, ragged across items);
a pair is scored by MaxSim (vlbench.metrics.scan.maxsim). The adapter (:mod:`.colmodels`) encodes token vectors
(``encode_image_tokens`` / ``encode_text_tokens``) and says so with ``multivector = True``; the run's encode step
(vlbench.encoding.multivector) and scoring (MaxSimSource) take that path. This file holds no logic.
"""
