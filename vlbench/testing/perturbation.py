"""``check_perturbation``: a caption perturbation against the protocol of vlbench/perturbations/base.py.

The engine (vlbench/perturbations/engine.py) builds the perturbation with the user's parameters, gives ``apply``
every caption that has a letter or digit with a :class:`CaptionRNG` private to (seed, name, caption id) and, when
``needs_parse``, the caption's spaCy tokens; ``None`` or the caption itself means "not applicable", an empty
string is refused. Outputs are cached by name and version, so they must depend on nothing but the caption, its
tokens and the rng: not on the other captions or their order.
"""

from __future__ import annotations

import json

from ..perturbations.base import CaptionRNG, usable_text
from ..perturbations.engine import instantiate, parse
from ..registry import perturbations as PERTURBATIONS
from ..registry import valid_name
from .common import Checker, Report, json_problem, short

#: ordinary captions, among them colour words, nouns and adjectives for the lexical kinds
CAPTIONS = ("A man in a red shirt rides a brown horse on the beach.", "Two young dogs play in the snow",
            "a woman holding an umbrella walks past a blue car", "Three people sitting at a wooden table eat pizza.",
            "Children are playing football in a green park near the old bridge.",
            "A big dog jumps over a small fence.", "An elderly man sits on a wooden bench.",
            "An amphibious plane is floating in front of the London Bridge.")
#: captions at the edges of what the engine passes on: one word, one letter, punctuation, digits, extra spaces,
#: non-English and non-Latin text, a very long caption
EDGE_CAPTIONS = ("dog", "x", "Dog.", "a, b; c!", "!!! ?? a", "1 2 3", "  a cat  sits  ", "A  woman -- smiling ...",
                 "Ein Mädchen läuft über die Straße.", "café naïve – 東京タワー の 夜景",
                 "A " + "very " * 80 + "long caption about a yellow bus.")
RESOURCE_KINDS = ("spacy", "wordnet", "nltk")


def _build(target, params):
    """The perturbation object: a registered name (built as the engine builds it), a class or factory, or an
    object."""
    if isinstance(target, str):
        return instantiate(target, params)
    if _is_factory(target):
        return target(**(params or {}))
    return target


def _is_factory(target) -> bool:  # as the engine reads a registered target
    return isinstance(target, type) or (callable(target) and not hasattr(target, "apply"))


def _check_record(c: Checker, obj) -> None:
    with c.check("record"):
        missing = [a for a in ("name", "family", "version", "params", "needs_parse", "apply") if not hasattr(obj, a)]
        c.expect(not missing, "name, family, version, params, needs_parse and apply", f"no {', '.join(missing)}")
        c.expect(valid_name(obj.name), "a lowercase kebab-case name such as 'swap-colour'", short(obj.name))
        c.expect(isinstance(obj.family, str) and bool(obj.family), "family: a non-empty str", short(obj.family))
        c.expect(isinstance(obj.version, str) and bool(obj.version), "version: a non-empty str (part of cache keys)",
                 short(obj.version))
        c.expect(isinstance(obj.params, dict) and json_problem(obj.params) is None,
                 "params: a JSON-able dict (it is written into results)", short(obj.params))
        c.expect(isinstance(obj.needs_parse, bool), "needs_parse: a bool", short(obj.needs_parse))
        langs = getattr(obj, "languages", None)
        c.expect(langs is None or (isinstance(langs, (list, tuple)) and all(
            isinstance(x, str) and len(x) == 2 and x.islower() for x in langs)),
            "languages: None or ISO 639-1 codes such as ('en',)", short(langs))
        kinds = getattr(obj, "resources", ())
        c.expect(set(kinds) <= set(RESOURCE_KINDS), f"resources among {RESOURCE_KINDS}", short(kinds))


def _check_params(c: Checker, target) -> None:
    """A class or factory is called with the user's --param values: a misspelt one must not pass in silence."""
    if not _is_factory(target):
        c.skip("unknown parameter refused", "a fixed object takes no parameters (the engine refuses any)")
        return
    c.current = "unknown parameter refused"
    try:
        target(no_such_parameter=1)
    except Exception:  # refused, as the engine needs (it reports the error naming the perturbation)
        c.report.passed.append(c.current)
        return
    raise c.error("an exception for the parameter no_such_parameter=1", "it was accepted")


def _run(c: Checker, obj, captions, ids, seed: int, tokens: dict) -> dict:
    out = {}
    for text, cid in zip(captions, ids):
        rng = CaptionRNG.for_caption(seed, obj.name, cid)
        try:
            new = obj.apply(text, rng=rng, tokens=tokens.get(text) if obj.needs_parse else None)
        except Exception as exc:
            raise c.error("apply() returns for every caption", f"{type(exc).__name__}: {exc} on {text!r}") from exc
        c.expect(new is None or isinstance(new, str), "apply() returns a str or None (not applicable)",
                 f"{type(new).__name__} for {text!r}")
        c.expect(new is None or bool(new.strip()), "a non-empty caption, or None when not applicable",
                 f"{new!r} for {text!r}")
        out[cid] = new
    return out


def check_perturbation(perturbation, *, params: dict | None = None, captions=None, seed: int = 0) -> Report:
    """Check a caption perturbation: a registered name, a class or factory (built with ``params``), or an object.
    ``captions``: captions it should apply to, instead of the built-in sample. A perturbation with
    ``needs_parse`` is given spaCy tokens, as in a run (spaCy's English model must be installed). Returns the
    :class:`Report` of
    the checks passed; raises :class:`ConformanceError` at the first failure."""
    c = Checker("perturbation", perturbation if isinstance(perturbation, str) else
                getattr(perturbation, "name", None) or type(perturbation).__name__)
    with c.check("builds"):
        obj = _build(perturbation, params)
    _check_record(c, obj)
    _check_params(c, PERTURBATIONS.get(perturbation) if isinstance(perturbation, str) else perturbation)
    sample = [t for t in (captions or CAPTIONS) if usable_text(t)]
    texts = sample + [t for t in EDGE_CAPTIONS if t not in sample]
    ids = [f"check#{i}" for i in range(len(texts))]
    tokens = parse(texts) if obj.needs_parse else {}
    with c.check("edge captions"):
        first = _run(c, obj, texts, ids, seed, tokens)
    with c.check("deterministic"):
        again = _run(c, obj, texts, ids, seed, tokens)
        diff = [cid for cid in ids if again[cid] != first[cid]]
        c.expect(not diff, "the same output for the same (seed, name, caption id)",
                 f"{len(diff)} captions changed on a second pass, e.g. {first[diff[0]]!r} then {again[diff[0]]!r}"
                 if diff else "")
    with c.check("independent of the other captions"):
        rev = _run(c, obj, texts[::-1], ids[::-1], seed, tokens)
        diff = [cid for cid in ids if rev[cid] != first[cid]]
        c.expect(not diff, "a caption's output not to depend on the captions before it",
                 f"{len(diff)} captions changed when the order was reversed" if diff else "")
    with c.check("applies"):
        hits = sum(1 for t, cid in zip(sample, ids) if first[cid] is not None and first[cid] != t)
        c.expect(hits > 0, "a changed caption for at least one sample caption (pass captions= it applies to)",
                 f"no change on {len(sample)} captions: {json.dumps(sample[:2])}...")
    return c.report
