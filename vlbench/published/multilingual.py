"""A multilingual set's run matched to published rows: XM3600 numbers are means over the release's 36 languages
with every caption of each image a query (Meta CLIP 2's ``clipeval/xm3600``, for one), which is what a run of
``xm3600`` without options computes: one language per fold, and the run's values are the mean over its languages.

The set's caption file is not pinned by vlbench (its release could not be fetched where vlbench was built; it is
pinned on first use), so a run is matched by what the set's loader recorded in the run's ``dataset.source``: the
set (``folds_are: languages`` and a spec of ``xm3600``), every language of the release, every caption, and the
released 3,600 images (a subset carries a ``note`` and never matches). A run of fewer languages or of the first
caption only is told why no row applies.
"""

from __future__ import annotations

from ..datasets.langsets import SETS
from ..results import RunRecord

__all__ = ["language_set", "language_set_mismatch"]

#: the multilingual sets with published rows
PUBLISHED_LANGUAGE_SETS = ("xm3600",)


def _source(rec: RunRecord) -> dict:
    src = rec.dataset.fields.get("source")
    return src if isinstance(src, dict) and src.get("folds_are") == "languages" else {}


def _set_name(src: dict) -> str | None:
    name = str(src.get("spec") or "").split("?", 1)[0]
    return name if name in PUBLISHED_LANGUAGE_SETS else None


def language_set_mismatch(rec: RunRecord) -> str | None:
    """Why a run of a published multilingual set is not the published selection ("" when it is; None when the
    run is not of such a set)."""
    src = _source(rec)
    name = _set_name(src)
    if name is None:
        return None
    s = SETS[name]
    langs = list(src.get("languages") or [])
    missing = [code for code in s.languages if code not in langs]
    if missing:
        return (f"the published {name} numbers are means over all {len(s.languages)} languages; this run selected "
                f"{len(langs)} ({', '.join(langs[:8])}{', ...' if len(langs) > 8 else ''}): run --dataset {name} "
                "without languages=")
    if src.get("captions", "all") != "all":
        return f"the published {name} numbers query every caption; this run took the first caption only"
    if src.get("note") or src.get("distinct_images") != s.n_images:
        return (f"this run read {src.get('distinct_images')} images, not the released {s.n_images:,} "
                f"({src.get('note') or 'a subset or a changed file'})")
    return ""


def language_set(rec: RunRecord) -> str | None:
    """The published multilingual set a run is (its name), or None."""
    return _set_name(_source(rec)) if language_set_mismatch(rec) == "" else None
