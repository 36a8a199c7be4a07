"""Make meaning-changing probes of captions grouped by image (see the package text for each probe).

:func:`make_probes` parses every caption once (the spaCy tagging the meaning-preserving perturbations use,
:func:`vlbench.perturbations.engine.parse`), builds the object vocabulary and each image's mentioned words
(:mod:`.words`), then asks each probe for each caption. A probe draws from a :class:`CaptionRNG` private to
(seed, probe name, caption id), so a caption's probe does not depend on the other images or the order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ...errors import VlbenchError
from ..base import CaptionRNG, PerturbedSet, analyze_units, merge_params, usable_text
from ..synonym_words import COLOUR_WORDS, in_fixed_expression, wants_an
from .words import (
    COCO_OBJECTS,
    STOP_NOUNS,
    ImageWords,
    caption_nouns,
    is_person,
    is_physical_object,
    object_vocabulary,
)

KIND = "sensitivity"
FORMS = ("sentence", "clause", "negation-first")
#: probes whose "absent" needs the other captions of the image (refused on one caption per image)
NEEDS_ABSENCE = frozenset({"negation-absent", "half-truth-object", "half-truth-attribute"})
#: colour words a half-truth may add (one spelling of each colour: grey/gray are one colour)
ATTRIBUTES = tuple(sorted(COLOUR_WORDS - {"grey", "golden", "navy", "tan", "teal", "maroon", "turquoise",
                                         "beige", "violet", "silver", "gold"}))
_SAME_COLOUR = {"gray": ("grey",), "yellow": ("golden", "gold"), "purple": ("violet",), "blue": ("navy", "teal",
                "turquoise"), "brown": ("tan", "beige", "maroon"), "white": ("silver",)}


@dataclass
class ProbeSet(PerturbedSet):
    """A :class:`PerturbedSet` of a meaning-changing probe: ``kind`` "sensitivity", and per caption ``meta``
    (what changed and why it changes the meaning; None where no probe was made) and ``verified`` (False where
    the image had one caption, so "absent" was checked against that caption only)."""

    meta: list = field(default_factory=list)
    verified: list = field(default_factory=list)
    kind: str = KIND

    def describe(self) -> dict:
        out = super().describe()
        out["kind"] = self.kind
        out["changes_meaning"] = True
        out["n_unverified"] = sum(1 for v, a in zip(self.verified, self.applicable) if a and not v)
        return out

    def rows(self, originals, images=None):
        rows = super().rows(originals, images)
        for row, m, v in zip(rows, self.meta, self.verified):
            row["meta"] = m
            row["verified"] = v
        return rows


def _ending(text: str) -> tuple[str, str]:
    """The caption without its final punctuation and spaces, and that punctuation ("." when none)."""
    body = text.rstrip()
    end = ""
    while body and body[-1] in ".!?":
        end = body[-1] + end
        body = body[:-1]
    return body.rstrip(), end or "."


def _sentence(text: str) -> str:
    body, end = _ending(text)
    return body + end


def _deny(text: str, word: str, plural: bool, form: str) -> str:
    be = "are" if plural else "is"
    if form == "sentence":
        return f"{_sentence(text)} There {be} no {word}."
    if form == "clause":
        body, end = _ending(text)
        return f"{body}, but no {word}{end}"
    s = _sentence(text)
    return f"There {be} no {word}. {s[:1].upper()}{s[1:]}"


def _article(word: str) -> str:
    return "an" if wants_an(word) else "a"


class _Probe:
    name = ""
    family = ""
    version = "1.0"
    kind = KIND  # never "invariance": its results are never averaged with the meaning-preserving families
    changes_meaning = True
    #: what the probe makes of the caption: "false" (it must lose to the original: scored pairwise) or "true" (a
    #: true addition, e.g. a denial of an absent object: scored as retrieval queries); vlbench/pipeline/sensitivity
    effect = "false"
    defaults: dict = {}

    def __init__(self, **params):
        self.params = merge_params(self.name, self.defaults, params)
        if "form" in self.params and self.params["form"] not in FORMS:
            raise VlbenchError(f"probe {self.name!r}: form={self.params['form']!r} is not allowed",
                               f"use one of {', '.join(FORMS)}")

    def make(self, text: str, tokens, image: ImageWords, vocab: tuple, rng: CaptionRNG) -> tuple[str, dict] | None:
        raise NotImplementedError


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
        nouns = [n for n in caption_nouns(text, tokens)
                 if (n[1] in vocab or is_physical_object(n[1])) and n[1] not in STOP_NOUNS
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
        infos = analyze_units(text, tuple(tokens))
        nouns = {(s, e): (w, b) for w, b, s, e in caption_nouns(text, tokens)}
        slots = []
        for k in range(1, len(infos)):
            u, prev = infos[k].unit, infos[k - 1]
            hit = nouns.get((u.start, u.end))
            if hit is None or hit[1] in STOP_NOUNS or is_person(hit[1]) or in_fixed_expression(text, u.start, u.end):
                continue
            if not (hit[1] in vocab or is_physical_object(hit[1])):
                continue
            if prev.tag in ("DT", "CD", "PRP$") and text[prev.unit.end:u.start].strip() == "":
                slots.append((k, hit))
        colours = [c for c in ATTRIBUTES
                   if image.allows(c, thing=False) and not any(s in image.forms for s in _SAME_COLOUR.get(c, ()))]
        if not slots or not colours:
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


PROBES: dict[str, type[_Probe]] = {p.name: p for p in (NegationAbsent, NegationPresent, HalfTruthObject,
                                                       HalfTruthAttribute)}


def _group(images: Sequence[str]) -> dict[str, list[int]]:
    by: dict[str, list[int]] = {}
    for i, img in enumerate(images):
        by.setdefault(str(img), []).append(i)
    return by


def check_absence_possible(names: Sequence[str], images: Sequence[str], unverified: bool) -> None:
    """Refuse an absence-based probe when an image has one caption only (unless ``unverified``)."""
    asked = [n for n in names if n in NEEDS_ABSENCE]
    if not asked or unverified:
        return
    by = _group(images)
    single = [img for img, idx in by.items() if len(idx) < 2]
    if single:
        raise VlbenchError(
            f"{', '.join(asked)}: {len(single)} of {len(by)} images have one caption only (e.g. {single[0]!r}), so "
            f"'absent from every caption of the image' cannot be checked",
            "use a caption set with several captions per image, or pass unverified=True to make the probes "
            "labelled unverified (absence checked against the one caption); negation-present needs no other "
            "captions")


def make_probes(captions: Sequence[str], caption_ids: Sequence[str], images: Sequence[str],
                names: Sequence[str] | str = tuple(PROBES), *, seed: int = 0, params: dict | None = None,
                vocabulary: Sequence[str] | None = None, vocabulary_size: int = 300, unverified: bool = False,
                parsed: dict | None = None, batch_size: int = 512) -> dict[str, ProbeSet]:
    """Each named probe of each caption; ``images[i]`` names caption i's image (its other captions decide
    what is absent). ``vocabulary``: the objects that may be denied or added (default: the caption set's own,
    :func:`.words.object_vocabulary`). ``unverified``: allow images with one caption (their probes are
    labelled ``verified=False``) instead of refusing. Returns name -> :class:`ProbeSet`."""
    from ..engine import parse  # lazy: spaCy

    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in names if n not in PROBES]
    if unknown:
        raise VlbenchError(f"unknown probe {unknown[0]!r}", f"use one of {', '.join(PROBES)}")
    captions, caption_ids, images = list(captions), [str(c) for c in caption_ids], [str(i) for i in images]
    if not len(captions) == len(caption_ids) == len(images):
        raise VlbenchError(f"{len(captions)} captions, {len(caption_ids)} ids and {len(images)} images",
                           "pass one id and one image name per caption")
    if len(set(caption_ids)) != len(caption_ids):
        raise VlbenchError("caption ids are not unique", "caption ids seed the probes and must be unique")
    check_absence_possible(names, images, unverified)
    params = dict(params or {})
    objs = [PROBES[n](**params.get(n, {})) for n in names]
    usable = [usable_text(c) for c in captions]
    if parsed is None:
        parsed = parse([c for c, u in zip(captions, usable) if u], batch_size=batch_size)
    by = _group(images)
    texts_by_image = {img: [captions[i] for i in idx if usable[i]] for img, idx in by.items()}
    vocab = tuple(vocabulary) if vocabulary is not None else \
        object_vocabulary(texts_by_image.values(), parsed, vocabulary_size)
    words = {img: ImageWords(t, parsed) for img, t in texts_by_image.items()}
    out: dict[str, ProbeSet] = {}
    for obj in objs:
        texts: list[str] = []
        applicable: list[bool] = []
        meta: list[dict | None] = []
        verified: list[bool] = []
        for text, cid, img, ok in zip(captions, caption_ids, images, usable):
            made = None
            if ok:
                rng = CaptionRNG.for_caption(seed, obj.name, cid)
                made = obj.make(text, parsed.get(text, ()), words[img], vocab, rng)
            if made is None or made[0] == text:
                texts.append(text if isinstance(text, str) else "")
                applicable.append(False)
                meta.append(None)
            else:
                texts.append(made[0])
                applicable.append(True)
                meta.append(made[1])
            verified.append(words[img].n_captions >= 2 or obj.name not in NEEDS_ABSENCE)
        out[obj.name] = ProbeSet(name=obj.name, family=obj.family, version=obj.version, params=dict(obj.params),
                                 kind=obj.kind,
                                 seed=seed, caption_ids=list(caption_ids), texts=texts, applicable=applicable,
                                 n_empty_input=sum(1 for u in usable if not u), meta=meta, verified=verified,
                                 resources={"vocabulary": f"{len(vocab)} objects" if vocabulary is None
                                            else f"{len(vocab)} given objects"})
    return out


def probe_text(text: str, names: Sequence[str] | str = tuple(PROBES), *, seed: int = 0,
               params: dict | None = None) -> dict[str, ProbeSet]:
    """Probes of one caption alone (``vlbench perturb --text``): the vocabulary is :data:`.words.COCO_OBJECTS`
    and absence is checked against this caption only, so every absence-based probe is ``verified=False``."""
    return make_probes([text], ["text#0"], ["text"], names, seed=seed, params=params, vocabulary=COCO_OBJECTS,
                       unverified=True)
