"""How a caption perturbation reaches a choice task's items: which candidates are the right ones, and an item
with some of its captions replaced.

A task's items are frozen dataclasses with a ``candidates`` sequence (a field or a property). The defaults here
cover the item types of vlbench's sets without code of their own:

* :func:`right_candidates`: ``(correct,)`` for an item with an integer ``correct`` (a ChoiceItem); for an item
  with several ``images`` and no ``correct`` (Winoground's pair, a pair of images and statements) every
  candidate, because each caption is the right one of one of the images; an item with neither is refused by
  name (its task gives a hook of its own, as SugarCrepe++ does: both positives are right);
* :func:`perturb_item`: ``dataclasses.replace`` of the field that holds the candidates: ``candidates`` itself,
  else the one tuple field equal to them (Winoground's ``captions``), else the string fields that hold them in
  order (SugarCrepe++'s ``p1``, ``p2``, ``neg``).

A task whose items fit none of these passes ``right_candidates`` / ``perturb`` to its ChoiceTask record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ..errors import VlbenchError

#: --perturb-options: which candidates of an item a caption perturbation changes
PERTURB_OPTIONS = ("all", "correct")
DEFAULT_PERTURB_OPTIONS = "all"


def _hint(item) -> str:
    return (f"give the task's ChoiceTask record right_candidates= and perturb= hooks for {type(item).__name__} "
            "items (vlbench/tasks/perturbable.py says what they take)")


def right_candidates(item) -> tuple[int, ...]:
    """The indices of the right candidates of ``item`` (see the module's docstring)."""
    correct = getattr(item, "correct", None)
    if isinstance(correct, int) and not isinstance(correct, bool):
        return (correct,)
    if len(tuple(getattr(item, "images", None) or ())) > 1:
        return tuple(range(len(item.candidates)))
    raise VlbenchError(f"--perturb-options correct: cannot tell which candidate of a {type(item).__name__} item "
                       f"({getattr(item, 'item_id', '?')!r}) is the right one: it has no integer 'correct' and no "
                       "several 'images'", _hint(item))


def perturbed_indices(item, which: str, right=right_candidates) -> tuple[int, ...]:
    """The candidates ``--perturb-options which`` changes: every one (``all``) or the right ones (``correct``)."""
    if which == "all":
        return tuple(range(len(item.candidates)))
    if which == "correct":
        return tuple(right(item))
    raise VlbenchError(f"unknown --perturb-options {which!r}", f"use one of: {', '.join(PERTURB_OPTIONS)}")


def perturb_item(item, texts: Mapping[int, str]):
    """``item`` with candidate ``k`` replaced by ``texts[k]`` (the others kept), by ``dataclasses.replace``."""
    if not texts:
        return item
    old = tuple(item.candidates)
    new = tuple(texts.get(k, c) for k, c in enumerate(old))
    if not dataclasses.is_dataclass(item) or isinstance(item, type):
        raise VlbenchError(f"cannot perturb the captions of a {type(item).__name__} item: it is no dataclass",
                           _hint(item))
    fields = [f.name for f in dataclasses.fields(item)]
    if "candidates" in fields:
        return dataclasses.replace(item, candidates=new)
    tuples = [n for n in fields if isinstance(getattr(item, n), tuple) and tuple(getattr(item, n)) == old]
    if len(tuples) == 1:
        return dataclasses.replace(item, **{tuples[0]: new})
    strings = [n for n in fields if isinstance(getattr(item, n), str)]
    for start in range(len(strings) - len(old) + 1):
        names = strings[start:start + len(old)]
        if tuple(getattr(item, n) for n in names) == old:
            return dataclasses.replace(item, **dict(zip(names, new)))
    raise VlbenchError(f"cannot tell which field of a {type(item).__name__} item holds its candidates", _hint(item))
