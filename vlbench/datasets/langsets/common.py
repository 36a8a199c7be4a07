"""What the multilingual retrieval sets share: the record of a set, its ``?key=value`` options, and the dataset
that holds every selected language as one fold.

One run scores every selected language: the dataset lists the test images once per language (language l's
block is fold l) with that language's captions, so each fold is one language's retrieval problem (its images
against its own captions, both directions) and the run's fold mean is the mean over the selected languages.
The encoder keys images by their file content, so a block repeated per language is decoded and encoded once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...errors import DataError
from ...util.query import QueryProblem, query_pairs
from ..captions import caption_refusal, refused_caption
from ..core import Dataset, caption_problem

#: ``source['language']`` of a set with more than one selected language (ISO 639-2 "multiple languages"): the
#: caption perturbations that need English refuse it
MULTIPLE = "mul"
CAPTION_MODES = ("all", "first")


@dataclass(frozen=True)
class LanguageSet:
    name: str
    description: str
    folder: str  # the caption files' folder under the data folder
    images: str  # the image folder under <data dir>/images
    languages: dict  # code -> English name, in the release's order
    n_images: int
    licence: str
    citation: str
    image_hint: str  # where the images are published
    options: tuple = ("languages",)  # the ?key=value options the set takes
    notes: dict = field(default_factory=dict)  # protocol facts recorded in the provenance


def parse_options(s: LanguageSet, query: str | None) -> dict:
    """``languages=de,fr,ja&captions=first`` -> ``{"languages": [...] or None, "captions": "all"|"first"}``;
    an unknown key, an empty or repeated language, or a bad value is an error naming the option."""
    try:
        pairs = query_pairs(query or "")
    except QueryProblem as exc:
        raise DataError(f"dataset {s.name!r}: {exc}", f"write {s.name}?{_example(s)}") from None
    out: dict = {"languages": None, "captions": "all"}
    for key, value in pairs:
        if key not in s.options:
            raise DataError(f"dataset {s.name!r} has no option {key!r}",
                            f"its options are {', '.join(s.options)} (e.g. {s.name}?{_example(s)})")
        if key == "captions":
            if value not in CAPTION_MODES:
                raise DataError(f"dataset {s.name!r}: option captions={value!r} is not one of "
                                f"{', '.join(CAPTION_MODES)}", "captions=all (every caption of an image is a query; "
                                "the default) or captions=first (the first caption of each image only)")
            out["captions"] = value
            continue
        codes = [c.strip().lower() for c in value.split(",")]
        if not all(codes):
            raise DataError(f"dataset {s.name!r}: option languages={value!r} has an empty language code",
                            f"list codes separated by commas, e.g. {s.name}?{_example(s)}")
        twice = sorted({c for c in codes if codes.count(c) > 1})
        if twice:
            raise DataError(f"dataset {s.name!r}: option languages names {', '.join(twice)} twice",
                            "name each language once")
        out["languages"] = codes
    return out


def _example(s: LanguageSet) -> str:
    return "languages=" + ",".join(list(s.languages)[:3])


def canonical_spec(s: LanguageSet, languages: list[str], captions: str) -> str:
    """The spec that loads exactly this selection again (recorded; a run's dataset is read back from it)."""
    spec = f"{s.name}?languages={','.join(languages)}"
    return spec + ("&captions=first" if "captions" in s.options and captions == "first" else "")


def dataset_name(s: LanguageSet, languages: list[str], captions: str) -> str:
    """The set's name for the release's every language in its order (and every caption); otherwise the name with the
    selection (``xm3600-de-fr-ja``, ``xm3600-de-first``): runs of different selections measure different things, so
    results and leaderboards keep them apart by name."""
    full = list(languages) == list(s.languages) and captions == "all"
    return s.name if full else "-".join([s.name, *languages] + (["first"] if captions == "first" else []))


def missing_language(s: LanguageSet, where: str, lang: str, present) -> DataError:
    """A selected language that a caption file does not hold: the file, the language and the ones it has."""
    have = sorted(present)
    return DataError(f"{s.name}: {where} has no captions in language {lang!r}; it has "
                     f"{len(have)}: {', '.join(have) if have else 'none'}",
                     f"select languages the file holds (e.g. --dataset {s.name}?languages="
                     f"{','.join(have[:3]) or 'en'}), or get the complete release ({s.description})")


def build(s: LanguageSet, images: list[str], captions: dict, selected: list[str], image_root: Path,
          source: dict) -> Dataset:
    """The dataset of ``selected`` languages: ``captions[lang][i]`` are image i's captions in ``lang``; every
    language is one fold of the repeated image list (module docstring). Caption ids: ``<lang>/<image>#<j>``."""
    n = len(images)
    caps: list[str] = []
    c2i: list[int] = []
    ids: list[str] = []
    issues: list[dict] = []
    for f, lang in enumerate(selected):
        for i, image in enumerate(images):
            for j, cap in enumerate(captions[lang][i]):
                where = f"image {i} ({lang})"
                refused = caption_refusal(cap)
                if refused:
                    raise refused_caption(s.name, where, image, j, cap, refused)
                cid = f"{lang}/{image}#{j}"
                problem = caption_problem(cap)
                if problem:
                    issues.append({"caption_id": cid, "where": where, "problem": problem, "text": cap})
                caps.append(cap)
                c2i.append(f * n + i)
                ids.append(cid)
    source = dict(source)
    source.update({"spec": canonical_spec(s, selected, source.get("captions", "all")), "languages": list(selected),
                   "language": selected[0] if len(selected) == 1 else MULTIPLE, "folds_are": "languages",
                   "distinct_images": n, "licence": s.licence, "citation": s.citation,
                   "image_hint": f"get {s.image_hint} into {image_root}"})
    if n != s.n_images:  # said on the console and kept in the provenance, as a choice set's subset note
        source["note"] = (f"{s.name}: {n:,} images, not the released {s.n_images:,} (a subset or a changed file); "
                          "its numbers are not comparable with the paper's")
    return Dataset(name=dataset_name(s, selected, source.get("captions", "all")),
                   images=[im for _ in selected for im in images], captions=caps,
                   caption_to_image=np.asarray(c2i, dtype=np.int64), caption_ids=ids, image_root=image_root,
                   folds=[np.arange(f * n, (f + 1) * n) for f in range(len(selected))], source=source,
                   issues=issues)


def per_language(ds: Dataset, evaluations: dict) -> dict:
    """results.json ``languages``: every condition's metric records per selected language (a language set's folds,
    :func:`build`), the mean over them being the run's values; {} for other datasets."""
    langs = (ds.source or {}).get("languages")
    if ds.folds is None or (ds.source or {}).get("folds_are") != "languages" or not langs:
        return {}
    rows = [{"condition": cond, "language": lang, "direction": r["direction"], "metric": r["metric"], "k": r["k"],
             "value": None if r["value"] is None else float(r["value"])}
            for cond, evs in evaluations.items() for lang, ev in zip(langs, evs) for r in ev.records()]
    return {"languages": {"selected": list(langs), "mean": "the run's values are the mean over these languages",
                          "values": rows}}
