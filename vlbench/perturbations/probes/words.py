"""Which words an image's captions mention, and which object words a probe may deny or add.

Everything a meaning-changing probe decides about "present" and "absent" is here (the generator's path; the
audit in :mod:`.audit` checks the result by a different path).

* **Mentioned forms** of an image: every alphabetic word of every caption of the image, lower case, with its
  WordNet base forms as a noun, verb and adjective (``dogs`` -> ``dog``; the reading of
  :func:`vlbench.perturbations.synonym_words.caption_word_forms`). A word counts as present when it is
  mentioned in ANY caption of the image, under any part of speech.
* **Blocked relatives**: for every noun the captions mention (spaCy tag NN/NNS, as base form), every lemma of
  every WordNet noun sense of it and of all their hypernyms (``dog`` blocks ``domestic dog``, ``canine``,
  ``animal``, ``organism``...). A candidate is never one of them (denying "animal" under a dog is false),
  never a word whose own hypernym closure holds a mentioned noun (under "animal", "dog" may be true: skipped),
  and never a word that shares any WordNet synset, of any part of speech, with a mentioned word ("blue" is
  never added where a caption says "down": WordNet has them as synonyms of "sad"). An image whose captions use a
  word that may name anything (:data:`GENERAL_NOUNS`: "object", "stuff", ...) allows no word at all.
* **Object vocabulary** (what may be denied or added): the nouns of the caption set itself, as WordNet base
  forms, whose most frequent WordNet sense is a physical object (``physical_object.n.01`` among its hypernyms),
  not in :data:`STOP_NOUNS`, ranked by the number of images whose captions mention them (ties: alphabetical),
  the first ``size`` of them; a base never written in the singular is left out ("jeans" gives no "jean"), and so is
  a noun that is a WordNet hypernym of two or more other kept nouns ("animal", "vehicle", "structure").
  Deterministic: the same captions give the same list. For one caption alone
  (``vlbench perturb --text``) there is no caption set to draw from: :data:`COCO_OBJECTS` (the 80 COCO
  category names that are one word) is used instead.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache

from ..base import NOUN_TAGS, Token, analyze_units
from ..synonym_words import _morphy_all, _wn
from .synsets import closure, fast_path, senses_of, synset_key

#: nouns never denied or added: parts of a scene, quantities and picture words rather than objects one can miss
STOP_NOUNS = frozenset("""
picture image photo photograph view shot scene background foreground front back side top bottom middle center
centre edge corner area part piece lot group couple pair bunch number set kind type sort variety thing object
something stuff item way day time night color colour shape line row end half front outdoors inside outside
""".split())

#: words that may name any object: an image whose captions use one ("a yellow object", "playing with stuff") gets
#: no absent-object probe, since the unnamed thing may be whatever would be denied or added
GENERAL_NOUNS = frozenset("object thing stuff item something anything belongings gear".split())

#: the one-word names of the 80 COCO object categories: the vocabulary when there is one caption only
COCO_OBJECTS = tuple("""
person bicycle car motorcycle airplane bus train truck boat bench bird cat dog horse sheep cow elephant bear zebra
giraffe backpack umbrella handbag tie suitcase frisbee skis snowboard kite skateboard surfboard bottle cup fork
knife spoon bowl banana apple sandwich orange broccoli carrot pizza donut cake chair couch bed toilet laptop mouse
remote keyboard microwave oven toaster sink refrigerator book clock vase scissors toothbrush
""".split())

_WORD = re.compile(r"[^\W\d_]+")


@lru_cache(maxsize=200_000)
def noun_base(word: str) -> str:
    """The WordNet noun base form of a lower-case word (``dogs`` -> ``dog``), the word itself when it is a
    lemma or WordNet has no reading of it."""
    w = word.lower()
    bases = _morphy_all(w, "n")
    if not bases or w in bases:
        return w
    return sorted(bases, key=lambda b: (len(b), b))[0]


@lru_cache(maxsize=100_000)
def closure_lemmas(noun: str) -> frozenset:
    """Every lemma (lower case, spaces for ``_``) of every noun sense of ``noun`` and of all their hypernyms
    (instance hypernyms included): the synonyms and more general names of the word."""
    if fast_path():  # the same sets, read from WordNet's data file (:mod:`.synsets`)
        names = closure(senses_of(noun, "n"), instance=True)[1]
        return frozenset(n.lower().replace("_", " ") for n in names)
    out: set = set()
    wn = _wn()
    seen: set = set()
    stack = list(wn.synsets(noun, "n"))
    while stack:
        s = stack.pop()
        if s in seen:
            continue
        seen.add(s)
        out.update(n.lower().replace("_", " ") for n in s.lemma_names())
        stack.extend(s.hypernyms())
        stack.extend(s.instance_hypernyms())
    return frozenset(out)


@lru_cache(maxsize=200_000)
def word_senses(word: str) -> frozenset:
    """Every WordNet synset (any part of speech) of ``word``, as (part of speech, offset) pairs: the synsets
    ``wordnet.synsets(word)`` gives, read from WordNet's lemma index without parsing the synsets themselves
    (the probes only compare these sets; a satellite adjective is one synset under "a" and "s")."""
    wn = _wn()
    index = getattr(wn, "_lemma_pos_offset_map", None)
    if index is None or not hasattr(wn, "_morphy"):  # another NLTK: the public, slower path
        return frozenset((s.pos().replace("s", "a"), s.offset()) for s in wn.synsets(word))
    low = word.lower()
    return frozenset(("a" if pos == "s" else pos, offset) for pos in ("n", "v", "a", "r", "s")
                     for form in wn._morphy(low, pos) for offset in index.get(form, {}).get(pos, ()))


def _first_sense_under(noun: str, ancestors: tuple[str, ...]) -> bool:
    """Whether the most frequent WordNet noun sense of ``noun`` is one of ``ancestors`` (synset names) or has one
    of them among its hypernyms (instance hypernyms included: the synsets of its ``hypernym_paths()``)."""
    if fast_path():
        first = senses_of(noun, "n")[:1]
        if not first:
            return False
        reach = closure(first, instance=True)[0]
        return any(synset_key(a) in reach for a in ancestors)
    senses = _wn().synsets(noun, "n")
    return bool(senses) and any(s.name() in ancestors for path in senses[0].hypernym_paths() for s in path)


@lru_cache(maxsize=100_000)
def is_physical_object(noun: str) -> bool:
    """Whether the most frequent WordNet noun sense of ``noun`` is a physical object."""
    return _first_sense_under(noun, ("object.n.01",))  # WordNet's physical_object.n.01 is object.n.01


@lru_cache(maxsize=100_000)
def is_person(noun: str) -> bool:
    """Whether the most frequent WordNet noun sense of ``noun`` is a person (no colour is ever given to one)."""
    return _first_sense_under(noun, ("person.n.01",))


def caption_nouns(text: str, tokens: Sequence[Token]) -> list[tuple[str, str, int, int]]:
    """The one-word nouns of a caption: (as written, base form, start, end) for each word unit whose only
    content token is tagged NN/NNS and is alphabetic."""
    return list(_caption_nouns(text, tuple(tokens)))


@lru_cache(maxsize=65536)
def _caption_nouns(text: str, tokens: tuple) -> tuple:  # every probe of a caption reads its nouns once
    out = []
    for info in analyze_units(text, tokens):
        if len(info.content) != 1:
            continue
        tok = info.content[0]
        if tok.tag in ("NN", "NNS") and tok.text.isalpha() and len(tok.text) > 1:
            out.append((tok.text, noun_base(tok.text), tok.idx, tok.idx + len(tok.text)))
    return tuple(out)


@lru_cache(maxsize=200_000)
def _word_forms(word: str) -> frozenset:
    return frozenset({word, *(b for p in ("n", "v", "a") for b in _morphy_all(word, p))}) if len(word) > 2 \
        else frozenset({word})


@lru_cache(maxsize=65536)
def text_forms(text: str) -> frozenset:
    """:func:`vlbench.perturbations.synonym_words.caption_word_forms` (every word with its WordNet base forms as
    noun, verb and adjective), read through a per-word cache: a word's forms are looked up once per run (and a
    caption's once: its image's words and ``replace-relation`` both read them)."""
    out: set = set()
    for w in _WORD.findall(text.lower()):
        out |= _word_forms(w)
    return frozenset(out)


_BY_ID: dict = {}


def by_identity(vocab: tuple, build):
    """``build(vocab)``, kept for this very tuple (looked up by identity: a vocabulary of hundreds of words is not
    hashed again at every caption); the last 16 are kept."""
    key = (id(vocab), build)
    got = _BY_ID.get(key)
    if got is None or got[0] is not vocab:
        if len(_BY_ID) >= 16:
            _BY_ID.clear()
        got = _BY_ID[key] = (vocab, build(vocab))
    return got[1]


def vocab_set(vocab: tuple) -> frozenset:
    """The words of ``vocab`` as a set (built once per vocabulary tuple)."""
    return by_identity(vocab, frozenset)


def _lowered(vocab: tuple) -> tuple:
    return tuple((w, w.lower()) for w in vocab)


@lru_cache(maxsize=16)
def _vocab_index(vocab: tuple) -> tuple:
    """For a vocabulary: lemma -> the words whose hypernym closure holds it, synset name -> the words that have
    it, and the words that are not one alphabetic run (never allowed). Built once per vocabulary, so an image's
    allowed words come from its nouns and senses instead of a test of every word."""
    by_closure: dict = {}
    by_sense: dict = {}
    bad = set()
    for w in vocab:
        low = w.lower()
        if _WORD.fullmatch(low) is None:
            bad.add(w)
            continue
        for lemma in closure_lemmas(low):
            by_closure.setdefault(lemma, set()).add(w)
        for sense in word_senses(low):
            by_sense.setdefault(sense, set()).add(w)
    return by_closure, by_sense, frozenset(bad)


class ImageWords:
    """What the captions of one image mention: ``forms`` (words and their base forms), ``nouns`` (noun base
    forms) and ``blocked`` (the nouns' synonyms and hypernyms)."""

    __slots__ = ("forms", "nouns", "blocked", "senses", "n_captions", "_allowed", "texts", "tokens", "cache")

    def __init__(self, texts: Sequence[str], parsed: dict):
        forms: set = set()
        nouns: set = set()
        for text in texts:
            forms |= text_forms(text)
            for tok in parsed.get(text, ()):
                if tok.tag in NOUN_TAGS and tok.text.isalpha():
                    nouns.add(noun_base(tok.text))
        blocked: set = set()
        for n in nouns:
            blocked |= closure_lemmas(n)
        senses: set = set()
        for w in forms:
            senses |= word_senses(w)
        self.forms, self.nouns, self.blocked = frozenset(forms), frozenset(nouns), frozenset(blocked)
        self.senses = frozenset(senses)
        self.n_captions = len(texts)
        self._allowed: dict = {}
        self.texts = tuple(texts)
        self.tokens = tuple(tuple(parsed.get(t, ())) for t in texts)
        self.cache: dict = {}  # what other probes compute once per image (:mod:`.changes`)

    def allowed(self, vocab: tuple) -> list:
        """The words of ``vocab`` that :meth:`allows`, in vocabulary order (computed once per image and list)."""
        hit = self._allowed.get(id(vocab))  # by identity: the same tuple for every caption of a run
        got = hit[1] if hit is not None and hit[0] is vocab else None
        if got is None:
            if not GENERAL_NOUNS.isdisjoint(self.forms):
                got = []
            else:  # the words allows() refuses, found from the image's side through the vocabulary's index
                by_closure, by_sense, refused = by_identity(vocab, _vocab_index)
                out = set(refused)
                for n in self.nouns:
                    out |= by_closure.get(n, set())
                for sense in self.senses:
                    out |= by_sense.get(sense, set())
                forms, blocked = self.forms, self.blocked
                got = [w for w, low in by_identity(vocab, _lowered)
                       if w not in out and low not in forms and low not in blocked]
            self._allowed[id(vocab)] = (vocab, got)
        return got

    def allows(self, word: str, *, thing: bool = True) -> bool:
        """Whether ``word`` (a noun base form or an adjective) is absent from every caption of the image and
        is no synonym, hypernym or hyponym of a noun they mention; ``thing``: a thing to deny or add (refused
        outright where a caption says "object", "stuff", ...), not an attribute."""
        w = word.lower()
        if w in self.forms or w in self.blocked or (thing and not GENERAL_NOUNS.isdisjoint(self.forms)):
            return False
        if _WORD.fullmatch(w) is None:
            return False
        return not (closure_lemmas(w) & self.nouns) and not (word_senses(w) & self.senses)


def object_vocabulary(texts_by_image: Iterable[Sequence[str]], parsed: dict, size: int = 300) -> tuple[str, ...]:
    """The dataset's object nouns, ranked by how many images mention them (see the module text)."""
    counts: Counter = Counter()
    singular: set = set()  # bases written as such somewhere (not "jean" from "jeans" only)
    for texts in texts_by_image:
        seen: set = set()
        for text in texts:
            for tok in parsed.get(text, ()):
                if tok.tag in ("NN", "NNS") and tok.text.isalpha() and len(tok.text) > 2:
                    base = noun_base(tok.text)
                    seen.add(base)
                    if tok.text.lower() == base:
                        singular.add(base)
        counts.update(seen)
    ranked = sorted(counts, key=lambda w: (-counts[w], w))
    out = [w for w in ranked if w in singular and w not in STOP_NOUNS and is_physical_object(w)]
    # specific objects only: a noun that is a WordNet hypernym of two or more other kept nouns (animal, vehicle,
    # structure) is left out, as "there is no structure" may be false of a picture whose captions name none
    kept = set(out)
    above: Counter = Counter()  # noun -> how many other kept nouns have it in their hypernym closure
    for v in out:
        above.update(w for w in closure_lemmas(v) & kept if w != v)
    general = {w for w, k in above.items() if k >= 2}
    return tuple(w for w in out if w not in general)[:size]
