"""Word order (after Yuksekgonul et al., ICLR 2023, "When and why vision-language models behave like
bags-of-words", the ARO perturbations).

All five move *word units* (:func:`vlbench.perturbations.base.word_units`: whitespace-delimited chunks
without the punctuation at their ends; ``man's`` and ``t-shirt`` are one unit). Punctuation at chunk
ends and all whitespace stay where they are, so the final period stays final and a comma stays after
the same slot; only the words in the slots move. Words are moved verbatim (no re-casing: a capitalized
first word may end up mid-sentence, as in ARO's code).

A unit is a noun / adjective when its Penn tag (:func:`~vlbench.perturbations.base.unit_tag`: the spaCy
``tag_`` of its last content token) is NN* / JJ*.

Re-draw rule: a shuffle is applicable iff some arrangement gives a different caption (the units to
move are not all identical text). A permutation that reproduces the caption is rejected and a new one
drawn from the same per-caption stream, so the accepted result is uniform over the arrangements that
change the caption, and an applicable shuffle always changes it.
"""

from __future__ import annotations

from .base import ADJ_TAGS, NOUN_TAGS, BasePerturbation, analyze_units, check_choice, render_units, word_units

_MAX_DRAWS = 10_000  # P(identity) <= 1/2 per draw when applicable: never reached in practice


def _permute_groups(words: list[str], groups: list[list[int]], rng) -> list[str] | None:
    """Permute ``words`` within each index group; re-draw until the sequence changes."""
    if not any(len({words[i] for i in g}) > 1 for g in groups):
        return None
    for _ in range(_MAX_DRAWS):
        out = list(words)
        for g in groups:
            if len(g) > 1:
                perm = rng.permutation(len(g))
                for dst, src in zip(g, perm):
                    out[dst] = words[g[src]]
        if out != words:
            return out
    raise RuntimeError("shuffle did not change an applicable caption")  # pragma: no cover


def trigrams(n: int) -> list[list[int]]:
    """Consecutive index blocks of 3 (the last one may be shorter), as ARO's ``get_trigrams``."""
    return [list(range(i, min(i + 3, n))) for i in range(0, n, 3)]


class _Shuffle(BasePerturbation):
    family = "word-order"
    version = "1.0"

    def groups(self, units, tags) -> list[list[int]]:
        raise NotImplementedError

    def apply(self, text, *, rng, tokens=None):
        units = word_units(text)
        words = [u.text for u in units]
        tags = None
        if self.needs_parse:
            tags = [info.tag for info in analyze_units(text, tuple(tokens or ()))]
        new = self.shuffle(words, tags, rng)
        return None if new is None else render_units(text, units, new)

    def shuffle(self, words, tags, rng):
        return _permute_groups(words, self.groups(words, tags), rng)


class ShuffleNounsAdjectives(_Shuffle):
    """Shuffle the nouns among the noun slots and the adjectives among the adjective slots
    (``mode="separate"``, ARO's code), or nouns and adjectives together over their joint slots
    (``mode="joint"``, as docs/perturbations.md draws it). Every other word stays in place."""

    name = "shuffle-nouns-adjectives"
    needs_parse = True
    resources = ("spacy",)
    defaults = {"mode": "separate"}

    def validate(self):
        check_choice(self.name, "mode", self.params["mode"], ("separate", "joint"))

    def groups(self, words, tags):
        nouns = [i for i, t in enumerate(tags) if t in NOUN_TAGS]
        adjs = [i for i, t in enumerate(tags) if t in ADJ_TAGS]
        if self.params["mode"] == "joint":
            return [sorted(nouns + adjs)]
        return [nouns, adjs]


class ShuffleAllWords(_Shuffle):
    """Shuffle all words."""

    name = "shuffle-all-words"

    def groups(self, words, tags):
        return [list(range(len(words)))]


class ShuffleAllButNounsAdjectives(_Shuffle):
    """Keep nouns and adjectives in their positions; shuffle all other words among the other slots."""

    name = "shuffle-all-but-nouns-adjectives"
    needs_parse = True
    resources = ("spacy",)

    def groups(self, words, tags):
        return [[i for i, t in enumerate(tags) if t not in NOUN_TAGS and t not in ADJ_TAGS]]


class ShuffleWithinTrigrams(_Shuffle):
    """Cut the words into consecutive trigrams (the last may be shorter) and shuffle inside each."""

    name = "shuffle-within-trigrams"

    def groups(self, words, tags):
        return trigrams(len(words))


class ShuffleTrigrams(_Shuffle):
    """Cut the words into consecutive trigrams (the last may be shorter) and shuffle the trigrams as
    blocks (their inner order kept); the words are then poured back into the word slots."""

    name = "shuffle-trigrams"

    def shuffle(self, words, tags, rng):
        blocks = [[words[i] for i in b] for b in trigrams(len(words))]
        full = [tuple(b) for b in blocks if len(b) == 3]
        short = [b for b in blocks if len(b) < 3]
        # a different concatenation exists iff two full trigrams differ, or the short last block
        # put first changes the text (if it does not, every arrangement gives the same words)
        if len(blocks) < 2 or (len(set(full)) < 2 and
                               (not short or short[0] + [w for b in full for w in b] == words)):
            return None
        for _ in range(_MAX_DRAWS):
            order = rng.permutation(len(blocks))
            out = [w for k in order for w in blocks[k]]
            if out != words:
                return out
        raise RuntimeError("shuffle did not change an applicable caption")  # pragma: no cover
