"""Typos: character swap, missing character, extra character, nearby-keyboard character.

Every edit happens inside a *word*: a maximal run of letters (Unicode ``[^\\W\\d_]+``) of at least
``min_word_len`` letters. Each edit site (a character position inside a word, see each class) is drawn
uniformly over all sites of the caption, so a longer word is proportionally more likely to get the
typo (as in the ``typo`` package the authors used). With ``edits`` > 1 the edits go to distinct
words. Nothing outside the edited word changes: no re-tokenization, no whitespace changes.

The keyboard neighbours (:data:`QWERTY`) are those of nlpaug's English QWERTY map
(``nlpaug/res/char/keyboard/en.json``) restricted to letters, with nlpaug's broken ``u`` entry fixed
(it lists ``" t"`` and lacks ``y``): keys in the same row one column apart, or in the row above or
below at most one column apart. We draw the edits ourselves (nlpaug's augmenters use the global
``random`` / ``numpy`` state, and its detokenizer rewrites spacing and punctuation, so the "exactly one
edit" guarantee could not hold); the map is checked against nlpaug's file in the tests.
"""

from __future__ import annotations

import math
import re
import string

from ..errors import VlbenchError
from .base import BasePerturbation, CaptionRNG, check_choice, check_int

WORD_RE = re.compile(r"[^\W\d_]+")

QWERTY_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")


def _qwerty_neighbours() -> dict[str, tuple[str, ...]]:
    pos = {ch: (r, c) for r, row in enumerate(QWERTY_ROWS) for c, ch in enumerate(row)}
    out = {}
    for ch, (r, c) in pos.items():
        out[ch] = tuple(sorted(o for o, (r2, c2) in pos.items() if o != ch and (
            (r2 == r and abs(c2 - c) == 1) or (abs(r2 - r) == 1 and abs(c2 - c) <= 1))))
    return out


QWERTY: dict[str, tuple[str, ...]] = _qwerty_neighbours()


def _case_like(ch: str, upper: bool) -> str:
    """``ch`` in upper or lower case, unless that would change its length (e.g. German sharp s)."""
    r = ch.upper() if upper else ch.lower()
    return r if len(r) == 1 else ch


class _Typo(BasePerturbation):
    family = "typos"
    version = "1.0"
    defaults = {"edits": 1, "rate": None, "min_word_len": 2}

    def validate(self) -> None:
        check_int(self.name, "edits", self.params["edits"], 1)
        check_int(self.name, "min_word_len", self.params["min_word_len"], 1)
        rate = self.params["rate"]
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate <= 1):
            raise VlbenchError(f"perturbation {self.name!r}: rate={rate!r} must be a number in (0, 1]",
                               "rate is the fraction of eligible words to edit; leave it unset for 'edits'")

    # subclasses: the edit sites of a word, and the edit at one site
    def sites(self, word: str) -> list[int]:
        raise NotImplementedError

    def edit(self, word: str, i: int, rng: CaptionRNG) -> str:
        raise NotImplementedError

    def apply(self, text, *, rng, tokens=None):
        min_len = self.params["min_word_len"]
        words = [(m.start(), m.group()) for m in WORD_RE.finditer(text) if len(m.group()) >= min_len]
        site_lists = [self.sites(w) for _, w in words]
        candidates = [k for k, s in enumerate(site_lists) if s]
        if not candidates:
            return None
        rate = self.params["rate"]
        n_edits = max(1, math.ceil(rate * len(candidates))) if rate is not None else self.params["edits"]
        n_edits = min(n_edits, len(candidates))
        edits: dict[int, str] = {}
        for _ in range(n_edits):
            # draw one site uniformly over the sites of the words not edited yet
            total = sum(len(site_lists[k]) for k in candidates)
            r = rng.randbelow(total)
            for k in candidates:
                if r < len(site_lists[k]):
                    break
                r -= len(site_lists[k])
            start, word = words[k]
            edits[k] = self.edit(word, site_lists[k][r], rng)
            candidates.remove(k)
        out = text
        for k in sorted(edits, reverse=True):
            start, word = words[k]
            out = out[:start] + edits[k] + out[start + len(word):]
        return out


class CharSwap(_Typo):
    """Swap two adjacent letters of a word (``London`` -> ``Lnodon``).

    Sites: positions i with letters i and i+1 different (case-insensitively), so every swap changes
    the word. Letter case stays with the position (``London`` swapped at 0 -> ``Olndon``), as in the
    ``typo`` package and nlpaug.
    """

    name = "char-swap"

    def sites(self, word):
        return [i for i in range(len(word) - 1) if word[i].lower() != word[i + 1].lower()]

    def edit(self, word, i, rng):
        a, b = word[i], word[i + 1]
        return word[:i] + _case_like(b, a.isupper()) + _case_like(a, b.isupper()) + word[i + 2:]


class MissingChar(_Typo):
    """Delete one letter of a word (``floating`` -> ``floatng``). Sites: every letter."""

    name = "missing-char"

    def sites(self, word):
        return list(range(len(word)))

    def edit(self, word, i, rng):
        return word[:i] + word[i + 1:]


class ExtraChar(_Typo):
    """Insert one letter into a word, right after a letter of it (``floating`` -> ``floatingg``).

    Sites: every letter (the new letter goes after it, so never before a word's first letter).
    ``source="random"`` (default): a letter drawn uniformly from a-z; ``source="keyboard"``: a QWERTY
    neighbour of the letter it follows (a fat-finger insertion, closer to the ``typo`` package the
    authors used). The new letter is upper case only inside an all-upper-case word.
    """

    name = "extra-char"
    defaults = {**_Typo.defaults, "source": "random"}

    def validate(self):
        super().validate()
        check_choice(self.name, "source", self.params["source"], ("random", "keyboard"))

    def sites(self, word):
        if self.params["source"] == "keyboard":
            return [i for i, ch in enumerate(word) if ch.lower() in QWERTY]
        return list(range(len(word)))

    def edit(self, word, i, rng):
        if self.params["source"] == "keyboard":
            ch = rng.choice(QWERTY[word[i].lower()])
        else:
            ch = string.ascii_lowercase[rng.randbelow(26)]
        if len(word) > 1 and word.isupper():
            ch = ch.upper()
        return word[:i + 1] + ch + word[i + 1:]


class NearbyChar(_Typo):
    """Replace one letter by a QWERTY keyboard neighbour, keeping its case (``plane`` -> ``plsne``).

    Sites: letters a-z / A-Z (letters outside the QWERTY map, e.g. accented ones, are never chosen).
    """

    name = "nearby-char"

    def sites(self, word):
        return [i for i, ch in enumerate(word) if ch.lower() in QWERTY]

    def edit(self, word, i, rng):
        ch = word[i]
        new = rng.choice(QWERTY[ch.lower()])
        return word[:i] + _case_like(new, ch.isupper()) + word[i + 1:]
