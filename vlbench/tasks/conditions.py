"""A choice task under vlbench's conditions: ``vlbench run --task NAME --perturb SPEC --perturb-images SPEC``.

Every item set is scored clean and under each condition; a condition's name is ``<set>@<condition>``
(``task:winoground@char-swap``, ``task:sugarcrepe:swap_obj@img:gaussian_noise:3``;
``task:winoground@correct:char-swap`` under ``--perturb-options correct``).

* **caption perturbations** (``--perturb``, vlbench/perturbations): applied to every candidate of an item or
  only to its right ones (``--perturb-options all|correct``, recorded; the task's ``right_candidates`` hook says
  which are right). A candidate text is perturbed by its content (caption id: the text's hash), so a text is
  changed the same way wherever it appears and each distinct perturbed text is encoded once. A candidate the
  perturbation does not apply to stays as it is, counted as the retrieval runs count captions
  (``n_applicable``, ``not_applicable_rate``, over the distinct texts it was asked to change);
* **image corruptions** (``--perturb-images``, vlbench/imageperturb): every image of every item corrupted, the
  captions clean; each corrupted image encoded once and cached (vlbench/encoding/variant_images.py).

Flips: per item, the clean set's correctness against the condition's (``hit_to_miss``, ``miss_to_hit``), and
the change of accuracy with a paired percentile bootstrap over items (one generator seeded by the run's seed per
condition, the draws of the retrieval runs' intervals: vlbench.metrics.stats.resample_means).
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..conditions import RunCondition
from ..errors import VlbenchError
from ..imageperturb.conditions import image_variants
from ..metrics.stats import resample_means
from ..perturbations import resolve
from ..runfolder import FLIPS
from .perturbable import DEFAULT_PERTURB_OPTIONS, PERTURB_OPTIONS, perturbed_indices

SEP = "@"
#: what the blind (text-only) baseline is under each kind of condition (recorded in the condition's meta)
BLIND = {"caption": "recomputed on the perturbed candidates (it reads the text)",
         "image": "the clean set's, by construction: it reads no image"}
FLIP_COLUMNS = ("condition", "direction", "k", "n_queries", "hit_to_miss", "miss_to_hit", "set", "perturbation",
                "family", "accuracy_clean", "accuracy", "delta", "ci_low", "ci_high")


@dataclass
class TaskConditions:
    """What a task run's condition options ask for: caption perturbation names, image conditions."""

    captions: list[str] = field(default_factory=list)
    images: list[RunCondition] = field(default_factory=list)
    which: str = DEFAULT_PERTURB_OPTIONS
    params: dict = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.captions or self.images)


def plan_conditions(cfg) -> TaskConditions:
    """The conditions of a task run's ``perturb``, ``perturb_images`` and ``perturb_options``; a bad spec is a
    VlbenchError naming the option, before any data or model is read."""
    which = cfg.perturb_options or DEFAULT_PERTURB_OPTIONS
    if which not in PERTURB_OPTIONS:
        raise VlbenchError(f"--perturb-options {which!r} is not one of {', '.join(PERTURB_OPTIONS)}",
                           "all: every candidate of an item perturbed (the default); correct: only the right ones")
    if cfg.perturb_options and not cfg.perturb:
        raise VlbenchError("--perturb-options needs --perturb (it says which candidates a caption perturbation "
                           "changes)", "add e.g. --perturb typos, or leave --perturb-options out")
    names = resolve(cfg.perturb) if cfg.perturb else []
    unknown = sorted(set(cfg.perturb_params or {}) - set(names))
    if unknown:
        raise VlbenchError(f"--param names {unknown[0]!r}, which --perturb does not run",
                           "add it to --perturb or drop the --param")
    images = image_variants(cfg.perturb_images, cfg.seed, cfg.corrupt_at, cfg.corrupt_backend)
    return TaskConditions(names, images, which, dict(cfg.perturb_params or {}))


def text_id(text: str) -> str:
    """The caption id a candidate text is perturbed under: its content's hash."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def perturb_sets(task, sets: dict, plan: TaskConditions, seed: int) -> tuple[dict, dict]:
    """({condition: items}, {condition: meta}) of every (item set x caption perturbation)."""
    from ..perturbations import perturb_captions  # lazy: spaCy / NLTK load on the first perturbation that needs them

    if not plan.captions:
        return {}, {}
    chosen = {cond: [perturbed_indices(it, plan.which, task.right_candidates) for it in items]
              for cond, items in sets.items()}
    texts = list(dict.fromkeys(it.candidates[k] for cond, items in sets.items()
                               for it, ks in zip(items, chosen[cond]) for k in ks))
    # the task's template prefix is not caption text: the perturbation sees the caption after it
    pre = task.prompt
    bare = [t[len(pre):] if pre and t.startswith(pre) else t for t in texts]
    out = perturb_captions(bare, [text_id(t) for t in bare], plan.captions, seed=seed, params=plan.params)
    conds, meta = {}, {}
    for name, ps in out.items():
        new_of = {t: (t[:len(t) - len(b)] + p) for t, b, p, ok in zip(texts, bare, ps.texts, ps.applicable) if ok}
        for cond, items in sets.items():
            changed = [{k: new_of[it.candidates[k]] for k in ks if it.candidates[k] in new_of}
                       for it, ks in zip(items, chosen[cond])]
            cname = caption_condition(cond, name, plan.which)
            conds[cname] = [task.perturb(it, ch) for it, ch in zip(items, changed)]
            meta[cname] = {
                **ps.describe(), "perturbation": name, "condition_kind": "caption", "set": cond,
                "perturb_options": plan.which, "perturbed_candidates": _options_said(plan.which),
                "items_changed": sum(1 for ch in changed if ch),
                "candidates_changed": sum(len(ch) for ch in changed), "blind_baseline": BLIND["caption"]}
    return conds, meta


def caption_condition(cset: str, perturbation: str, which: str) -> str:
    """The name of a caption perturbation's condition: ``<set>@<name>`` (every candidate perturbed), or
    ``<set>@correct:<name>`` (only the right ones: another condition, so the two never replace each other)."""
    return f"{cset}{SEP}{'' if which == 'all' else which + ':'}{perturbation}"


def _options_said(which: str) -> str:
    if which == "all":
        return "every candidate of each item"
    return ("the right candidate(s) of each item (the task's right_candidates; an item with several images and no "
            "single right caption, e.g. Winoground: every caption, each being the right one of one image)")


def image_sets(sets: dict, plan: TaskConditions) -> tuple[dict, dict]:
    """({condition: items}, {condition: meta}) of every (item set x image corruption): the same items."""
    conds, meta = {}, {}
    for v in plan.images:
        for cond, items in sets.items():
            conds[f"{cond}{SEP}{v.name}"] = items
            meta[f"{cond}{SEP}{v.name}"] = {**v.meta, "kind": "choice", "condition_kind": "image", "set": cond,
                                            "image_condition": v.name, "blind_baseline": BLIND["image"]}
    return conds, meta


def ordered(sets: dict, extra: dict) -> dict:
    """Every condition, each clean set followed by its conditions (in the order they were made)."""
    out = {}
    for cond, items in sets.items():
        out[cond] = items
        out.update((c, its) for c, its in extra.items() if c.partition(SEP)[0] == cond)
    return out


def encode_corrupted(adapter, plan: TaskConditions, clean: dict, image_path: dict, *, batch_size: int, num_workers,
                     cache, stats, progress: bool) -> tuple[dict, dict]:
    """({image condition: {image key: vector}}, {image condition: what binding to the model adds to its meta});
    ``clean``: {image key: clean vector} (an image a corruption leaves alone reuses it)."""
    from ..encoding.variant_images import bind_transforms, encode_variant_images  # lazy: torch, PIL

    if not plan.images:
        return {}, {}
    keys = list(clean)
    paths = [image_path[k] for k in keys]
    bound = bind_transforms(adapter, plan.images)
    mats = encode_variant_images(adapter, paths, plan.images, batch_size=batch_size, num_workers=num_workers,
                                 cache=cache, stats=stats, progress=progress,
                                 clean=np.stack([clean[k] for k in keys]))
    return {name: dict(zip(keys, m)) for name, m in mats.items()}, bound


# ----------------------------------------------------------------------------------------------
# flips

def flips(clean, pert, seed: int, n_boot: int) -> dict:
    """The flips of one condition against its clean set (both results over the same items, same order): counts,
    the accuracy change in percent and its paired percentile bootstrap interval over items."""
    a = np.array([r.correct for r in clean.records], dtype=np.float64)
    b = np.array([r.correct for r in pert.records], dtype=np.float64)
    if [r.item_id for r in clean.records] != [r.item_id for r in pert.records]:
        raise VlbenchError("a condition's items differ from its clean set's", "this is a bug in vlbench; report it")
    d = (b - a) * 100.0
    dist = resample_means(d, n_boot, np.random.default_rng(seed))
    out = {"n": len(d), "hit_to_miss": int(((a == 1) & (b == 0)).sum()),
           "miss_to_hit": int(((a == 0) & (b == 1)).sum()), "delta": float(d.mean()),
           "ci_low": float(np.quantile(dist, 0.025)), "ci_high": float(np.quantile(dist, 0.975)),
           "n_boot": n_boot, "alpha": 0.05, "seed": seed, "method": "paired percentile bootstrap over items"}
    if not (_item_mean(clean, a) and _item_mean(pert, b)):
        # a set whose accuracy is no item mean (ARO's macro mean over relations): the change is the reported
        # accuracies' difference; the interval stays the items' (micro) change's, and says so
        out.update(delta=float(pert.accuracy - clean.accuracy), item_delta=float(d.mean()),
                   interval_of="the item mean's (micro accuracy's) change: the set's accuracy is a mean over groups, "
                               "whose paired interval is not computed")
    return out


def _item_mean(res, correct: np.ndarray) -> bool:
    """Whether the result's accuracy is the percentage of its items answered right."""
    acc = getattr(res, "accuracy", None)
    return acc is None or not len(correct) or abs(float(acc) - 100.0 * float(correct.mean())) < 1e-6


def all_flips(evals: dict, metas: dict, seed: int, n_boot: int) -> dict:
    """{condition: flips} of every condition that has a clean set (``metas[cond]['set']``)."""
    return {c: flips(evals[m["set"]], evals[c], seed, n_boot) for c, m in metas.items() if c in evals}


def write_flips(out: Path, evals: dict, metas: dict, found: dict) -> str | None:
    """flips.csv of a task run: one row per condition (direction i2t, k 1: the right caption first, strictly),
    in the retrieval runs' columns and the task's own (set, accuracies, the change and its interval)."""
    if not found:
        return None
    tmp = out / f".{FLIPS}.tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(FLIP_COLUMNS)
        for cond, f in found.items():
            m = metas[cond]
            w.writerow([cond, "i2t", 1, f["n"], f["hit_to_miss"], f["miss_to_hit"], m["set"], m.get("perturbation"),
                        m.get("family") or "", _g(evals[m["set"]].accuracy), _g(evals[cond].accuracy), _g(f["delta"]),
                        _g(f["ci_low"]), _g(f["ci_high"])])
    tmp.replace(out / FLIPS)
    return FLIPS


def _g(x: float) -> str:
    return f"{x:.6f}"
