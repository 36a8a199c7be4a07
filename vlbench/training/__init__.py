"""Evaluation during training: :class:`Evaluator` (built once, called with the in-memory model at each
checkpoint) and the hooks for open_clip's training loop and Hugging Face's ``Trainer`` (hooks.py).
docs/training.md shows both."""

from __future__ import annotations

from .evaluator import Evaluator

__all__ = ["Evaluator", "VlbenchCallback"]


def __getattr__(name):  # the transformers callback imports transformers: only when asked for
    if name == "VlbenchCallback":
        from .hooks import VlbenchCallback

        return VlbenchCallback
    raise AttributeError(name)
