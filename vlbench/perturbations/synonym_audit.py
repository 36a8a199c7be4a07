"""Automatic checks of synonym substitutions: does a replacement keep the caption's form?

Independent of how :mod:`vlbench.perturbations.lexical` chooses its candidates: the replaced words are
found by a word-level diff of the original and the perturbed caption, and each change is classified:

(a) ``capitalised``: a capitalised (proper-name) replacement for a lower-case word ("grass" -> "Gunter Grass");
(b) ``repeat``: the perturbed caption has more adjacent repeated words than the original ("plane plane");
(c) ``inflection``: the replacement is only an inflection of the word (a suffix -s/-es/-er/-est/-ed/-ing/
    -r/-st/-d or a WordNet base form in common: "old" -> "older", "dog" -> "dogs");
(d) ``number``: the grammatical number (nouns: singular/plural) or degree (adjectives: positive /
    comparative / superlative) differs between the word and its replacement ("men" -> "work force");
(e) ``article``: more a/an errors than the original ("A  woman" -> "A  adult female");
(f) ``present``: the replacement is a word the caption already has, or a form of one ("shops and stores" ->
    "stores and stores");
(g) ``derivation``: the replacement is the base of a derived word or the reverse ("bluish" -> "blue");

Number is read with WordNet's own morphology: a word is plural when ``morphy`` maps it to a different
base and it is not itself a noun lemma, or when it is in WordNet's noun exception list (for a multi-word
replacement the last word counts). Degree: comparative/superlative when WordNet's adjective morphology
maps the word to another base (``bigger`` -> ``big``) or it is one of "more/most/less/least/better/best/
worse/worst".
"""

from __future__ import annotations

import difflib
import re

from ..lang import wordnet
from .lexical import wants_an
from .synonym_words import is_derivation

_PUNCT = re.compile(r"^[^\w]+|[^\w]+$")
_SUFFIXES = ("s", "es", "er", "est", "ed", "ing", "r", "st", "d", "ier", "iest", "ies")
_IRREGULAR_PLURALS = {"people", "men", "women", "children", "feet", "teeth", "mice", "geese", "oxen", "dice"}
_DEGREE_WORDS = {"more", "most", "less", "least", "better", "best", "worse", "worst"}


def _wn():
    return wordnet()


def _strip(w: str) -> str:
    return _PUNCT.sub("", w)


def replacements(original: str, perturbed: str) -> list[tuple[str, str]]:
    """The (old words, new words) spans a word-level diff finds, ignoring an a/an switch."""
    a, b = original.split(), perturbed.split()
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        old, new = [_strip(w) for w in a[i1:i2]], [_strip(w) for w in b[j1:j2]]
        # an article switch next to the replacement: "a picture" -> "an image"
        if old and new and old[0].lower() in ("a", "an") and new[0].lower() in ("a", "an"):
            old, new = old[1:], new[1:]
        if old or new:
            out.append((" ".join(old), " ".join(new)))
    return out


def adjacent_repeats(text: str) -> int:
    words = [_strip(w).lower() for w in text.split()]
    words = [w for w in words if w]
    return sum(1 for x, y in zip(words, words[1:]) if x == y)


def article_errors(text: str) -> int:
    """Number of "a" before a vowel letter / "an" before a consonant letter (any spacing)."""
    words = [_strip(w) for w in text.split()]
    return sum(1 for x, y in zip(words, words[1:])
               if y[:1].isalpha() and ((x.lower() == "a" and wants_an(y)) or (x.lower() == "an" and not wants_an(y))))


def _bases(word: str, pos: str) -> set[str]:
    wn = _wn()
    w = word.lower()
    out = {w}
    try:
        out |= set(wn._morphy(w, pos))
    except (AttributeError, TypeError):  # pragma: no cover - other NLTK versions
        b = wn.morphy(w, pos)
        out |= {b} if b else set()
    return out


def is_inflection(old: str, new: str) -> bool:
    o, n = old.lower(), new.lower()
    if not o or not n or o == n or " " in o or " " in n:
        return False
    short, long_ = sorted((o, n), key=len)
    if long_.startswith(short) and long_[len(short):] in _SUFFIXES:
        return True
    if short.endswith("y") and long_.startswith(short[:-1]) and long_[len(short) - 1:] in _SUFFIXES:
        return True
    if short.endswith("e") and long_.startswith(short[:-1]) and long_[len(short) - 1:] in ("ing", "er", "est"):
        return True
    return any(_bases(o, p) & _bases(n, p) for p in ("n", "a", "v"))


def is_plural(phrase: str) -> bool:
    """Plural by WordNet's noun morphology: an irregular/exception plural, or a form WordNet maps to
    another noun base (dogs -> dog, glasses -> glass); the last word of a phrase counts."""
    w = phrase.split()[-1].lower() if phrase.split() else ""
    if not w.isalpha():
        return False
    if w in _IRREGULAR_PLURALS or w in _wn()._exception_map["n"]:
        return True
    return bool(_bases(w, "n") - {w})


def degree(word: str) -> str:
    w = word.lower()
    if " " in w:
        w = w.split()[-1]
    if w in _DEGREE_WORDS:
        return "comparative/superlative"
    if _bases(w, "a") - {w}:
        return "comparative/superlative"
    return "positive"


def classify(original: str, perturbed: str, kind: str) -> dict[str, int]:
    """Counts of (a)-(d) for one caption pair; ``kind`` is "noun" or "adjective"."""
    out = {"capitalised": 0, "repeat": 0, "inflection": 0, "number": 0, "article": 0, "present": 0,
           "derivation": 0}
    if perturbed == original:
        return out
    out["repeat"] = int(adjacent_repeats(perturbed) > adjacent_repeats(original))
    out["article"] = int(article_errors(perturbed) > article_errors(original))
    for old, new in replacements(original, perturbed):
        if not old or not new:
            continue
        if old.islower() and any(c.isupper() for c in new):
            out["capitalised"] = 1
        if is_inflection(old, new):
            out["inflection"] = 1
        if kind == "noun" and is_plural(old) != is_plural(new):
            out["number"] = 1
        if kind == "adjective" and degree(old) != degree(new):
            out["number"] = 1
        if introduces_present_word(original, old, new):
            out["present"] = 1
        if is_derived(old, new):
            out["derivation"] = 1
    return out


def _forms(words) -> set[str]:
    out = set()
    for w in words:
        out.add(w)
        if len(w) > 2:
            for p in ("n", "v", "a"):
                out |= _bases(w, p)
    return out


def introduces_present_word(original: str, old: str, new: str) -> bool:
    """(f) The replacement brings in a word that the original caption already has elsewhere, as the same word
    or a form of it ("shops and stores" -> "stores and stores", "a store ... shops" -> "... stores")."""
    def words(t):
        return set(re.findall(r"[^\W\d_]+", t.lower()))

    added = words(new) - words(old)  # a clitic kept on both sides ("child's" -> "kid's": s) is not new
    return bool(_forms(added) & _forms(words(original)))


def is_derived(old: str, new: str) -> bool:
    """(g) The replacement is the base of a derived word or the other way round ("bluish" -> "blue",
    "sandy" -> "sand", "wood" -> "wooden"): the two differ in meaning."""
    o, n = old.lower(), new.lower()
    return " " not in o and " " not in n and o != n and is_derivation(o, n)
