"""Which caption languages each perturbation handles, and the check that refuses the others.

Perturbations that need English resources (the spaCy English tagger, WordNet, an English phrase, the
English QWERTY map) must not run silently on captions in another language ("Rock" (skirt) -> "Stone" on
flickr30k-de). A dataset's language is its recorded ``source['language']`` (the Multi30K sets), else
English.
"""

from __future__ import annotations

from ...datasets.specs import BUILTIN
from ...errors import VlbenchError
from ...registry import perturbations as REGISTRY
from .. import BUILTINS, resolve
from ..variants import get as variant_get
from ..variants import is_named

#: built-ins that work on captions in any language (letters and whitespace only); every other built-in
#: needs English: the spaCy English tagger, WordNet, an English phrase or the English QWERTY map
LANGUAGE_FREE = frozenset({"char-swap", "missing-char", "extra-char", "shuffle-all-words",
                           "shuffle-within-trigrams", "shuffle-trigrams"})
_NEEDS = {"typos": "the English QWERTY keyboard map", "lexical": "the English tagger and WordNet",
          "distraction": "an English phrase", "word-order": "the English part-of-speech tagger"}
_LANG_NAMES = {"en": "English", "de": "German", "fr": "French", "cs": "Czech", "mul": "multilingual"}


def languages(name: str, variant: str | None = None) -> frozenset | None:
    """The caption languages (ISO 639-1 codes) perturbation ``name`` supports: None = any language. A plug-in
    declares them with a ``languages`` attribute (an iterable of codes, or None / absent for any)."""
    if name in _builtins():
        free = variant_get(variant).language_free if is_named(variant) else LANGUAGE_FREE
        return None if name in free else frozenset({"en"})
    langs = getattr(REGISTRY.get(name), "languages", None)
    return None if langs is None else frozenset(str(x).lower() for x in langs)


def dataset_language(dataset) -> str:
    """The ISO 639-1 code of a dataset's captions: a Dataset's recorded ``source['language']``, or a built-in
    name's spec (flickr30k-de: "de"); English when nothing says otherwise."""
    lang = None
    if isinstance(dataset, str):
        spec = BUILTIN.get(dataset)
        lang = getattr(spec, "language", None)
    else:
        lang = (getattr(dataset, "source", None) or {}).get("language")
    return (str(lang).lower().split("-")[0] if lang else "en") or "en"


def check_language(names, language: str | None, *, dataset: str = "the dataset", variant: str | None = None,
                   option: str = "--perturb") -> None:
    """Refuse perturbations that cannot handle captions in ``language`` (None: English), naming each, the
    language and the perturbations that would work."""
    lang = (language or "en").lower().split("-")[0]
    bad = [n for n in _resolve(names) if (ls := languages(n, variant)) is not None and lang not in ls]
    if not bad:
        return
    builtins = _builtins()
    free = sorted(variant_get(variant).language_free if is_named(variant) else LANGUAGE_FREE,
                  key=list(builtins).index)
    why = sorted({_NEEDS.get(builtins[n][1], "English resources") if n in builtins else "English" for n in bad})
    lname = _LANG_NAMES.get(lang, lang)
    works = "only work" if len(bad) > 1 else "only works"
    raise VlbenchError(f"perturbation{'s' if len(bad) > 1 else ''} {', '.join(bad)} {works} on English captions "
                       f"({'; '.join(why)}), but {dataset} has {lname} captions ({lang!r})",
                       f"choose language-free perturbations for {lname}: {option} {','.join(free)}; or use an "
                       f"English dataset")


def language_problems(cfg, ds=None) -> list[VlbenchError]:
    """For a run's preflight: the error of :func:`check_language` for ``cfg.perturb`` on ``cfg.dataset`` (its
    loaded Dataset ``ds`` when there is one), as a list (empty: nothing to refuse; a bad spec is reported by
    the preflight's own --perturb check)."""
    spec = getattr(cfg, "perturb", None)
    if not spec:
        return []
    try:
        _resolve(spec)
    except VlbenchError:
        return []
    try:
        check_language(spec, dataset_language(ds if ds is not None else cfg.dataset), dataset=repr(cfg.dataset),
                       variant=getattr(cfg, "perturb_variant", None))
    except VlbenchError as exc:
        return [exc]
    return []


def _builtins() -> dict:
    return BUILTINS


def _resolve(spec):
    return resolve(spec)
