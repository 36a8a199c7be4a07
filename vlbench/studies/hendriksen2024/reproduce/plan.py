"""What every run of a reproduction needs, checked at once before the first run starts (and by ``--plan-only``).

For the runs still to do: each model's weights, the relevance model as given (``--relevance``, else the
protocol's fixed one), each dataset's captions and images (and where they go), the chapter protocol's whole
image folder as t2i gallery (Flickr30k 31,783 and MS-COCO val2014 40,504 images: a smaller folder is refused
unless ``--allow-partial-gallery``), the language data of the perturbations (spaCy, WordNet, NLTK's
punkt_tab and tagger, the ``typo`` package), disk and a rough time. Every missing item of every run goes into
one message; nothing is loaded (file checks, the hub cache, at most one network probe).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from vlbench import perturbations, stores
from vlbench.datasets.builtin import BUILTIN
from vlbench.datasets.core import IMAGE_EXTS
from vlbench.datasets.specs import IMAGE_SOURCES
from vlbench.errors import VlbenchError
from vlbench.pipeline.preflight import (
    PreflightError,
    Problem,
    check_dataset,
    check_disk,
    check_language,
    check_model,
    check_relevance,
    check_variant_data,
)
from vlbench.util.paths import default_data_dir

from ..protocol import RELEVANCE_MODEL

#: images and captions per dataset key (the chapter's folder galleries; 5 captions per test image)
GALLERY = {"coco": 40504, "coco-fg": 40504, "flickr30k": 31783, "flickr30k-fg": 31783}
CAPTIONS = {"coco": 25000, "coco-fg": 25000, "flickr30k": 5000, "flickr30k-fg": 5000}


def check_perturb(perturb: str | None) -> list[str]:
    """The perturbation names of ``perturb`` (an unknown name is refused here, before anything else)."""

    if not perturb:
        return []
    try:
        return list(perturbations.resolve(perturb))
    except VlbenchError as exc:
        raise VlbenchError(f"reproduce --perturb {perturb!r}: {exc.message}",
                           exc.hint or "run 'vlbench ls perturbations' (default: all 13)") from None


def _runs(jobs) -> str:
    names = [f"{j.protocol}-{j.model}-{j.dataset}" for j in jobs]
    return f"{len(names)} run(s): " + (", ".join(names) if len(names) <= 4 else ", ".join(names[:3]) + ", ...")


def _gallery(key: str, spec: str, data_dir, allow_partial: bool):
    """A Problem when the chapter protocol's folder gallery of built-in ``spec`` is smaller than the protocol's."""

    b = BUILTIN.get(spec)
    source = IMAGE_SOURCES.get(b.images) if b is not None else None
    expected = source.folder_size if source is not None else None
    if b is None or source is None or expected is None or allow_partial:  # no b or source: no expected either
        return None
    folder = (Path(data_dir).expanduser() if data_dir else default_data_dir()) / "images" / b.images
    have = 0
    if folder.is_dir():
        with os.scandir(folder) as it:
            have = sum(1 for e in it if e.name.lower().endswith(IMAGE_EXTS) and e.is_file())
    if have >= expected:
        return None
    what = source.folder
    return Problem(f"t2i gallery of {key} (hendriksen2024)",
                   f"the chapter protocol ranks every image of {folder} ({have:,} there now) and needs the whole "
                   f"{what} folder: {expected:,} images (the test images included)",
                   f"put all {expected:,} images of {what} into {folder}, or pass --allow-partial-gallery (the "
                   f"protocol label then names the size, e.g. hendriksen2024[gallery={have or 5000}])")


def _dataset_problems(todo, data_dir, allow_partial: bool) -> list:
    problems = []
    by_spec: dict[str, list] = {}
    for j in todo:
        by_spec.setdefault(j.dataset_spec, []).append(j)
    for spec, js in by_spec.items():
        _, found, _ = check_dataset(spec, data_dir=data_dir)
        problems += [_for(p, js) for p in found]
        if any(j.protocol == "hendriksen2024" for j in js):
            g = _gallery(js[0].dataset, spec, data_dir, allow_partial)
            if g is not None:
                problems.append(_for(g, [j for j in js if j.protocol == "hendriksen2024"]))
    return problems


def _for(problem, jobs):
    return dataclasses.replace(problem, what=f"{problem.what} [{_runs(jobs)}]")


def problems(jobs, out: Path | None, *, data_dir=None, cache_dir=None, relevance: str | None = None,
             perturb: str | None = "all", allow_partial_gallery: bool = False, done=None) -> list:
    """Every missing item of every run still to do (a list of preflight.Problem)."""

    todo = [j for j in jobs if not (done or (lambda j: False))(j)]
    if not todo:
        return []
    check_perturb(perturb)
    found = []
    by_model: dict[str, list] = {}
    for j in todo:
        by_model.setdefault(j.model_spec, []).append(j)
    for spec, js in by_model.items():
        found += [_for(p, js) for p in check_model(spec)]
    chapter = [j for j in todo if j.protocol == "hendriksen2024"]
    rel = relevance or RELEVANCE_MODEL
    if chapter and rel != "self":
        found += [_for(p, chapter) for p in check_relevance(rel, "hendriksen2024" if not relevance else "standard")]
    found += _dataset_problems(todo, data_dir, allow_partial_gallery)
    found += check_language(perturb)
    if chapter:
        found += [_for(p, chapter) for p in check_variant_data(perturb, None, "hendriksen2024")]
    paths = ([out] if out else []) + [stores.root(cache_dir)]
    found += check_disk(paths, disk_bytes(todo, perturb))
    return found


def disk_bytes(todo, perturb) -> int:
    n_conditions = 1 + len(check_perturb(perturb))
    vectors = sum(GALLERY.get(j.dataset, 0) + CAPTIONS.get(j.dataset, 0) * n_conditions for j in todo)
    return vectors * 1024 * 4 + 64 * 2**20


def raise_if_missing(found: list, n_runs: int) -> None:
    """One message with every missing item (PreflightError, exit 2), or nothing."""
    if not found:
        return

    lines = [f"  - {p.item}: {p.what}\n      fix: {p.fix}" for p in found]
    raise PreflightError(f"reproduce: {len(found)} thing(s) the {n_runs} run(s) to do need are missing\n"
                         + "\n".join(lines), "fix each item above, then run the same command again "
                                             "(--plan-only checks again without running)")
