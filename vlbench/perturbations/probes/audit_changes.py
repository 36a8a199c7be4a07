"""The audit of the replace, swap, count and antonym probes, by a path independent of the generator.

The generator reads spaCy tags, WordNet base forms and shared synset *names*; this audit reads each caption as
plain lower-case letter runs (``a``/``an`` read as one word), plural forms by the hand rule of :mod:`.audit`,
numbers by its own table, and WordNet through *lemmas*: two words are synonyms when one is a lemma name of a
synset the other is a lemma of (any part of speech); an object is related when one word's noun senses reach the
other's by hypernym links (``Synset.closure``); an antonym is checked from the new word's side (its lemmas'
antonyms hold the original). Failures per applied probe:

* ``text``: the probe differs from the caption in other words than the probe says (one word for a replacement
  or an antonym, two exchanged words for a swap, the count words for a count);
* ``present``: the new word (or count) is in some caption of the image (for a preposition: the new preposition
  before the same noun within four words);
* ``synonym``: the new word and the original are synonyms (for a swap: the two exchanged words);
* ``related``: for objects, one is a hypernym of the other;
* ``not_antonym``: WordNet does not give the new adjective as an antonym of the original;
* ``not_swapped``: the two words are not both in the caption, exchanged in the probe;
* ``same_count``: the count did not change.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ...lang import wordnet

CHANGE_PROBES = ("replace-object", "replace-attribute", "replace-relation", "swap-object", "swap-attribute",
                 "count", "antonym-attribute")
CHECKS = ("text", "present", "synonym", "related", "not_antonym", "not_swapped", "same_count")
_RUN = re.compile(r"[a-z]+")
_NUMBER = {"a": 1, "an": 1, "one": 1, "single": 1, "two": 2, "couple": 2, "pair": 2, "both": 2, "twins": 2,
           "twin": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}


def words_of(text: str) -> list:
    return ["a" if w == "an" else w for w in _RUN.findall(text.lower())]


def differing(original: str, probe: str) -> list | None:
    """Positions where the two texts' words differ, or None when they have different numbers of words."""
    a, b = words_of(original), words_of(probe)
    if len(a) != len(b):
        return None
    return [(k, a[k], b[k]) for k in range(len(a)) if a[k] != b[k]]


@lru_cache(maxsize=200_000)
def _lemma_friends(word: str) -> frozenset:
    """Every lemma name (lower case) of every synset that has ``word`` as a lemma, any part of speech."""
    return frozenset(n.lower() for lemma in wordnet().lemmas(word) for n in lemma.synset().lemma_names())


def synonyms(a: str, b: str) -> bool:
    return a == b or b in _lemma_friends(a) or a in _lemma_friends(b)


@lru_cache(maxsize=100_000)
def _above(noun: str) -> frozenset:
    """Lemma names of every hypernym (instance hypernyms too) of every noun sense of ``noun``."""
    out: set = set()
    for s in wordnet().synsets(noun, pos="n"):
        for h in s.closure(lambda x: x.hypernyms() + x.instance_hypernyms()):
            out.update(n.lower() for n in h.lemma_names())
    return frozenset(out)


def related(a: str, b: str) -> bool:
    return a in _above(b) or b in _above(a)


def antonym_of(new: str, original: str) -> bool:
    return any(a.name().lower() == original for lemma in wordnet().lemmas(new) for a in lemma.antonyms())


def _one_word_change(diff, old_forms: set, new_forms: set) -> bool:
    return diff is not None and len(diff) == 1 and diff[0][1] in old_forms and diff[0][2] in new_forms


def _before_noun(texts, prep: str, noun_forms: set) -> bool:
    for text in texts:
        w = words_of(text)
        for k, x in enumerate(w):
            if x == prep and noun_forms & set(w[k + 1:k + 5]):
                return True
    return False


def check_change(name: str, caption: str, probe: str, meta: dict, image_words: frozenset, image_texts,
                 forms) -> list:
    """The failed checks (names from :data:`CHECKS`) of one applied probe; ``forms`` is the audit's hand
    plural rule (:func:`.audit.hand_forms`)."""
    fails = []
    diff = differing(caption, probe)
    if name in ("replace-object", "replace-attribute", "replace-relation", "antonym-attribute"):
        old, new = meta["replaced"], meta["by"]
        written = meta.get("written_as", new).lower()
        if not _one_word_change(diff, forms(old) | {meta.get("as_written", old).lower()}, forms(new) | {written}):
            fails.append("text")
        if name == "replace-relation" and meta["relation"] == "preposition":
            if _before_noun(image_texts, new, forms(meta["object"])):
                fails.append("present")
        elif name in ("replace-attribute", "antonym-attribute"):  # an adjective has no plural: the word itself
            if new in image_words:
                fails.append("present")
        elif (forms(new) | {written}) & image_words:
            fails.append("present")
        if name == "replace-relation" and meta["relation"] == "verb":
            old = wordnet().morphy(old, "v") or old
        if synonyms(old, new):
            fails.append("synonym")
        if name == "replace-object" and related(old, new):
            fails.append("related")
        if name == "antonym-attribute" and not antonym_of(new, old):
            fails.append("not_antonym")
    elif name in ("swap-object", "swap-attribute"):
        a, b = meta["bases"] if name == "swap-object" else meta["swapped"]
        fa, fb = forms(a), forms(b)
        ok = diff is not None and len(diff) == 2 and diff[0][1] in fa and diff[1][1] in fb \
            and diff[0][2] in fb and diff[1][2] in fa
        if not ok:
            fails.append("not_swapped")
        if synonyms(a, b) or (name == "swap-object" and related(a, b)):
            fails.append("synonym")
    elif name == "count":
        old, new = meta["count_from"], meta["count_to"]
        hits = [d for d in diff or () if _NUMBER.get(d[1]) == old and _NUMBER.get(d[2]) == new]
        if len(hits) != 1 or len(diff or ()) > 3:
            fails.append("text")
        if old == new:
            fails.append("same_count")
        given = {_NUMBER[w] for w in image_words if w in _NUMBER and w not in ("a", "an")}
        given |= {int(d) for t in image_texts for d in re.findall(r"\d+", t)}
        if new in given:
            fails.append("present")
    return fails
