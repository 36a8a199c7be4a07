"""The absence-based and negation probes: ``negation-absent``, ``negation-present``, ``half-truth-object`` and
``half-truth-attribute`` (see the package text)."""

from __future__ import annotations

from ..base import analyze_units
from ..synonym_words import COLOUR_WORDS
from .probe import _article, _deny, _ending, _Probe
from .slots import in_fixed_expression
from .words import STOP_NOUNS, ImageWords, caption_nouns, is_person, is_physical_object, vocab_set

#: colour words a half-truth may add (one spelling of each colour: grey/gray are one colour)
ATTRIBUTES = tuple(sorted(COLOUR_WORDS - {"grey", "golden", "navy", "tan", "teal", "maroon", "turquoise",
                                         "beige", "violet", "silver", "gold"}))
_SAME_COLOUR = {"gray": ("grey",), "yellow": ("golden", "gold"), "purple": ("violet",), "blue": ("navy", "teal",
                "turquoise"), "brown": ("tan", "beige", "maroon"), "white": ("silver",)}


def image_colours(image: ImageWords) -> list:
    """The colours no caption of the image says, nor a shade of (computed once per image)."""
    got = image.cache.get("colours")
    if got is None:
        got = image.cache["colours"] = [c for c in ATTRIBUTES if image.allows(c, thing=False)
                                        and not any(s in image.forms for s in _SAME_COLOUR.get(c, ()))]
    return got


class NegationAbsent(_Probe):
    """Deny an object no caption of the image mentions: a true statement is added (the probe should still
    match its image about as well; a model that reads "no X" as "X" drifts away)."""
    name, family = "negation-absent", "negation"
    effect = "true"
    defaults = {"form": "sentence"}

    def make(self, text, tokens, image, vocab, rng):
        candidates = image.allowed(vocab)
        if not candidates:
            return None
        obj = rng.choice(candidates)
        return _deny(text, obj, False, self.params["form"]), {
            "denied": obj, "absent_from": image.n_captions, "form": self.params["form"],
            "why": f"'{obj}' is in none of the image's {image.n_captions} captions, nor a synonym, hypernym or "
                   f"hyponym of a noun they mention: the added denial is true of the image"}


class NegationPresent(_Probe):
    """Deny an object the caption itself shows: the probe contradicts the caption (it must lose)."""
    name, family = "negation-present", "negation"
    defaults = {"form": "sentence"}

    def make(self, text, tokens, image, vocab, rng):
        known = vocab_set(vocab)
        nouns = [n for n in caption_nouns(text, tokens)
                 if (n[1] in known or is_physical_object(n[1])) and n[1] not in STOP_NOUNS
                 and not in_fixed_expression(text, n[2], n[3])]
        if not nouns:
            return None
        written, base, _, _ = rng.choice(nouns)
        plural = written.lower() != base
        return _deny(text, written.lower(), plural, self.params["form"]), {
            "denied": base, "as_written": written, "form": self.params["form"],
            "why": f"the caption says '{written}' and the probe denies it: a contradiction of the caption"}


class HalfTruthObject(_Probe):
    """The caption plus one object no caption of the image mentions, in a spatial relation ("next to")."""
    name, family = "half-truth-object", "half-truth"
    defaults = {"relation": "next to"}

    def make(self, text, tokens, image, vocab, rng):
        candidates = image.allowed(vocab)
        if not candidates:
            return None
        obj = rng.choice(candidates)
        body, end = _ending(text)
        rel = self.params["relation"]
        return f"{body} {rel} {_article(obj)} {obj}{end}", {
            "added": obj, "relation": rel, "absent_from": image.n_captions,
            "why": f"'{obj}' is in none of the image's {image.n_captions} captions: the added detail is "
                   f"unsupported"}


class HalfTruthAttribute(_Probe):
    """A colour no caption of the image mentions, put before one object noun of the caption that has no
    modifier yet ("a dog" -> "a purple dog"); never before a person noun."""
    name, family = "half-truth-attribute", "half-truth"

    def make(self, text, tokens, image, vocab, rng):
        colours = image_colours(image)
        if not colours:
            return None
        known = vocab_set(vocab)
        infos = analyze_units(text, tuple(tokens))
        nouns = {(s, e): (w, b) for w, b, s, e in caption_nouns(text, tokens)}
        slots = []
        for k in range(1, len(infos)):
            u, prev = infos[k].unit, infos[k - 1]
            hit = nouns.get((u.start, u.end))
            if hit is None or hit[1] in STOP_NOUNS or is_person(hit[1]) or in_fixed_expression(text, u.start, u.end):
                continue
            if not (hit[1] in known or is_physical_object(hit[1])):
                continue
            if prev.tag in ("DT", "CD", "PRP$") and text[prev.unit.end:u.start].strip() == "":
                slots.append((k, hit))
        if not slots:
            return None
        k, (written, base) = rng.choice(slots)
        colour = rng.choice(colours)
        u, prev = infos[k].unit, infos[k - 1].unit
        new = text[:u.start] + colour + " " + text[u.start:]
        art = prev.text
        if art.lower() in ("a", "an"):  # keep the article right for the colour: "an orange"
            want = _article(colour)
            want = want.capitalize() if art[:1].isupper() else want
            new = new[:prev.start] + want + new[prev.end:]
        return new, {"added": colour, "to": base, "absent_from": image.n_captions,
                     "why": f"no caption of the image says '{colour}' (nor a shade of it): an unsupported attribute"}


