"""The exporter plug-in kind (``vlbench export RUN --format NAME``): what an exporter is and what it is given.

An exporter is registered in :data:`vlbench.registry.exporters` by a lazy ``"module:attr"`` target -- the
built-ins (``mteb``, ``model-index``) in :mod:`vlbench.export.builtin`, a third party's through the entry-point
group ``vlbench.exporters`` -- and the target is an object with the members of :class:`Exporter`.

Why a :class:`typing.Protocol` and not an ABC: an exporter is any object with these members, so a third party
need not subclass anything of vlbench to write one and its module stays as light as its own imports; a type
checker still checks a class against it. What a type checker cannot see -- that ``export`` writes only under
``out``, returns what it wrote, and leaves the run folder as it was -- :func:`vlbench.testing.check_exporter`
checks by calling it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..results import RunRecord

#: the kinds of run ``vlbench run`` writes: a retrieval run, or a choice-task run (``--task``)
RUN_KINDS = ("retrieval", "task")


def run_kind(record: RunRecord) -> str:
    """``"task"`` for a choice-task run (``vlbench run --task``), else ``"retrieval"``."""
    return "task" if record.other.get("task") else "retrieval"


def _ignore(line: str) -> None:
    return None


@dataclass(frozen=True)
class ExportRequest:
    """One export: the run (its ``folder`` and typed ``record``), the folder ``out`` to write into (it exists),
    the model's ``model_name`` in the files, the ``metrics`` the user selected (``--metrics``: a tuple of
    selectors, or None for the format's default), ``overwrite`` (``--overwrite``: replace files the exporter
    did not write), and ``note`` (prints one line to the user)."""

    folder: Path
    record: RunRecord
    out: Path
    model_name: str
    metrics: tuple[str, ...] | None = None
    overwrite: bool = False
    note: Callable[[str], None] = field(default=_ignore)


@runtime_checkable
class Exporter(Protocol):
    """A format a finished run is written in.

    * ``description``: one line for ``vlbench ls`` and ``vlbench export --help``;
    * ``run_kinds``: the kinds of run it exports, among :data:`RUN_KINDS`; vlbench refuses any other kind
      before calling it (a choice-task run is no retrieval result);
    * ``export(request) -> list of paths``: write the run under ``request.out`` and return every file written
      (all inside ``out``); raise a :class:`~vlbench.errors.VlbenchError` naming the problem and its fix when the
      run cannot be written in this format (never a partial export without a word). It reads the run, never
      changes it.
    """

    description: str
    run_kinds: tuple[str, ...]

    def export(self, request: ExportRequest) -> list: ...
