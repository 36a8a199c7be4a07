"""NLTK's tokenizer and tagger data (``punkt_tab``, ``averaged_perceptron_tagger_eng``): found, checked,
installed online or from a copy, and recorded.

Perturbation variants that tokenize and tag with NLTK name the packages each of their perturbations reads
(``PerturbationVariant.nltk_data``; ``vlbench.perturbations.variants.nltk_needs``). Neither PyPI nor Debian
ships them, so besides ``nltk.download`` (online) there is a checked offline route:

    vlbench setup-language-data --from <folder copied from a machine with nltk_data>

which takes an ``nltk_data`` folder (or a .zip / .tar.gz of one) from a machine that has the packages,
checks every expected file and its format, copies them into vlbench's language-data store
(``<cache>/nltk_data``), loads them through NLTK once, and writes where they came from
(``vlbench-language-data.json``) so runs can record it. :func:`missing` looks for the files without
importing NLTK (which takes seconds), so preflight and ``reproduce --plan-only`` answer at once.
"""

from __future__ import annotations

import json
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from . import stores

TOKENIZER, TAGGER = "punkt_tab", "averaged_perceptron_tagger_eng"
#: package -> (folder under an nltk_data root, its files)
PACKAGES = {
    TOKENIZER: ("tokenizers/punkt_tab/english",
                ("abbrev_types.txt", "collocations.tab", "sent_starters.txt", "ortho_context.tab")),
    TAGGER: ("taggers/averaged_perceptron_tagger_eng",
             tuple(f"averaged_perceptron_tagger_eng.{p}.json" for p in ("weights", "tagdict", "classes"))),
}
#: NLTK before 3.9 reads pickles under other names
LEGACY = {TOKENIZER: ("tokenizers/punkt/PY3", ("english.pickle",)),
          TAGGER: ("taggers/averaged_perceptron_tagger", ("averaged_perceptron_tagger.pickle",))}
OFFLINE_ROUTE = "vlbench setup-language-data --from <folder copied from a machine with nltk_data>"
PROVENANCE = "vlbench-language-data.json"


def nltk_version() -> str | None:
    """The installed NLTK's version, read from its metadata (no import)."""

    try:
        return version("nltk")
    except PackageNotFoundError:
        return None


def layout() -> dict:
    v = nltk_version() or "0"
    try:
        major, minor = (int(x) for x in v.split(".")[:2])
    except ValueError:
        return PACKAGES
    return PACKAGES if (major, minor) >= (3, 9) else LEGACY


def store() -> Path:
    return stores.path("language-data")


def find(package: str) -> Path | None:
    """The nltk_data root that holds every file of ``package`` (NLTK's search folders, then the store)."""
    from .lang import nltk_search_dirs  # lazy: vlbench --help imports this module; keep it light

    folder, files = layout()[package]
    for root in nltk_search_dirs():
        if all((root / folder / f).is_file() for f in files):
            return root
    return None


def missing(packages) -> list[str]:
    """The packages among ``packages`` whose files are found nowhere NLTK looks (file checks only)."""
    return [p for p in dict.fromkeys(packages) if find(p) is None]


def hint(packages) -> str:
    """The fix for missing packages: the offline route first, then the online one."""
    calls = "; ".join(f"nltk.download('{p}')" for p in packages)
    debian = (" (WordNet also comes from Debian: apt-get install wordnet-base wordnet-sense-index, then "
              "'vlbench setup-language-data')" if "wordnet" in packages else "")
    return (f"offline: copy an nltk_data folder (or a .zip/.tar.gz of it) from a machine that has "
            f"{' and '.join(packages)} and run '{OFFLINE_ROUTE}'{debian}; online: 'vlbench setup-language-data' "
            f"(or python -c \"import nltk; {calls}\")")


def use_store() -> Path:
    """Make NLTK search vlbench's store too: NLTK_DATA for an NLTK imported later (and worker processes),
    ``nltk.data.path`` for one already imported. Imports nothing."""
    from .lang import own_nltk_dirs  # lazy: vlbench --help imports this module; keep it light

    for d in own_nltk_dirs():  # the current cache root's store, then the default root's
        own = str(d)
        paths = [p for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]
        if own not in paths:
            os.environ["NLTK_DATA"] = os.pathsep.join(paths + [own])
        data = getattr(sys.modules.get("nltk.data"), "path", None)
        if isinstance(data, list) and own not in data:
            data.append(own)
    return store()


def provenance(packages=(TOKENIZER, TAGGER)) -> dict:
    """What a run records: the NLTK version, and per package where it was found and where it came from."""
    from .lang import own_nltk_dirs  # lazy: vlbench --help imports this module; keep it light

    out: dict = {"nltk": nltk_version()}
    for p in packages:
        root = find(p)
        entry: dict = {"found": str(root) if root else None}
        recorded = read_provenance(root) if root is not None and root in own_nltk_dirs() else {}
        if p in recorded:  # installed by vlbench setup-language-data: its source and digests
            entry.update({k: recorded[p][k] for k in ("source", "installed", "sha256") if k in recorded[p]})
        out[p] = entry
    return out


def read_provenance(root: Path) -> dict:
    try:
        doc = json.loads((root / PROVENANCE).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


# ---------------------------------------------------------------- checking a copy

def _lines(path: Path) -> list[str]:
    try:
        return path.read_text("utf-8").splitlines()
    except UnicodeDecodeError:
        raise ValueError("is not UTF-8 text") from None


def _check_punkt_file(path: Path) -> None:
    rows = [r for r in _lines(path) if r.strip()]
    if path.suffix == ".tab":
        fields = 2
        for n, row in enumerate(rows, 1):
            cells = row.split("\t")
            if len(cells) != fields or (path.name == "ortho_context.tab" and not cells[1].strip().isdigit()):
                raise ValueError(f"line {n} is not " + ("'word<TAB>number'" if path.name == "ortho_context.tab"
                                                        else "'word<TAB>word'") + f": {row[:60]!r}")
    if path.name in ("ortho_context.tab", "sent_starters.txt") and not rows:
        raise ValueError("is empty")


def _check_tagger_file(path: Path) -> None:
    try:
        doc = json.loads(path.read_text("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"is not JSON ({exc})") from None
    kind = path.name.split(".")[-2]
    if kind == "classes":
        ok = bool(isinstance(doc, list) and doc and all(isinstance(t, str) for t in doc) and "NN" in doc)
        what = "a JSON list of tags including NN"
    elif kind == "tagdict":
        ok = bool(isinstance(doc, dict) and doc and all(isinstance(k, str) and isinstance(v, str)
                                                        for k, v in doc.items()))
        what = "a JSON object word -> tag"
    else:
        ok = bool(isinstance(doc, dict) and doc and all(isinstance(w, dict) and all(isinstance(x, (int, float))
                                                                                   for x in w.values())
                                                       for w in doc.values()))
        what = "a JSON object feature -> {tag: weight}"
    if not ok:
        raise ValueError(f"is not {what}")


def verify(root: Path, packages=(TOKENIZER, TAGGER)) -> list[str]:
    """Problems of the copy under the nltk_data root ``root`` (empty: every file is there and parses)."""
    problems = []
    lay = layout()
    for p in packages:
        folder, files = lay[p]
        for f in files:
            path = root / folder / f
            if not path.is_file():
                problems.append(f"{p}: {folder}/{f} is missing")
                continue
            try:
                if f.endswith(".pickle"):
                    if path.stat().st_size == 0:
                        raise ValueError("is empty")
                elif p == TAGGER:
                    _check_tagger_file(path)
                else:
                    _check_punkt_file(path)
            except ValueError as exc:
                problems.append(f"{p}: {folder}/{f} {exc}")
    return problems
