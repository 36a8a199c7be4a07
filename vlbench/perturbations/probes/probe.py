"""What every meaning-changing probe shares: the :class:`ProbeSet` result, the :class:`_Probe` base class and the
small text helpers (the caption's ending, the a/an article, span edits with the article kept right)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import VlbenchError
from ..base import CaptionRNG, PerturbedSet, merge_params
from ..synonym_words import match_case, wants_an
from .words import ImageWords

KIND = "sensitivity"
FORMS = ("sentence", "clause", "negation-first")


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



def edit_spans(text: str, edits) -> str:
    """``text`` with each ``(start, end, new)`` span replaced (spans do not overlap); an "a"/"an" written
    directly before a replaced span is made right for the new word ("a dog" -> "an elephant")."""
    out = text
    spans = [(s, e) for s, e, _ in edits]
    for start, end, new in sorted(edits, key=lambda e: -e[0]):
        out = out[:start] + new + out[end:]
        k = start
        while k > 0 and out[k - 1] == " ":
            k -= 1
        j = k
        while j > 0 and out[j - 1].isalpha():
            j -= 1
        art = out[j:k]
        if art.lower() in ("a", "an") and k < start and (j == 0 or not out[j - 1].isalnum()) \
                and not any(s < k and j < e for s, e in spans):
            out = out[:j] + match_case(art, _article(new)) + out[k:]
    return out


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


    def prepare(self, context: dict) -> None:
        """Called once per :func:`.make.make_probes` call, before any caption, with what is computed once for
        the whole caption set (``texts_by_image``, ``parsed``, ``vocabulary``); a probe that needs a dataset-wide
        list builds it here."""
