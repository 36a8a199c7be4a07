"""Instruction-conditioned MLLM embedders (VLM2Vec and GME on Qwen2-VL): the prompt formats (formats.py) and the
adapter (encoder.py), registered as the ``vlm2vec`` and ``gme`` model families (models/families.py)."""

from .formats import FORMATS, instruction_refusal, split_options

__all__ = ["FORMATS", "instruction_refusal", "split_options"]
