"""The tracker plug-in kind (``--report-to NAME``): what a tracker is, what it receives, and how it fails.

A tracker is registered in :data:`vlbench.registry.trackers` by a lazy ``"module:attr"`` target -- the built-ins
in :mod:`vlbench.trackers.builtin`, a third party's through the entry-point group ``vlbench.trackers`` -- and the
target is an object with the members of :class:`Tracker`.

Why a :class:`typing.Protocol` and not an ABC: a tracker is any object with these three members, so a third
party's package need not import (or subclass anything of) vlbench to define one, and its module stays as light as
its own imports; a type checker still checks a class against the protocol (``tracker: Tracker = MyTracker()``).
What a type checker cannot see -- that ``send`` returns one line, leaves the payload as it was, and can be called
again -- :func:`vlbench.testing.check_tracker` checks by calling it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..errors import VlbenchError

#: the project (W&B project, MLflow experiment, trackio project, TensorBoard sub-folder) when neither the caller
#: nor the environment (``VLBENCH_TRACKER_PROJECT``) names one
DEFAULT_PROJECT = "vlbench"


class TrackerError(VlbenchError):
    """A tracker could not be used (its extra is missing, or it refused what it was sent)."""


@dataclass(frozen=True)
class Payload:
    """What one tracker run receives: ``name`` (the run id), ``config`` (flat: option -> value), ``metrics``
    (name -> value), ``step`` (None for a plain run; the training step for the Evaluator), ``files`` (the run's
    main files: table.md, results.json, leaderboard PNGs), ``text`` (name -> Markdown, e.g. the table)."""

    name: str
    config: dict
    metrics: dict
    step: int | None = None
    files: tuple = ()
    text: dict = field(default_factory=dict)


@runtime_checkable
class Tracker(Protocol):
    """An experiment tracker that receives finished runs.

    * ``description``: one line for ``vlbench ls``;
    * ``prepare(**settings)``: the start-up that needs no run (import the tracker's library, start its service,
      open a client). vlbench calls it in a background thread when a run with ``--report-to`` starts, while the
      run computes, so it must not print and must be safe to call more than once; if it raises, vlbench still
      calls ``send`` (which must then do the start-up itself) and reports only what ``send`` raises;
    * ``send(payload, project, **settings) -> str``: make one tracker run holding the :class:`Payload` under
      ``project`` and return one line saying where it went (a folder, a URL, a run id). It raises on failure
      (best a :class:`TrackerError` with the fix); it never changes the payload.

    ``settings`` are the keyword arguments given for this tracker (``report(..., settings={"NAME": {...}})``);
    a tracker reads anything else from its own environment variables.
    """

    description: str

    def prepare(self, **settings: Any) -> None: ...

    def send(self, payload: Payload, project: str, **settings: Any) -> str: ...


def settings_for(settings: Mapping | None, name: str) -> dict:
    """The keyword arguments of tracker ``name`` in ``settings`` (tracker -> keyword arguments)."""
    return dict((settings or {}).get(name) or {})
