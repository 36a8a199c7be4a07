"""Published zero-shot retrieval numbers and choice-task scores, shipped as data with their sources, and the check
of a finished run against them (docs/published.md): ``check_run(results) -> CheckReport``, ``published_rows()``,
``task_entries()``."""

from .check import CheckReport, check_run
from .table import PublishedRow, published_rows
from .task_scores import TaskEntry, task_entries

__all__ = ["CheckReport", "check_run", "PublishedRow", "published_rows", "TaskEntry", "task_entries"]
