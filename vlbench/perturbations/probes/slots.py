"""Where a caption can be changed, read from its spaCy tags (the one tagging pass every probe shares), and the
WordNet facts the replace / swap / count / antonym probes need. Every helper is cached per (text, tokens) or per
word, so eleven probes of one caption read its units once.

* an **object slot** is a one-word noun unit (NN/NNS) whose base form is a physical object, not a scene word
  (:data:`.words.STOP_NOUNS`), not inside a fixed expression ("hot dog"), and not next to another noun (a
  compound: "tennis racket");
* an **attribute slot** is a one-word adjective unit (JJ) directly before an object slot ("a white dog");
* a **relation slot** is a spatial preposition (:data:`PREPOSITIONS`) with the object noun that follows it
  within four words, or a verb in -ing form (VBG: "riding");
* a **count slot** is a number word (two ... ten) before a plural object noun, or "a"/"an"/"one" before a
  singular one (with at most two adjectives between).
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..base import analyze_units
from ..synonym_words import _fixed_spans, _morphy_all, _wn
from .synsets import closure, fast_path, senses_of
from .words import STOP_NOUNS, caption_nouns, is_physical_object, noun_base

#: single-word spatial prepositions a relation probe may replace, in clusters of near-synonyms (a replacement
#: is never from the original's cluster)
PREPOSITION_CLUSTERS = (("on", "atop", "onto", "upon"), ("under", "beneath", "below", "underneath"),
                        ("above", "over"), ("inside", "within"), ("near", "beside", "alongside"), ("behind",),
                        ("outside",), ("across",), ("around",), ("through",), ("toward", "towards"))
PREPOSITIONS = {p: cluster for cluster in PREPOSITION_CLUSTERS for p in cluster}
#: -ing verbs never replaced or used (auxiliaries and verbs of no visible action)
LIGHT_VERBS = frozenset("being having doing going getting trying seeming appearing becoming using".split())
#: a fixed list of common caption verbs (the relation vocabulary when there is no caption set: ``--text``)
COMMON_VERBS = tuple("""
sitting standing holding riding walking playing eating looking laying lying flying carrying running
watching driving wearing talking throwing swinging cutting hanging jumping pulling reading drinking sleeping
""".split())
NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                "nine": 9, "ten": 10}
NUMBER_NAMES = {v: k for k, v in NUMBER_WORDS.items()}
#: words that give a count of two ("a couple of", "a pair of")
PAIR_WORDS = frozenset({"couple", "pair", "both", "twin", "twins"})
_ALPHA = re.compile(r"[a-z]+")


@lru_cache(maxsize=65536)
def _fixed_spans_of(text: str) -> tuple:
    """:func:`vlbench.perturbations.synonym_words._fixed_spans`, kept for every caption of a run (its own cache
    holds 4,096 captions, fewer than a caption set: each probe would search every caption again)."""
    return _fixed_spans(text)


def in_fixed_expression(text: str, start: int, end: int) -> bool:
    """:func:`vlbench.perturbations.synonym_words.in_fixed_expression` through :func:`_fixed_spans_of`."""
    spans = _fixed_spans_of(text)
    return bool(spans) and any(s <= start and end <= e for s, e in spans)


@lru_cache(maxsize=200_000)
def noun_forms(word: str) -> tuple:
    """Every WordNet noun base form of a lower-case word (morphy's readings), looked up once per word."""
    return tuple(_morphy_all(word, "n"))


@lru_cache(maxsize=65536)
def object_slots(text: str, tokens: tuple) -> tuple:
    """(unit index, as written, base form, start, end) of each object slot of the caption."""
    infos = analyze_units(text, tokens)
    nouns = {(s, e): (w, b) for w, b, s, e in caption_nouns(text, tokens)}
    is_noun = [len(i.content) == 1 and i.content[0].tag in ("NN", "NNS", "NNP", "NNPS") for i in infos]
    out = []
    for k, info in enumerate(infos):
        hit = nouns.get((info.unit.start, info.unit.end))
        if hit is None or hit[1] in STOP_NOUNS or not is_physical_object(hit[1]):
            continue
        if (k > 0 and is_noun[k - 1]) or (k + 1 < len(infos) and is_noun[k + 1]):
            continue
        if in_fixed_expression(text, info.unit.start, info.unit.end):
            continue
        out.append((k, hit[0], hit[1], info.unit.start, info.unit.end))
    return tuple(out)


@lru_cache(maxsize=65536)
def attribute_slots(text: str, tokens: tuple) -> tuple:
    """(adjective as written, start, end, noun base) of each adjective directly before an object slot."""
    infos = analyze_units(text, tokens)
    out = []
    for k, _written, base, _s, _e in object_slots(text, tokens):
        if k == 0:
            continue
        prev = infos[k - 1]
        if len(prev.content) != 1 or prev.content[0].tag != "JJ" or not prev.unit.text.isalpha():
            continue
        if text[prev.unit.end:infos[k].unit.start].strip() or in_fixed_expression(text, prev.unit.start,
                                                                                   infos[k].unit.end):
            continue
        out.append((prev.unit.text, prev.unit.start, prev.unit.end, base))
    return tuple(out)


@lru_cache(maxsize=65536)
def preposition_slots(text: str, tokens: tuple) -> tuple:
    """(preposition as written, start, end, object noun base) of each spatial preposition with its object (the
    first noun within four words, before another preposition or verb)."""
    infos = analyze_units(text, tokens)
    out = []
    for k, info in enumerate(infos):
        word = info.unit.text.lower()
        if word not in PREPOSITIONS or info.tag not in ("IN", "RP", "RB"):
            continue
        for nxt in infos[k + 1:k + 5]:
            if len(nxt.content) == 1 and nxt.content[0].tag in ("NN", "NNS") and nxt.unit.text.isalpha():
                out.append((info.unit.text, info.unit.start, info.unit.end, noun_base(nxt.unit.text)))
                break
            if nxt.tag.startswith("VB") or nxt.tag == "IN":
                break
    return tuple(out)


@lru_cache(maxsize=65536)
def stated_relations(text: str) -> frozenset:
    """(preposition cluster, word base) for every spatial preposition of the caption and each of the four words
    after it, read as plain letter runs whatever their tags ("behind a cow-like animal" states behind-cow): what a
    relation replacement must never be. Each word stands as written and as every WordNet noun base form of it
    ("hands" is a WordNet lemma of its own, and a plural of "hand")."""
    words = _ALPHA.findall(text.lower())
    return frozenset((PREPOSITIONS[w], base) for k, w in enumerate(words) if w in PREPOSITIONS
                     for x in words[k + 1:k + 5] for base in (x, noun_base(x), *noun_forms(x)))


@lru_cache(maxsize=65536)
def verb_slots(text: str, tokens: tuple) -> tuple:
    """(verb as written, start, end, base form) of each -ing verb (VBG) of the caption."""
    out = []
    for info in analyze_units(text, tokens):
        if len(info.content) != 1 or info.content[0].tag != "VBG" or not info.unit.text.isalpha():
            continue
        word = info.unit.text.lower()
        base = verb_base(word)
        if word in LIGHT_VERBS or base is None or in_fixed_expression(text, info.unit.start, info.unit.end):
            continue
        out.append((info.unit.text, info.unit.start, info.unit.end, base))
    return tuple(out)


@lru_cache(maxsize=65536)
def count_slots(text: str, tokens: tuple) -> tuple:
    """(count, determiner start, determiner end, noun as written, noun base, noun start, noun end, verb) of each
    count slot; ``verb`` is (start, end, written) of a VBZ verb directly after a singular noun (it must agree
    with the new plural), else None. A singular slot in a caption with any other VBZ verb, or with a VBZ verb
    after it but a preposition before it (not its subject), is left out."""
    infos = analyze_units(text, tokens)
    objects = {k: (w, b, s, e) for k, w, b, s, e in object_slots(text, tokens)}
    vbz = [k for k, i in enumerate(infos) if i.content and i.content[-1].tag == "VBZ"]
    out = []
    for k, info in enumerate(infos):
        word = info.unit.text.lower()
        if word not in NUMBER_WORDS and word not in ("a", "an"):
            continue
        j = k + 1
        while j < len(infos) and j - k <= 3 and infos[j].tag == "JJ":
            j += 1
        if j not in objects:
            continue
        written, base, s, e = objects[j]
        plural = written.lower() != base
        if word in ("a", "an", "one"):
            if plural or base in PAIR_WORDS:
                continue
            verb = None
            if j + 1 < len(infos) and j + 1 in vbz:
                if any(infos[x].tag == "IN" for x in range(k)):  # "a man with a dog is ...": not its verb
                    continue
                u = infos[j + 1].unit
                verb = (u.start, u.end, u.text)
            if any(v != j + 1 for v in vbz):
                continue
            out.append((1, info.unit.start, info.unit.end, written, base, s, e, verb))
        elif plural and NUMBER_WORDS[word] >= 2:
            out.append((NUMBER_WORDS[word], info.unit.start, info.unit.end, written, base, s, e, None))
    return tuple(out)


@lru_cache(maxsize=100_000)
def verb_base(word: str) -> str | None:
    """The WordNet verb base form of an -ing word ("riding" -> "ride"), or None when WordNet has none."""
    bases = _morphy_all(word.lower(), "v")
    return sorted(bases, key=lambda b: (len(b), b))[0] if bases else None


@lru_cache(maxsize=100_000)
def verb_closure(verb: str) -> frozenset:
    """Every lemma of every verb sense of ``verb`` and of all their hypernyms ("walk" -> travel, move...)."""
    if fast_path():  # the same set, read from WordNet's data file (:mod:`.synsets`)
        return frozenset(n.lower() for n in closure(senses_of(verb, "v"), instance=False)[1])
    out: set = set()
    seen: set = set()
    stack = list(_wn().synsets(verb, "v"))
    while stack:
        s = stack.pop()
        if s in seen:
            continue
        seen.add(s)
        out.update(n.lower() for n in s.lemma_names())
        stack.extend(s.hypernyms())
    return frozenset(out)


#: antonyms of amount never used ("little" -> "much": WordNet's sense of quantity, not of size)
QUANTITY_WORDS = frozenset("much many few more less most least".split())


@lru_cache(maxsize=100_000)
def antonyms(adjective: str) -> tuple:
    """The one-word WordNet antonyms of ``adjective`` (any adjective sense whose lemma is the word; words of
    amount left out), sorted."""
    w = adjective.lower()
    out: set = set()
    for s in _wn().synsets(w, "a"):
        for lemma in s.lemmas():
            if lemma.name().lower() == w:
                out.update(a.name().lower() for a in lemma.antonyms()
                           if a.name().isalpha() and a.name().lower() not in QUANTITY_WORDS)
    return tuple(sorted(out))


def caption_counts(texts) -> frozenset:
    """Every count the captions give: number words, digits, and 2 for "couple", "pair", "both", "twins"."""
    out: set = set()
    for text in texts:
        low = text.lower()
        out.update(int(d) for d in re.findall(r"\d+", low))
        for w in _ALPHA.findall(low):
            if w in NUMBER_WORDS:
                out.add(NUMBER_WORDS[w])
            elif w in PAIR_WORDS:
                out.add(2)
    return frozenset(out)


@lru_cache(maxsize=100_000)
def adjective_cluster(adjective: str) -> frozenset:
    """The lemmas of every adjective sense of ``adjective`` and of the senses WordNet lists as similar to them
    (a head and its satellites: "small" -> "tiny", "little", "minor"...): near-synonyms a replacement avoids."""
    out: set = set()
    for s in _wn().synsets(adjective.lower(), "a"):
        for t in (s, *s.similar_tos()):
            out.update(n.lower() for n in t.lemma_names())
    return frozenset(out)
