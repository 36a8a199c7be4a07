"""Reproductions of published results (``vlbench reproduce``): hendriksen2024 (the chapter's Tables 5.2-5.4)."""

from .hendriksen2024 import published, reproduce

__all__ = ["published", "reproduce"]
