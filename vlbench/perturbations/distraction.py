"""Distraction: add a tautology ("and true is true" / "and false is false") to the caption.

Placement (``position="before-final-punctuation"``, default): the caption is split as
``body + gap + final + trail`` where ``final`` is the trailing run of sentence-final punctuation
(``. ! ? …``) and ``gap`` / ``trail`` the whitespace before / after it; the result is
``body + " " + phrase + gap + final + trail``. So "... the London Bridge." becomes
"... the London Bridge and true is true." (docs/perturbations.md), "A dog" becomes
"A dog and true is true", and a caption ending in a closing quote or bracket gets the phrase after it.
``position="end"``: ``caption.rstrip() + " " + phrase`` (after any final punctuation).

``compat=True`` reproduces the authors' code exactly: ``caption.strip('.') + ' ' + phrase + '.'`` with
their phrase "and true it true" (sic) for distraction-true and "and false is false" for
distraction-false (strips periods at both ends, always ends in a period, even after "!" or "?").
"""

from __future__ import annotations

import re

from ..errors import VlbenchError
from .base import BasePerturbation, check_bool, check_choice

_SPLIT = re.compile(r"^(.*?)(\s*)([.!?\u2026]*)(\s*)$", re.S)


def insert_phrase(text: str, phrase: str, position: str = "before-final-punctuation") -> str:
    if position == "end":
        return text.rstrip() + " " + phrase
    m = _SPLIT.match(text)
    assert m is not None  # every group of _SPLIT may be empty: it matches any text
    body, gap, final, trail = m.groups()
    return body + " " + phrase + gap + final + trail


class _Distraction(BasePerturbation):
    family = "distraction"
    version = "1.0"
    phrase = ""
    compat_phrase = ""

    def validate(self):
        check_choice(self.name, "position", self.params["position"], ("before-final-punctuation", "end"))
        check_bool(self.name, "compat", self.params["compat"])
        p = self.params["phrase"]
        if not isinstance(p, str) or not p.strip():
            raise VlbenchError(f"perturbation {self.name!r}: phrase must be a non-empty string",
                               f"leave it unset for {self.phrase!r}")

    def apply(self, text, *, rng, tokens=None):
        if self.params["compat"]:
            return text.strip(".") + " " + self.compat_phrase + "."
        return insert_phrase(text, self.params["phrase"].strip(), self.params["position"])


class DistractionTrue(_Distraction):
    """Add "and true is true" before the final punctuation."""

    name = "distraction-true"
    phrase = "and true is true"
    compat_phrase = "and true it true"  # the authors' string, typo included
    defaults = {"phrase": phrase, "position": "before-final-punctuation", "compat": False}


class DistractionFalse(_Distraction):
    """Add "and false is false" before the final punctuation."""

    name = "distraction-false"
    phrase = "and false is false"
    compat_phrase = "and false is false"
    defaults = {"phrase": phrase, "position": "before-final-punctuation", "compat": False}
