"""The swap probes (SugarCrepe's and ARO's swaps) and the count probe.

* ``swap-object``: two object nouns of the caption exchanged, each in the number of the slot it moves to ("a dog
  chasing two cats" -> "a cat chasing two dogs"); refused when the two are the same word, share a WordNet synset
  or one is a hypernym of the other, or are only coordinated ("a dog and a cat": the swap says the same);
* ``swap-attribute``: the adjectives of two different object nouns exchanged ("a white dog and a black cat" ->
  "a black dog and a white cat"); refused when the adjectives are equal or share a synset, or the nouns are equal;
* ``count``: a number word changed ("two dogs" -> "three dogs"), or "a"/"an"/"one" before a singular object made
  a number with the noun pluralised ("a dog sits" -> "three dogs sit"); never to a count that any caption of the
  image gives (number words, digits, "couple"/"pair": 2).
"""

from __future__ import annotations

import re

from ..synonym_words import _morphy_all, match_case, pluralize_word
from .probe import _Probe, edit_spans
from .slots import NUMBER_NAMES, attribute_slots, caption_counts, count_slots, object_slots
from .words import ImageWords, closure_lemmas, word_senses

_AGREE = {"is": "are", "was": "were", "has": "have", "does": "do"}


def _related(a: str, b: str) -> bool:
    """Whether two base forms are one word, share a WordNet synset, or one is a hypernym of the other."""
    return a == b or bool(word_senses(a) & word_senses(b)) or a in closure_lemmas(b) or b in closure_lemmas(a)


def _inflect(base: str, plural: bool, like: str) -> str:
    return match_case(like, pluralize_word(base) if plural else base)


_LINKS = frozenset({"and", "or", "a", "an", "the"})


def _coordinated(text: str, a: tuple, b: tuple) -> bool:
    """Whether two object slots in the same number are joined only by "and"/"or" and articles ("a dog and a
    cat"): exchanging them says the same thing, so they are never swapped."""
    same_number = (a[1].lower() != a[2]) == (b[1].lower() != b[2])
    between = re.findall(r"[^\W\d_]+|[^\w\s]", text[a[4]:b[3]].lower())
    return same_number and set(between) <= _LINKS | {","}


class SwapObject(_Probe):
    """Two object nouns of the caption exchanged."""
    name, family = "swap-object", "swap"

    def make(self, text, tokens, image, vocab, rng):
        slots = object_slots(text, tuple(tokens))
        pairs = [(a, b) for i, a in enumerate(slots) for b in slots[i + 1:]
                 if not _related(a[2], b[2]) and not _coordinated(text, a, b)]
        if not pairs:
            return None
        (_, wa, ba, sa, ea), (_, wb, bb, sb, eb) = rng.choice(pairs)
        na = _inflect(bb, wa.lower() != ba, wa)  # b's noun in a's slot
        nb = _inflect(ba, wb.lower() != bb, wb)
        return edit_spans(text, [(sa, ea, na), (sb, eb, nb)]), {
            "swapped": [wa, wb], "bases": [ba, bb], "written_as": [na, nb],
            "why": f"'{wa}' and '{wb}' exchange places: the same words, a different scene ('{ba}' and '{bb}' "
                   f"are not synonyms)"}


class SwapAttribute(_Probe):
    """The adjectives of two different object nouns exchanged."""
    name, family = "swap-attribute", "swap"

    def make(self, text, tokens, image, vocab, rng):
        slots = attribute_slots(text, tuple(tokens))
        pairs = [(a, b) for i, a in enumerate(slots) for b in slots[i + 1:]
                 if a[3] != b[3] and a[0].lower() != b[0].lower()
                 and not (word_senses(a[0].lower()) & word_senses(b[0].lower()))]
        if not pairs:
            return None
        (wa, sa, ea, na), (wb, sb, eb, nb) = rng.choice(pairs)
        new_a, new_b = match_case(wa, wb.lower()), match_case(wb, wa.lower())
        return edit_spans(text, [(sa, ea, new_a), (sb, eb, new_b)]), {
            "swapped": [wa.lower(), wb.lower()], "nouns": [na, nb],
            "why": f"'{wa} {na}' and '{wb} {nb}' become '{wb.lower()} {na}' and '{wa.lower()} {nb}': the "
                   f"attributes move to the other object"}


def _agree(verb: str) -> str:
    """The plural present of a 3rd-person singular verb ("is" -> "are", "sits" -> "sit")."""
    low = verb.lower()
    if low in _AGREE:
        return match_case(verb, _AGREE[low])
    bases = _morphy_all(low, "v")
    return match_case(verb, sorted(bases, key=lambda b: (len(b), b))[0]) if bases else verb


def image_counts(image: ImageWords) -> frozenset:
    got = image.cache.get("counts")
    if got is None:
        got = image.cache["counts"] = caption_counts(image.texts)
    return got


class Count(_Probe):
    """A count changed to one no caption of the image gives."""
    name, family = "count", "count"
    defaults = {"max_count": 5}

    def make(self, text, tokens, image, vocab, rng):
        given = image_counts(image)
        top = int(self.params["max_count"])
        options = []
        for slot in count_slots(text, tuple(tokens)):
            old = slot[0]
            cands = [n for n in range(2, max(top, 2) + 1) if n != old and n not in given]
            if cands:
                options.append((slot, cands))
        if not options:
            return None
        (old, ds, de, written, base, ns, ne, verb), cands = rng.choice(options)
        new = rng.choice(cands)
        det = text[ds:de]
        edits = [(ds, de, match_case(det, NUMBER_NAMES[new]))]
        noun = written
        if old == 1:
            noun = match_case(written, pluralize_word(base))
            edits.append((ns, ne, noun))
            if verb is not None:
                edits.append((verb[0], verb[1], _agree(verb[2])))
        return edit_spans(text, edits), {
            "count_from": old, "count_to": new, "noun": base, "as_written": det, "written_as": NUMBER_NAMES[new],
            "why": f"'{det} {written}' -> '{NUMBER_NAMES[new]} {noun}': no caption of the image gives {new}"}
