"""Lexical variation: replace nouns / adjectives with WordNet synonyms (NLTK WordNet 3.0, spaCy tags).

Eligible tokens: spaCy ``tag_`` NN/NNS/NNP/NNPS (nouns) or JJ/JJR/JJS (adjectives), alphabetic, at least
two letters, and the only content token of their word unit (so ``man`` in ``man's`` is eligible, the
parts of ``t-shirt`` or ``black-and-white`` are not: replacing half a compound makes nonsense).

Candidates of a token w (lower-cased) with WordNet part of speech p (``n``, or ``a`` incl. satellites):
for each synset of ``wn.synsets(w, p)`` in WordNet's sense order, for each lemma in synset order, the
lemma (underscores -> spaces) when it is a different word (compared lower-case, ignoring ``_``, ``-`` and
spaces) from w and from w's base forms (``morphy``). With ``inflect=True`` (default) the replacement
keeps the token's grammatical form: a synset counts only if it contains w itself as a lemma, or, for a
plural noun (NNS/NNPS) whose synset holds its singular, the candidate is put in the plural (capitalized
names are not pluralized and skipped; a plural WordNet cannot map back to the lemma is skipped);
comparatives/superlatives (JJR/JJS) that are not lemmas themselves get no candidates. With
``inflect=False`` every synset counts and the bare lemma is inserted (closer to the authors' code).

Choice rule ``choice="common"`` (default since version 2.0, meaning-preserving): only the most frequent
sense of the word for its tagged part of speech (the first WordNet synset that lists the word itself, or
for a plural noun its singular; WordNet orders senses by SemCor frequency), and of that sense only lemmas
attested in SemCor (``Lemma.count() >= 1``), ranked by that count so that common words win; never a
lemma with an upper-case letter (proper names such as "Gunter Grass", "H2O") or a multi-word lemma, never
a lemma that is only an inflection or derivation of the word (sharing its first four letters: old ->
older), never a replacement equal to a neighbouring word (no "plane plane"), and never a token inside a
fixed multi-word expression (:data:`FIXED_EXPRESSIONS`: hot dog, fire hydrant, close up, black and
white, ...). Plural nouns get the plural of the candidate (see ``inflect``); comparatives/superlatives
are left alone. The first k eligible tokens are replaced, each by its top-ranked candidate.

Choice rule ``choice="first"`` (version 1.0 default, the authors' k = 1 rule): the first k eligible tokens in the
caption that have a candidate, each replaced by its first candidate. ``choice="random"``: k tokens drawn
uniformly among those with candidates, each replaced by a uniformly drawn candidate (per-caption RNG).

The replacement keeps the token's capitalization: first letter upper-cased for a capitalized token,
whole replacement upper-cased for an all-caps token. With ``fix_article=True`` (default) an indefinite
article directly before the replaced token is switched between "a" and "an" to fit the replacement
("A picture" -> "An image"; vowel-letter rule with the usual exceptions, see :func:`wants_an`), keeping
the article's case. Nothing else in the caption changes.
"""

from __future__ import annotations

import re

from ..errors import VlbenchError
from .base import ADJ_TAGS, NOUN_TAGS, BasePerturbation, analyze_units, check_bool, check_choice, check_int
from .guard import DEFAULT_THRESHOLD, DEFAULT_WORD_THRESHOLD
from .synonym_words import (  # noqa: F401  (re-exported: compat.py, the audit and tests import them from here)
    _A_EXCEPTIONS,
    _AN_EXCEPTIONS,
    _IRREGULAR_PLURAL_FORMS,
    COLOUR_WORDS,
    FIXED_EXPRESSIONS,
    IRREGULAR_PLURALS,
    MASS_NOUNS,
    PLURAL_TAGS,
    PREDICATIVE_ONLY,
    VISUAL_NOUN_FILES,
    _all_bases,
    _dominant_sense,
    _exc_plurals,
    _fixed_pattern,
    _fixed_spans,
    _is_graded_form,
    _morphy_all,
    _norm,
    _shares_base,
    _wn,
    caption_word_forms,
    common_candidates,
    in_fixed_expression,
    is_derivation,
    match_case,
    pluralize_phrase,
    pluralize_word,
    synonym_candidates,
    wants_an,
    word_forms,
)


class _Synonym(BasePerturbation):
    family = "lexical"
    version = "2.2"
    needs_parse = True
    resources = ("spacy", "wordnet")
    defaults = {"k": 1, "choice": "common", "inflect": True, "fix_article": True, "guard": None, "threshold": None,
                "word_threshold": None}
    tags: frozenset = frozenset()
    wn_pos = "n"

    def validate(self):
        check_int(self.name, "k", self.params["k"], 1)
        check_choice(self.name, "choice", self.params["choice"], ("common", "first", "random"))
        check_bool(self.name, "inflect", self.params["inflect"])
        check_bool(self.name, "fix_article", self.params["fix_article"])
        # semantic guard (vlbench.perturbations.guard): on by default for the "common" rule only, so that
        # choice="first" still gives the version-1.0 output byte for byte
        if self.params["guard"] is None:
            self.params["guard"] = "minilm" if self.params["choice"] == "common" else "off"
        check_choice(self.name, "guard", self.params["guard"], ("minilm", "off"))
        if self.params["threshold"] is None:
            self.params["threshold"] = DEFAULT_THRESHOLD if self.params["guard"] == "minilm" else None
        if self.params["word_threshold"] is None:
            self.params["word_threshold"] = DEFAULT_WORD_THRESHOLD if self.params["guard"] == "minilm" else None
        for key in ("threshold", "word_threshold"):
            t = self.params[key]
            if self.params["guard"] == "minilm" and (isinstance(t, bool) or not isinstance(t, (int, float))
                                                     or not -1.0 <= t <= 1.0):
                raise VlbenchError(f"perturbation {self.name!r}: {key} {t!r} is not a cosine in [-1, 1]",
                                   f"pass e.g. --param {self.name}.{key}=0.8")

    @property
    def guarded(self) -> bool:
        return self.params["guard"] == "minilm"

    def eligible(self, text, tokens):
        """[(token, candidates)] in caption order, for tokens that have at least one candidate."""
        out = []
        for info in analyze_units(text, tuple(tokens)):
            if len(info.content) != 1:
                continue
            tok, unit = info.content[0], info.unit
            if (tok.tag not in self.tags or not tok.text.isalpha() or len(tok.text) < 2
                    or tok.idx < unit.start or tok.end > unit.end):
                continue
            plural = tok.tag in PLURAL_TAGS
            if self.params["choice"] == "common":
                # an irregular plural tagged as a name or singular ("MEN" -> NNP) is still plural
                plural = plural or (self.wn_pos == "n" and tok.text.lower() in _IRREGULAR_PLURAL_FORMS)
                cands = self._common(text, tokens, tok, plural)
            else:
                cands = synonym_candidates(tok.text, self.wn_pos, plural, self.params["inflect"])
            if cands:
                out.append((tok, cands))
        return out

    def _common(self, text, tokens, tok, plural):
        """``common``-rule candidates of one token in its caption: no fixed expression, no candidate equal
        to the word before or after (no new adjacent repeat)."""
        if (tok.tag in ("JJR", "JJS", "RBR", "RBS") or in_fixed_expression(text, tok.idx, tok.end)
                or tok.text.lower() in COLOUR_WORDS):
            return ()
        i = next(j for j, t in enumerate(tokens) if t.idx == tok.idx)
        if self.wn_pos == "n" and any(tokens[j].tag in NOUN_TAGS for j in _word_neighbours(tokens, i)):
            return ()  # part of a noun-noun compound (coffee table, train track): compounds are lexicalized
        near = {tokens[j].text.lower() for j in (i - 1, i + 1) if 0 <= j < len(tokens)}
        # never a word (or a form of a word) the caption already has ("shops and stores" -> "stores and
        # stores"), never a derivation of the word ("bluish" -> "blue", "sandy" -> "sand")
        present = caption_word_forms(text)
        return tuple(c for c in common_candidates(tok.text, self.wn_pos, plural)
                     if c.lower() not in near and not (word_forms(c) & present) and not is_derivation(tok.text, c))

    def choices(self, text, tokens, rng=None, with_words: bool = False) -> list:
        """The perturbed captions this perturbation may output for ``text``, best first.

        ``common`` with k = 1: every (eligible token, candidate) in caption order then rank, minus outputs
        that create an adjacent repeated word (also through the a/an fix: "a an animal" -> "a a creature");
        the semantic guard (vlbench.perturbations.guard) takes the first it accepts. Otherwise the one
        output of the rule (``first``: top candidates; ``random``: drawn with ``rng``). With ``with_words``
        each item is (output, [(word, replacement), ...]) for the guard's word-level check.
        """
        if tokens is None:
            raise VlbenchError(f"perturbation {self.name!r} needs part-of-speech tags", "pass the parsed tokens")
        eligible = self.eligible(text, tokens)
        if not eligible:
            return []
        k = min(self.params["k"], len(eligible))
        if self.params["choice"] == "common" and k == 1:
            base, seen, out = _repeats(text), set(), []
            for tok, cands in eligible:
                for c in cands:
                    o = self._render(text, tokens, [(tok, c)])
                    if _repeats(o) <= base and o not in seen:
                        seen.add(o)
                        out.append((o, [(tok.text, c)]) if with_words else o)
            return out
        if self.params["choice"] in ("first", "common"):
            chosen = [(tok, cands[0]) for tok, cands in eligible[:k]]
        else:
            picks = rng.sample(range(len(eligible)), k)
            chosen = [(eligible[i][0], rng.choice(eligible[i][1])) for i in picks]
        out = self._render(text, tokens, chosen)
        if self.params["choice"] == "common" and _repeats(out) > _repeats(text):
            return []
        return [(out, [(t.text, c) for t, c in chosen])] if with_words else [out]

    def apply(self, text, *, rng, tokens=None):
        outs = self.choices(text, tokens, rng)
        return outs[0] if outs else None

    def _render(self, text, tokens, chosen):
        # the article before a token: in 1.0 the directly preceding token; with ``common`` the preceding
        # non-space token (spaCy makes extra spaces a token of their own: "A  woman")
        skip_space = self.params["choice"] == "common"
        prev = {}
        for i, t in enumerate(tokens):
            j = i - 1
            while skip_space and j >= 0 and not tokens[j].text.strip():
                j -= 1
            if j >= 0:
                prev[t.idx] = tokens[j]
        out = text
        for tok, cand in sorted(chosen, key=lambda tc: tc[0].idx, reverse=True):
            new = match_case(tok.text, cand)
            out = out[:tok.idx] + new + out[tok.end:]
            art = prev.get(tok.idx)
            if (self.params["fix_article"] and art is not None and art.text.lower() in ("a", "an")
                    and text[art.end:tok.idx].strip() == ""):
                want = "an" if wants_an(new) else "a"
                if want != art.text.lower():
                    if art.text.isupper() and len(art.text) > 1:
                        want = want.upper()
                    elif art.text[0].isupper():
                        want = want.capitalize()
                    out = out[:art.idx] + want + out[art.end:]
        return out


def _word_neighbours(tokens, i: int) -> list[int]:
    """Indices of the nearest non-space tokens before and after token i."""
    out = []
    for step in (-1, 1):
        j = i + step
        while 0 <= j < len(tokens) and not tokens[j].text.strip():
            j += step
        if 0 <= j < len(tokens):
            out.append(j)
    return out


def _repeats(text: str) -> int:
    """Adjacent repeated words (case-insensitive, punctuation at word ends ignored)."""
    words = [w for w in (re.sub(r"^\W+|\W+$", "", x).lower() for x in text.split()) if w]
    return sum(a == b for a, b in zip(words, words[1:]))


class SynonymNoun(_Synonym):
    """Replace k nouns (NN*) with a WordNet synonym (``plane`` -> ``airplane``)."""

    name = "synonym-noun"
    tags = NOUN_TAGS
    wn_pos = "n"


class SynonymAdjective(_Synonym):
    """Replace k adjectives (JJ*) with a WordNet synonym (``amphibious`` -> ``amphibian``)."""

    name = "synonym-adjective"
    tags = ADJ_TAGS
    wn_pos = "a"  # NLTK includes adjective satellites (s) for pos='a'
