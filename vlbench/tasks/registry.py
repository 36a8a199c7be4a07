"""Choice tasks as registered records: ``vlbench run --task NAME`` runs the record registered as NAME.

A task is one :class:`ChoiceTask`: its name and description, ``load`` (the item sets, read before a model
is loaded), ``evaluate`` (scores from the embeddings), the blind baseline's text-only scorer, the scoring
rule recorded in results.json, an optional table.md of its own, and whether it reads ``--images-dir``.
The kernel (vlbench.tasks.run, .blind, .cli) dispatches on these fields only, never on a task's name.

To add a task: write one module in vlbench/tasks/sets/ that builds a ``ChoiceTask`` and calls
:func:`register_task` with it (vlbench.tasks.sets.order is the smallest example); it is found there
(:data:`BUILTIN_MODULES`) and nothing else changes. A task of your own, outside vlbench, is registered by
importing your module before the run.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .. import registry, stores
from ..errors import VlbenchError
from ..metrics.specs import Metric
from ..registry import Records, close_matches
from . import sets
from .choice import evaluate_choice, evaluate_text_only
from .perturbable import perturb_item, right_candidates

#: the rule of a plain choice task (recorded in results.json ``task.rule``)
CHOICE_RULE = ("correct only when the right caption scores strictly above every other candidate (cosine "
               "similarity); a tie is a miss")
#: the built-in sets listed first, in this order (``vlbench ls tasks``); every other module of vlbench/tasks/sets/
#: is found there and listed after them, by name: a new set needs no line here
LISTED_FIRST = ("order", "sugarcrepe", "sugarcrepe_pp", "winoground", "whatsup", "colorswap", "bivlc", "aro_vg", "mmvp")


def set_modules() -> tuple[str, ...]:
    """The modules of vlbench/tasks/sets/ (each registers its set's record when imported), :data:`LISTED_FIRST`
    first."""
    found = sorted(m.name for m in pkgutil.iter_modules(sets.__path__) if not m.name.startswith("_"))
    names = [n for n in LISTED_FIRST if n in found] + [n for n in found if n not in LISTED_FIRST]
    return tuple(f"{sets.__name__}.{n}" for n in names)


#: the modules of the built-in tasks, imported on the first lookup (each registers its record)
BUILTIN_MODULES = set_modules()


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
    training text leaves out (the evaluated images); ``size``, ``licence``, ``citation``: what ``vlbench ls tasks``
    says about a published set. ``right_candidates(item) -> (index, ...)`` and ``perturb(item, {index: text})
    -> item`` let ``--perturb`` change an item's captions (vlbench.tasks.perturbable: defaults that fit a frozen
    dataclass with ``candidates`` and ``correct``, or with several ``images``); ``prompt``: a template prefix the
    task puts before every caption (MMVP's "a photo of "), which a caption perturbation leaves as it is."""

    name: str
    description: str
    load: Callable
    evaluate: Callable = evaluate_choice
    text_only: Callable = evaluate_text_only
    rule: str = CHOICE_RULE
    table: Callable | None = None
    images_dir: bool = False  # reads --images-dir (the COCO val2017 folder)
    blind_excluded_images: frozenset = frozenset()
    # what `vlbench ls tasks` says about a published set (empty: not said)
    size: str = ""
    licence: str = ""
    citation: str = ""
    # --perturb on this task's items: which candidates are right ones, and an item with some captions replaced
    right_candidates: Callable = right_candidates
    perturb: Callable = perturb_item
    prompt: str = ""  # the prefix of every candidate that is the task's template, not the caption
    # the rest of the set's declaration: what the metric list, the cache, the published check and the leaderboard
    # read from the set's own module (docs/tasks.md "Adding a set")
    metrics: tuple = ()  # (name, description) of each metric the set reports besides accuracy / chance / blind_*
    scores: tuple = (("accuracy", "accuracy"),)  # (metric, label) of every score the set's paper reports, its order
    blind_ceiling: str = ""  # what a text-only scorer can reach on the set by design, when the design fixes it
    published: tuple = ()  # published scores: entries as vlbench.published.task_scores reads them (no "task" key)
    stores: tuple = ()  # the cache stores the set keeps files in (vlbench.stores.Store records)
    # why a pair scorer (--model blip-itm) cannot score this set, said when one is asked to; empty: it can (its
    # ``evaluate`` takes a vlbench.tasks.choice.PairScores in place of the embeddings)
    pair_refused: str = ""


#: a record belongs to the module of its load hook (the built-ins are listed in BUILTIN_MODULES order)
TASKS = Records("task", ChoiceTask, BUILTIN_MODULES, module_of=lambda task: getattr(task.load, "__module__", None))
unregister_task = TASKS.unregister
tasks = TASKS.all


def register_task(task: ChoiceTask) -> ChoiceTask:
    """Register ``task`` and what it declares: its metric names in the metric registry (``vlbench ls metrics``) and
    its cache stores (``vlbench cache ls``); a name another record already declares is refused."""
    if not isinstance(task, ChoiceTask):  # as Records.register says it, before anything is declared
        return TASKS.register(task)
    for name, description in task.metrics:
        have = registry.metrics.get(name) if name in registry.metrics else None
        if have is None:
            registry.metrics.register(name, task_metric(name, description), description=description)
        elif getattr(have, "kind", None) != "task":
            raise VlbenchError(f"task {task.name!r} declares the metric {name!r}, a metric that is not a task's",
                               "give the set's metric another name")
    for store in task.stores:
        stores.declare(store)
    return TASKS.register(task)


def task_metric(name: str, description: str) -> Metric:
    """The metric record of a choice set's score: percent, higher is better, recorded per set (no table column)."""
    return Metric(name, "%", "[0, 100]", True, description, directions=("i2t",), column=False, kind="task")


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
