"""The replace probes (SugarCrepe's replace kinds) and the antonym probe: one word of the caption replaced by one
that no caption of the image supports and that is never a WordNet synonym of it.

* ``replace-object``: an object noun -> an object of the vocabulary that no caption of the image mentions and
  that is no synonym, hypernym or hyponym of a noun they mention (the ``negation-absent`` rule), in the written
  number ("dogs" -> "cats") with the article fixed;
* ``replace-attribute``: an adjective before an object noun -> another of its class (:data:`ATTRIBUTE_CLASSES`:
  colour, size, age, state, material) that no caption of the image uses, that shares no WordNet synset with
  a word they use (nor is a shade of a colour they use), and that is not WordNet-similar to the original
  ("small" never becomes "tiny": :func:`.slots.adjective_cluster`);
* ``replace-relation``: a spatial preposition -> one of another cluster that no caption of the image puts before
  the same noun ("on the table" -> "under the table"), or an -ing verb -> a verb of the caption set's verbs that
  no caption of the image uses, that shares no synset with their words and is no hypernym / hyponym of their
  verbs;
* ``antonym-attribute``: an adjective -> a WordNet antonym of it ("a small dog" -> "a large dog") that no
  caption of the image uses and that is not also a synonym of it in another sense ("hungry" / "thirsty").
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache

from ..synonym_words import match_case, pluralize_word
from .absence import _SAME_COLOUR, ATTRIBUTES
from .probe import _Probe, edit_spans
from .slots import (
    COMMON_VERBS,
    LIGHT_VERBS,
    PREPOSITION_CLUSTERS,
    PREPOSITIONS,
    adjective_cluster,
    antonyms,
    attribute_slots,
    object_slots,
    preposition_slots,
    stated_relations,
    verb_base,
    verb_closure,
    verb_slots,
)
from .words import ImageWords, by_identity, text_forms, word_senses

#: adjective classes of ``replace-attribute``: a replacement comes from the original's own class
ATTRIBUTE_CLASSES = {"colour": ATTRIBUTES, "size": ("big", "small", "large", "little", "tiny", "huge", "giant"),
                     "age": ("young", "old", "new"), "state": ("empty", "full", "wet", "dry", "clean", "dirty",
                                                              "open", "closed"),
                     "material": ("wooden", "metal", "plastic", "glass", "stone")}
_CLASS_OF = {w: c for c, words in ATTRIBUTE_CLASSES.items() for w in words}


def _inflect(base: str, like_written: str, like_base: str) -> str:
    """``base`` in the number of ``like_written`` (plural when it is not its own base form), in its case."""
    word = pluralize_word(base) if like_written.lower() != like_base else base
    return match_case(like_written, word)


def image_relations(image: ImageWords) -> frozenset:
    """(preposition cluster, noun) pairs the captions of the image state (computed once per image)."""
    got = image.cache.get("relations")
    if got is None:
        got = image.cache["relations"] = frozenset(
            pair for text in image.texts for pair in stated_relations(text))
    return got


def image_verbs(image: ImageWords) -> frozenset:
    """The verb base forms the captions of the image use (any VB* tag)."""
    got = image.cache.get("verbs")
    if got is None:
        got = image.cache["verbs"] = frozenset(
            b for toks in image.tokens for t in toks if t.tag.startswith("VB") and t.text.isalpha()
            for b in [verb_base(t.text)] if b)
    return got


@lru_cache(maxsize=8)
def _verb_index(vocab: tuple) -> tuple:
    """For a verb vocabulary: synset -> the bases that have it, lemma -> the bases whose hypernym closure holds it
    (built once per vocabulary, so an image's refused verbs come from its own senses and verbs)."""
    by_sense: dict = {}
    by_closure: dict = {}
    for _w, b in vocab:
        for sense in word_senses(b):
            by_sense.setdefault(sense, set()).add(b)
        for lemma in verb_closure(b):
            by_closure.setdefault(lemma, set()).add(b)
    return by_sense, by_closure


def allowed_verbs(image: ImageWords, vocab: tuple) -> list:
    """The (written, base) verbs of ``vocab`` the image's captions do not support (computed once per image): not
    used by a caption, sharing no synset with their words, neither a hypernym nor a hyponym of their verbs."""
    key = ("allowed_verbs", id(vocab))  # by identity: the same tuple for every caption of a run
    hit = image.cache.get(key)
    got = hit[1] if hit is not None and hit[0] is vocab else None
    if got is None:
        verbs = image_verbs(image)
        by_sense, by_closure = _verb_index(vocab)
        refused: set = set()  # the image's verbs and all their hypernyms, and the bases the index refuses
        for v in verbs:
            refused |= verb_closure(v)
            refused |= by_closure.get(v, set())
        for sense in image.senses:
            refused |= by_sense.get(sense, set())
        got = [(w, b) for w, b in vocab if w not in image.forms and b not in image.forms and b not in refused]
        image.cache[key] = (vocab, got)
    return got


class ReplaceObject(_Probe):
    """An object noun of the caption replaced by an object no caption of the image mentions."""
    name, family = "replace-object", "replace"

    def make(self, text, tokens, image, vocab, rng):
        slots = object_slots(text, tuple(tokens))
        candidates = image.allowed(vocab) if slots else []
        if not candidates:
            return None
        _, written, base, s, e = rng.choice(slots)
        new = rng.choice(candidates)
        word = _inflect(new, written, base)
        return edit_spans(text, [(s, e, word)]), {
            "replaced": base, "as_written": written, "by": new, "written_as": word, "absent_from": image.n_captions,
            "why": f"'{written}' -> '{word}': '{new}' is in none of the image's {image.n_captions} captions, nor a "
                   f"synonym, hypernym or hyponym of a noun they mention"}


class ReplaceAttribute(_Probe):
    """An adjective before an object noun replaced by another of its class that no caption of the image uses."""
    name, family = "replace-attribute", "replace"

    def make(self, text, tokens, image, vocab, rng):
        options = []
        for written, s, e, noun in attribute_slots(text, tuple(tokens)):
            word = written.lower()
            cls = _CLASS_OF.get(word)
            if cls is None:
                continue
            cands = [c for c in ATTRIBUTE_CLASSES[cls] if c != word and image.allows(c, thing=False)
                     and not any(x in image.forms for x in _SAME_COLOUR.get(c, ()))
                     and not (word_senses(c) & word_senses(word))
                     and c not in adjective_cluster(word) and word not in adjective_cluster(c)]
            if cands:
                options.append((written, s, e, noun, cls, cands))
        if not options:
            return None
        written, s, e, noun, cls, cands = rng.choice(options)
        new = rng.choice(cands)
        return edit_spans(text, [(s, e, match_case(written, new))]), {
            "replaced": written.lower(), "by": new, "to": noun, "class": cls, "absent_from": image.n_captions,
            "why": f"'{written} {noun}' -> '{new} {noun}': no caption of the image says '{new}', and it is no "
                   f"WordNet synonym of '{written.lower()}'"}


class ReplaceRelation(_Probe):
    """A spatial preposition, or an -ing verb, replaced by one no caption of the image supports."""
    name, family = "replace-relation", "replace"

    def __init__(self, **params):
        super().__init__(**params)
        self.verbs: tuple = ()  # (written, base) pairs, set by prepare()

    def prepare(self, context):
        """The relation verbs: the -ing verbs of the caption set, by the number of images using them (the first
        150; ties alphabetical), or :data:`.slots.COMMON_VERBS` when the objects were given (``--text``)."""
        if context.get("given_vocabulary"):
            self.verbs = tuple((w, verb_base(w) or w) for w in COMMON_VERBS if w not in LIGHT_VERBS)
            return
        cached = context.setdefault("cache", {}).get("verbs")
        if cached is None:
            counts: Counter = Counter()
            for texts in context["texts_by_image"]:
                counts.update({w.lower() for t in texts for w, _s, _e, _b in verb_slots(t, context["parsed"].get(t,
                                                                                                              ()))})
            ranked = sorted(counts, key=lambda w: (-counts[w], w))[:150]
            cached = context["cache"]["verbs"] = tuple((w, verb_base(w)) for w in ranked)
        self.verbs = cached

    def make(self, text, tokens, image, vocab, rng):
        toks = tuple(tokens)
        relations = image_relations(image)
        mine = text_forms(text)  # never a word the caption already has ("walk outside outside a cafe")
        options: list[tuple] = []
        for written, s, e, noun in preposition_slots(text, toks):
            own = PREPOSITIONS[written.lower()]
            cands = [c[0] for c in PREPOSITION_CLUSTERS if c is not own and (c, noun) not in relations
                     and c[0] not in mine and not (word_senses(c[0]) & word_senses(written.lower()))]
            if cands:
                options.append(("preposition", written, s, e, noun, [(c, c) for c in cands]))
        verb_at = verb_slots(text, toks)
        verbs = allowed_verbs(image, self.verbs) if verb_at else []
        by_sense = by_identity(self.verbs, _verb_index)[0] if verb_at else {}
        for written, s, e, base in verb_at:
            shares: set = set()  # the relation verbs sharing a synset with this one (read from the index)
            for sense in word_senses(base):
                shares |= by_sense.get(sense, set())
            cands = [v for v in verbs if v[1] != base and v[1] not in shares]
            if cands:
                options.append(("verb", written, s, e, None, cands))
        if not options:
            return None
        kind, written, s, e, noun, cands = rng.choice(options)
        word, base = rng.choice(cands)
        meta = {"relation": kind, "replaced": written.lower(), "by": base, "written_as": word,
                "absent_from": image.n_captions}
        if kind == "preposition":
            meta["object"] = noun
            meta["why"] = (f"'{written} ... {noun}' -> '{word} ... {noun}': no caption of the image puts '{word}' or "
                           f"its near-synonyms before '{noun}'")
        else:
            meta["why"] = (f"'{written}' -> '{word}': no caption of the image uses '{base}', a synonym, hypernym or "
                           f"hyponym of it")
        return edit_spans(text, [(s, e, match_case(written, word))]), meta


class AntonymAttribute(_Probe):
    """An adjective replaced by a WordNet antonym that no caption of the image uses ("small" -> "large")."""
    name, family = "antonym-attribute", "antonym"

    def make(self, text, tokens, image, vocab, rng):
        options = []
        for written, s, e, noun in attribute_slots(text, tuple(tokens)):
            cands = [a for a in antonyms(written) if a not in image.forms  # "hungry" / "thirsty": also synonyms
                     and not (word_senses(a) & word_senses(written.lower()))]
            if cands:
                options.append((written, s, e, noun, cands))
        if not options:
            return None
        written, s, e, noun, cands = rng.choice(options)
        new = rng.choice(cands)
        return edit_spans(text, [(s, e, match_case(written, new))]), {
            "replaced": written.lower(), "by": new, "to": noun, "absent_from": image.n_captions,
            "why": f"'{written} {noun}' -> '{new} {noun}': WordNet gives '{new}' as an antonym of "
                   f"'{written.lower()}', and no caption of the image uses it"}
