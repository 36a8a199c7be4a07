"""Caption perturbations: thirteen built-ins in four families, plus plug-ins.

Importing this package is cheap (no spaCy, NLTK, nlpaug or torch): the built-ins are registered in
:data:`vlbench.registry.perturbations` with lazy targets, and the heavy work happens in
:func:`perturb_captions`.

* :func:`resolve` turns a spec ("all", a family name, or comma-separated names/families) into names;
* :func:`perturb_captions` applies them, deterministically per (seed, perturbation name, caption id);
* :data:`FAMILIES` maps each family to its built-in perturbations.

See docs/perturbations.md for every definition, parameter and version.
"""

from __future__ import annotations

from ..errors import UnknownNameError, VlbenchError
from ..registry import close_matches
from ..registry import perturbations as REGISTRY
from .base import CaptionRNG, PerturbedSet, Token

__all__ = ["FAMILIES", "BUILTINS", "resolve", "perturb_captions", "PerturbedSet",
           "CaptionRNG", "Token", "languages", "dataset_language", "check_language", "LANGUAGE_FREE"]

# name -> (target, family, version, one-line description); order = canonical order of "all"
BUILTINS: dict[str, tuple[str, str, str, str]] = {
    "char-swap": ("vlbench.perturbations.typos:CharSwap", "typos", "1.0",
                  "swap two adjacent letters of one word"),
    "missing-char": ("vlbench.perturbations.typos:MissingChar", "typos", "1.0",
                     "delete one letter of one word"),
    "extra-char": ("vlbench.perturbations.typos:ExtraChar", "typos", "1.0",
                   "insert one random letter into one word"),
    "nearby-char": ("vlbench.perturbations.typos:NearbyChar", "typos", "1.0",
                    "replace one letter by a QWERTY keyboard neighbour"),
    "synonym-noun": ("vlbench.perturbations.lexical:SynonymNoun", "lexical", "2.2",
                     "replace the first noun by its most common same-sense WordNet synonym"),
    "synonym-adjective": ("vlbench.perturbations.lexical:SynonymAdjective", "lexical", "2.2",
                          "replace the first adjective by its most common same-sense WordNet synonym"),
    "distraction-true": ("vlbench.perturbations.distraction:DistractionTrue", "distraction", "1.0",
                         "add 'and true is true' before the final punctuation"),
    "distraction-false": ("vlbench.perturbations.distraction:DistractionFalse", "distraction", "1.0",
                          "add 'and false is false' before the final punctuation"),
    "shuffle-nouns-adjectives": ("vlbench.perturbations.word_order:ShuffleNounsAdjectives", "word-order", "1.0",
                                 "shuffle nouns among noun slots and adjectives among adjective slots"),
    "shuffle-all-words": ("vlbench.perturbations.word_order:ShuffleAllWords", "word-order", "1.0",
                          "shuffle all words (punctuation stays in place)"),
    "shuffle-all-but-nouns-adjectives": ("vlbench.perturbations.word_order:ShuffleAllButNounsAdjectives",
                                         "word-order", "1.0",
                                         "shuffle every word except nouns and adjectives"),
    "shuffle-within-trigrams": ("vlbench.perturbations.word_order:ShuffleWithinTrigrams", "word-order", "1.0",
                                "shuffle the words inside each consecutive trigram"),
    "shuffle-trigrams": ("vlbench.perturbations.word_order:ShuffleTrigrams", "word-order", "1.0",
                         "shuffle the order of the consecutive trigrams"),
}

FAMILIES: dict[str, list[str]] = {}
for _name, (_target, _family, _version, _desc) in BUILTINS.items():
    FAMILIES.setdefault(_family, []).append(_name)
    if _name not in REGISTRY._entries:  # re-import safe (importlib.reload in tests)
        REGISTRY.register(_name, _target, description=_desc, family=_family, version=_version)
del _name, _target, _family, _version, _desc


def resolve(spec: "str | list[str] | tuple[str, ...]") -> list[str]:
    """Perturbation names for ``spec``: "all" (the 13 built-ins), a family name, a perturbation name
    (built-in or plug-in), a comma-separated mix of these, or a Python list / tuple of such items; order
    kept, duplicates dropped.

    "all" and family names expand to the built-ins only, so that a spec means the same thing whatever
    plug-ins are installed; select plug-ins by name.
    """
    if isinstance(spec, (list, tuple)):
        bad = [s for s in spec if not isinstance(s, str)]
        if bad or not spec:
            raise VlbenchError(f"perturbation list {list(spec)!r} " + ("is empty" if not spec else
                               f"holds {bad[0]!r}, which is not a name"),
                               "pass names or families as strings, e.g. ['typos', 'shuffle-all-words']")
        spec = ",".join(spec)
    if not isinstance(spec, str) or not spec.strip():
        raise VlbenchError("empty perturbation spec", "use 'all', a family (" + ", ".join(FAMILIES) +
                           ") or comma-separated perturbation names")
    out: list[str] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if item == "all":
            out.extend(BUILTINS)
        elif item in FAMILIES:
            out.extend(FAMILIES[item])
        elif item in REGISTRY:
            out.append(item)
        else:
            choices = ["all", *FAMILIES, *REGISTRY.names()]
            matches = close_matches(item, choices)
            hint = (f"did you mean {', '.join(repr(m) for m in matches)}?" if matches else
                    "use 'all', a family (" + ", ".join(FAMILIES) + ") or one of: " + ", ".join(REGISTRY.names()))
            raise UnknownNameError(f"unknown perturbation {item!r}", hint)
    if not out:
        raise VlbenchError(f"perturbation spec {spec!r} names nothing", "use e.g. 'all' or 'typos,shuffle-all-words'")
    return list(dict.fromkeys(out))


def perturb_captions(captions: list[str], caption_ids: list[str], names: "list[str] | str", *, seed: int = 0,
                     params: dict[str, dict] | None = None, progress: bool = False,
                     batch_size: int = 512) -> dict[str, PerturbedSet]:
    """Apply each named perturbation to every caption.

    ``names``: what ``vlbench perturb --perturb`` takes, as a list or a comma-separated string: perturbation
    names, family names ("typos") or "all".

    Deterministic given (seed, perturbation name, caption id): the result for a caption does not depend
    on the other captions, their order or the batch size. ``params`` maps a perturbation name to its
    parameters (defaults otherwise). Captions that need part-of-speech tags are tagged by spaCy once,
    whatever the number of perturbations. Returns name -> :class:`PerturbedSet` (texts in input order).
    """
    from .engine import perturb_captions as _run

    # names may be families or "all" as on the command line ("typos"), and a string or a list
    if isinstance(names, str) or any(n not in REGISTRY for n in names if isinstance(n, str)):
        names = resolve(names)
    return _run(captions, caption_ids, names, seed=seed, params=params, progress=progress, batch_size=batch_size)


# languages: which perturbations need English resources (vlbench/perturbations/support/languages.py)
from .support.languages import (LANGUAGE_FREE, check_language, dataset_language,  # noqa: E402
                                language_problems, languages)
