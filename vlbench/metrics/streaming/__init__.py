"""Scoring at the machine's speed: exact ranking heads and best-positive ranks streamed over the tile grid
(:mod:`.scan`), a subpackage because the metrics folder is at its size limit."""
