"""The word-level rules of the synonym perturbations (vlbench.perturbations.lexical): WordNet candidates and
their ranking, plural and degree forms, the vocabularies that are left alone (fixed multi-word expressions,
colour words, mass nouns, predicative-only adjectives), the a/an rule and case matching. Kept apart from the
perturbation classes so each module reads in one sitting."""

from __future__ import annotations

import re
from functools import cache, lru_cache

from ..lang import wordnet

PLURAL_TAGS = frozenset({"NNS", "NNPS"})

# plurals the suffix rules get wrong and that are common in image captions
IRREGULAR_PLURALS = {
    "man": "men", "woman": "women", "child": "children", "person": "people", "foot": "feet", "tooth": "teeth",
    "goose": "geese", "mouse": "mice", "louse": "lice", "ox": "oxen", "die": "dice",
    # same form in the plural
    "sheep": "sheep", "deer": "deer", "fish": "fish", "aircraft": "aircraft", "spacecraft": "spacecraft",
    "series": "series", "species": "species", "moose": "moose", "bison": "bison", "swine": "swine",
}

# WordNet lexicographer files of things one can see: the sense of a caption noun is looked for only there
VISUAL_NOUN_FILES = frozenset({"noun.artifact", "noun.animal", "noun.person", "noun.plant", "noun.food",
                               "noun.object", "noun.body", "noun.substance"})
# colour adjectives: every WordNet "synonym" names another shade (red -> crimson, blue -> bluish)
COLOUR_WORDS = frozenset("red blue green yellow orange purple pink brown black white gray grey silver gold golden "
                         "tan beige violet maroon navy teal turquoise".split())
# mass nouns: never put in the plural for a plural word ("leaves" -> *"foliages")
MASS_NOUNS = frozenset("foliage luggage baggage furniture clothing equipment information advice".split())
# adjectives that cannot stand before a noun ("a lone cow" -> "an alone cow")
PREDICATIVE_ONLY = frozenset("alone asleep awake alive afraid aware ablaze afloat ajar aloof adrift akin".split())
_IRREGULAR_PLURAL_FORMS = frozenset(v for k, v in IRREGULAR_PLURALS.items() if v != k)

# fixed expressions whose words must not be replaced one at a time (lower-case, single spaces)
FIXED_EXPRESSIONS = (
    "hot dog", "hot dogs", "fire hydrant", "fire hydrants", "close up", "close-up", "black and white",
    "teddy bear", "teddy bears", "living room", "cell phone", "cell phones", "stop sign", "stop signs",
    "traffic light", "traffic lights", "parking meter", "parking lot", "tennis racket", "tennis court",
    "baseball bat", "baseball game", "hot air balloon", "fire truck", "fire engine", "double decker",
    "ice cream", "french fries", "home plate", "big ben", "more than", "a lot", "lots of", "each other",
    "other side", "in the middle", "middle of", "first base", "second base", "third base", "high chair",
    "cutting board", "stuffed animal", "police officer", "hard hat", "hard hats", "school aged", "middle aged",
    "mega phone", "bus stop", "train station", "train tracks", "side walk", "air port", "frisbee golf",
)


def _norm(s: str) -> str:
    return s.lower().replace("_", "").replace("-", "").replace(" ", "")


def _wn():
    return wordnet()


@cache
def _exc_plurals() -> dict[str, frozenset]:
    """singular -> plurals listed in WordNet's noun exception file (noun.exc)."""
    rev: dict[str, set] = {}
    for plural, singulars in _wn()._exception_map["n"].items():
        for s in singulars:
            rev.setdefault(s, set()).add(plural)
    return {k: frozenset(v) for k, v in rev.items()}


def _morphy_all(form: str, pos: str) -> list[str]:
    wn = _wn()
    try:
        return list(wn._morphy(form, pos))
    except (AttributeError, TypeError):  # older/newer NLTK: public single-result morphy
        base = wn.morphy(form, pos)
        return [base] if base else []


def pluralize_word(s: str) -> str:
    """English plural of one lower-case noun: a small irregular table, then suffix rules, using
    WordNet's exception list to spell -f/-fe -> -ves and -o -> -oes where WordNet knows that form."""
    if s in IRREGULAR_PLURALS:
        return IRREGULAR_PLURALS[s]
    exc = _exc_plurals().get(s, frozenset())
    if s.endswith("woman"):
        return s[:-5] + "women"
    if s.endswith("man") and len(s) > 3 and _wn().synsets(s[:-3]):  # fireman -> firemen; not human
        return s[:-3] + "men"
    if s.endswith("fe") and s[:-2] + "ves" in exc:
        return s[:-2] + "ves"
    if s.endswith("f") and s[:-1] + "ves" in exc:
        return s[:-1] + "ves"
    if s.endswith("o") and s + "es" in exc:
        return s + "es"
    if s.endswith(("s", "x", "z", "ch", "sh")):
        return s + "es"
    if s.endswith("y") and len(s) > 1 and s[-2] not in "aeiou":
        return s[:-1] + "ies"
    return s + "s"


def pluralize_phrase(lemma: str) -> str | None:
    """Plural of a WordNet noun lemma (words separated by spaces; the last word is inflected), or None
    when WordNet's own morphology does not map the plural back to the lemma."""
    words = lemma.split(" ")
    if not words[-1].isalpha():
        return None
    plural = " ".join(words[:-1] + [pluralize_word(words[-1].lower())])
    key = plural.replace(" ", "_").lower()
    if lemma.replace(" ", "_").lower() not in [m.lower() for m in _morphy_all(key, "n")]:
        return None
    return plural


@lru_cache(maxsize=200_000)
def synonym_candidates(word: str, wn_pos: str, plural: bool, inflect: bool) -> tuple[str, ...]:
    """Ordered synonym candidates of ``word`` (see the module docstring)."""
    wn = _wn()
    w = word.lower()
    bases = {_norm(w)} | {_norm(b) for b in _morphy_all(w, wn_pos)}
    out: list[str] = []
    seen: set[str] = set()
    for syn in wn.synsets(w, pos=wn_pos):
        names = syn.lemma_names()
        exact = any(n.lower() == w for n in names)
        if exact or not inflect:
            make_plural = False
        elif wn_pos == "n" and plural:
            make_plural = True
        else:
            continue
        for n in names:
            if _norm(n) in bases:
                continue
            cand = n.replace("_", " ")
            if make_plural:
                if any(c.isupper() for c in cand):
                    continue
                cand = pluralize_phrase(cand)
                if cand is None:
                    continue
            if _norm(cand) in bases or cand in seen:
                continue
            seen.add(cand)
            out.append(cand)
    return tuple(out)


@lru_cache(maxsize=200_000)
def common_candidates(word: str, wn_pos: str, plural: bool) -> tuple[str, ...]:
    """Candidates of the ``common`` rule (module docstring): most frequent sense, SemCor-attested
    lower-case single-word lemmas ranked by SemCor count, no inflection/derivation of the word."""
    wn = _wn()
    w = word.lower()
    # a plural noun is looked up by its singular only ("men" alone is also a lemma of the sense "work force")
    forms = [b for b in _morphy_all(w, wn_pos) if b != w] if plural else [w]
    if not forms:  # a plural with no singular in WordNet (cattle, woods): its number cannot be kept reliably
        return ()
    # the sense in which the word itself is most frequent in SemCor (ties: WordNet's order); a word never
    # seen in SemCor has no attested sense and gets no candidate (WordNet's order alone is no evidence)
    best, sense = 0, None
    for syn in wn.synsets(w, pos=wn_pos):
        if wn_pos == "n" and syn.lexname() not in VISUAL_NOUN_FILES:
            continue  # captions describe what is seen: a court is a tennis court here, not a tribunal
        c = sum(lem.count() for lem in syn.lemmas() if lem.name().lower() in forms)
        if c > best:
            best, sense = c, syn
    if sense is None:
        return ()
    bases = {_norm(f) for f in forms} | {_norm(b) for b in _morphy_all(w, wn_pos)}
    ranked = []
    for lem in sense.lemmas():
        name = lem.name()
        if (not name.isalpha() or not name.islower() or _norm(name) in bases or lem.count() < 1
                or name in PREDICATIVE_ONLY or _dominant_sense(name, wn_pos) != sense.name()
                or any(name[:4] == b[:4] for b in bases) or _shares_base(name, w)
                or (wn_pos == "a" and _is_graded_form(name))):
            continue
        cand = name
        if plural and name in MASS_NOUNS:
            continue
        if wn_pos == "n" and not plural and any(b != name for b in _morphy_all(name, "n")):
            continue  # a singular word is never replaced by one that reads as a plural ("sister" -> "sis")
        if plural and name.lower() != w:
            cand = pluralize_phrase(name)
            if cand is None:
                continue
        ranked.append((-lem.count(), cand))
    return tuple(c for _, c in sorted(ranked))


@lru_cache(maxsize=1)
def _fixed_pattern():
    alts = sorted((r"\s+".join(re.escape(p) for p in e.split(" ")) for e in FIXED_EXPRESSIONS), key=len, reverse=True)
    return re.compile(r"(?<![a-z])(?:" + "|".join(alts) + r")(?![a-z])")


@lru_cache(maxsize=4096)
def _fixed_spans(text: str) -> tuple[tuple[int, int], ...]:
    """Spans of fixed expressions in ``text`` (overlapping matches included: one search per start)."""
    pat, low = _fixed_pattern(), text.lower()
    out: list[tuple[int, int]] = []
    pos = 0
    while True:
        m = pat.search(low, pos)
        if m is None:
            return tuple(out)
        out.append(m.span())
        pos = m.start() + 1


def _all_bases(word: str) -> set[str]:
    return {word} | {b for p in ("n", "v", "a") for b in _morphy_all(word, p)}


def _shares_base(a: str, b: str) -> bool:
    """Whether two words are forms of one word for WordNet's morphology (shot / shooting: shoot)."""
    return bool(_all_bases(a.lower()) & _all_bases(b.lower()))


def _is_graded_form(adj: str) -> bool:
    """A comparative/superlative adjective form (older, eldest): WordNet maps it to another adjective."""
    return any(b != adj for b in _morphy_all(adj, "a")) or adj in ("more", "most", "less", "least")


@lru_cache(maxsize=200_000)
def _dominant_sense(word: str, wn_pos: str) -> str | None:
    """The synset (name) in which ``word`` is most frequent in SemCor (ties: WordNet's order). A candidate
    must mean the caption word's sense *first*: "tribunal" for "court", "radical" for "group" do not."""
    best, out = 0, None
    for syn in _wn().synsets(word, pos=wn_pos):
        c = sum(lem.count() for lem in syn.lemmas() if lem.name().lower() == word)
        if c > best:
            best, out = c, syn.name()
    return out


def in_fixed_expression(text: str, start: int, end: int) -> bool:
    """Whether the span text[start:end] lies inside one of :data:`FIXED_EXPRESSIONS` (case- and
    spacing-insensitive, whole words)."""
    return any(s <= start and end <= e for s, e in _fixed_spans(text))


_AN_EXCEPTIONS = ("hour", "honest", "honor", "honour", "heir")
_A_EXCEPTIONS = ("uni", "use", "usu", "uti", "ute", "ura", "uro", "eu", "one", "once", "ewe")


def wants_an(word: str) -> bool:
    """Whether an indefinite article before ``word`` is "an" (spelling heuristic)."""
    w = word.lower()
    if w.startswith(_AN_EXCEPTIONS):
        return True
    if w.startswith(_A_EXCEPTIONS):
        return False
    return w[:1] in ("a", "e", "i", "o", "u")


def match_case(template: str, new: str) -> str:
    if len(template) > 1 and template.isupper():
        return new.upper()
    if template[:1].isupper():
        return new[:1].upper() + new[1:]
    return new


# derivational suffixes that make a new word from a base ("bluish" from "blue", "sandy" from "sand"): a word
# and a candidate related this way are not synonyms (the derived word says "somewhat / like / full of")
DERIVATION_SUFFIXES = ("ish", "like", "esque", "y", "ey", "ie", "ly", "ful", "less", "ness", "en")


def is_derivation(word: str, cand: str) -> bool:
    """Whether one of ``word`` and ``cand`` is the other plus a derivational suffix (either way round),
    with the usual spelling changes: a dropped final e (blue -> bluish), a doubled final consonant
    (red -> reddish, sun -> sunny), y -> i (hazy -> haziness)."""
    a, b = word.lower(), cand.lower()
    for long_, short in ((a, b), (b, a)):
        for suf in DERIVATION_SUFFIXES:
            if not long_.endswith(suf) or len(long_) - len(suf) < 2:
                continue
            stem = long_[:-len(suf)]
            forms = {stem, stem + "e", stem[:-1] + "y" if stem.endswith("i") else stem}
            if len(stem) > 2 and stem[-1] == stem[-2]:
                forms.add(stem[:-1])
            if short in forms:
                return True
    return False


@lru_cache(maxsize=65536)
def caption_word_forms(text: str) -> frozenset:
    """Every word of ``text`` (lower case, alphabetic runs) with its WordNet base forms as a noun, verb and
    adjective: "shops and stores" -> {shops, shop, and, stores, store}. A synonym must not be one of them."""
    out: set = set()
    for w in re.findall(r"[^\W\d_]+", text.lower()):
        out.add(w)
        if len(w) > 2:
            out |= {b for p in ("n", "v", "a") for b in _morphy_all(w, p)}
    return frozenset(out)


def word_forms(phrase: str) -> set:
    """A candidate's words with their base forms (same reading as :func:`caption_word_forms`)."""
    return set(caption_word_forms(phrase))
