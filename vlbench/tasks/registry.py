"""Choice tasks as registered records: ``vlbench run --task NAME`` runs the record registered as NAME.

A task is one :class:`ChoiceTask`: its name and description, ``load`` (the item sets, read before a model
is loaded), ``evaluate`` (scores from the embeddings), the blind baseline's text-only scorer, the scoring
rule recorded in results.json, an optional table.md of its own, and whether it reads ``--images-dir``.
The kernel (vlbench.tasks.run, .blind, .cli) dispatches on these fields only, never on a task's name.

To add a task: write one module that builds a ``ChoiceTask`` and calls :func:`register_task` with it
(vlbench.tasks.order is the smallest example). A built-in is imported by name from
:data:`BUILTIN_MODULES`; a task of your own is registered by importing your module before the run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..errors import VlbenchError
from ..registry import close_matches
from .choice import evaluate_choice, evaluate_text_only

#: the rule of a plain choice task (recorded in results.json ``task.rule``)
CHOICE_RULE = ("correct only when the right caption scores strictly above every other candidate (cosine "
               "similarity); a tie is a miss")
#: the modules of the built-in tasks, imported on the first lookup (each registers its record)
BUILTIN_MODULES = ("vlbench.tasks.order", "vlbench.tasks.sugarcrepe", "vlbench.tasks.sugarcrepe_pp")


@dataclass
class ItemSets:
    """What a task's ``load`` gives: condition -> items, image key -> file, the results' "dataset" entry
    and per-condition notes (recorded in the condition's meta)."""

    sets: dict  # condition -> list[ChoiceItem] (or the task's own item type)
    image_path: dict  # image key -> file path
    dataset: dict  # the results' "dataset" entry
    notes: dict


@dataclass(frozen=True)
class ChoiceTask:
    """One choice task. ``load(cfg, note) -> ItemSets`` (``cfg``: the TaskConfig, ``note``: a console line);
    ``evaluate(items, image_emb, text_emb, seed=)`` and ``text_only(items, text_score, seed=)`` (the blind
    baseline) give a result with ``accuracy``, ``ci_low``, ``ci_high``, ``n_items``, ``chance``, ``by_kind``
    and ``records`` (``more_values()`` adds records of other accuracies); ``table(rec) -> str`` replaces the
    choice table in table.md; ``blind_excluded_images``: COCO image ids whose captions the blind baseline's
    training text leaves out (the evaluated images)."""

    name: str
    description: str
    load: Callable
    evaluate: Callable = evaluate_choice
    text_only: Callable = evaluate_text_only
    rule: str = CHOICE_RULE
    table: Callable | None = None
    images_dir: bool = False  # reads --images-dir (the COCO val2017 folder)
    blind_excluded_images: frozenset = frozenset()


_TASKS: dict[str, ChoiceTask] = {}
_builtins_loaded = False


def _load_builtins() -> None:
    global _builtins_loaded
    if not _builtins_loaded:
        _builtins_loaded = True
        for module in BUILTIN_MODULES:
            importlib.import_module(module)


def register_task(task: ChoiceTask) -> ChoiceTask:
    """Register ``task`` under its name (a name registered twice is an error); returns it."""
    if not isinstance(task, ChoiceTask):
        raise TypeError(f"register_task takes a ChoiceTask, got {type(task).__name__}")
    if task.name in _TASKS and _TASKS[task.name] is not task:
        raise VlbenchError(f"task {task.name!r} is registered twice", "give the new task another name")
    _TASKS[task.name] = task
    return task


def unregister_task(name: str) -> None:
    """Remove a registered task (tests, notebooks)."""
    _TASKS.pop(name, None)


def tasks() -> dict[str, ChoiceTask]:
    """The registered tasks by name: the built-ins in BUILTIN_MODULES order (whatever order their modules
    were imported in), then the others in registration order."""
    _load_builtins()

    def rank(task):  # a record belongs to the module of its load hook
        module = getattr(task.load, "__module__", None)
        return BUILTIN_MODULES.index(module) if module in BUILTIN_MODULES else len(BUILTIN_MODULES)

    return {t.name: t for t in sorted(_TASKS.values(), key=rank)}


def get_task(name: str) -> ChoiceTask:
    """The task registered as ``name``; VlbenchError (with the close matches) when there is none."""
    known = tasks()
    if name in known:
        return known[name]

    m = close_matches(name, known)
    raise VlbenchError(f"unknown task {name!r}", (f"did you mean {m[0]!r}? " if m else "") +
                       f"the tasks are {', '.join(known)} (vlbench ls tasks)")


class TaskDescriptions(Mapping):
    """name -> description of every registered task, read when used (``vlbench ls tasks``, --task choices)."""

    def __getitem__(self, name: str) -> str:
        return tasks()[name].description

    def __iter__(self):
        return iter(tasks())

    def __len__(self) -> int:
        return len(tasks())
