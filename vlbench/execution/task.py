"""What an executor is handed: :class:`Task`, plain data that travels to any node."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: ``on_event(kind, run_id, info)``: "started", "stage", "retry", "done" or "failed"; may be called from a thread
OnEvent = Callable[[str, str, dict], Any]


@dataclass(frozen=True)
class Task:
    """One run of a sweep: ``kwargs`` are the keyword arguments of :func:`vlbench.run` (JSON-able; ``out`` is
    ``folder``); ``needs``: what it asks of a node (``gpus``, ``cpus``, ``mem_gb``); ``log``: the file its
    output goes to (beside the run); ``retries``: how many times a failed attempt is tried again."""

    run_id: str
    folder: str
    kwargs: dict
    needs: dict = field(default_factory=dict)
    log: str = ""
    retries: int = 0

    @property
    def log_path(self) -> Path:
        """The log file: ``log``, else ``<folder>.log`` beside the run folder."""
        return Path(self.log) if self.log else Path(self.folder).with_name(Path(self.folder).name + ".log")

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Task:
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})
