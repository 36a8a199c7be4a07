"""Published zero-shot retrieval numbers, shipped as data with their sources, and the check of a finished run
against them (docs/published.md): ``check_run(results) -> CheckReport``, ``published_rows()``."""

from .check import CheckReport, check_run
from .table import PublishedRow, published_rows

__all__ = ["CheckReport", "check_run", "PublishedRow", "published_rows"]
