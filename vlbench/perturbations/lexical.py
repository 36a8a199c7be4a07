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

from functools import lru_cache

from ..errors import VlbenchError
from .base import ADJ_TAGS, NOUN_TAGS, BasePerturbation, analyze_units, check_bool, check_choice, check_int

PLURAL_TAGS = frozenset({"NNS", "NNPS"})

# plurals the suffix rules get wrong and that are common in image captions
IRREGULAR_PLURALS = {
    "man": "men", "woman": "women", "child": "children", "person": "people", "foot": "feet", "tooth": "teeth",
    "goose": "geese", "mouse": "mice", "louse": "lice", "ox": "oxen", "die": "dice",
    # same form in the plural
    "sheep": "sheep", "deer": "deer", "fish": "fish", "aircraft": "aircraft", "spacecraft": "spacecraft",
    "series": "series", "species": "species", "moose": "moose", "bison": "bison", "swine": "swine",
}

# WordNet lexicographer files of things one can see: the sense of a caption noun is looked for only there
VISUAL_NOUN_FILES = frozenset({"noun.artifact", "noun.animal", "noun.person", "noun.plant", "noun.food",
                               "noun.object", "noun.body", "noun.substance"})
# colour adjectives: every WordNet "synonym" names another shade (red -> crimson, blue -> bluish)
COLOUR_WORDS = frozenset("red blue green yellow orange purple pink brown black white gray grey silver gold golden "
                         "tan beige violet maroon navy teal turquoise".split())
# mass nouns: never put in the plural for a plural word ("leaves" -> *"foliages")
MASS_NOUNS = frozenset("foliage luggage baggage furniture clothing equipment information advice".split())
# adjectives that cannot stand before a noun ("a lone cow" -> "an alone cow")
PREDICATIVE_ONLY = frozenset("alone asleep awake alive afraid aware ablaze afloat ajar aloof adrift akin".split())
_IRREGULAR_PLURAL_FORMS = frozenset(v for k, v in IRREGULAR_PLURALS.items() if v != k)

# fixed expressions whose words must not be replaced one at a time (lower-case, single spaces)
FIXED_EXPRESSIONS = (
    "hot dog", "hot dogs", "fire hydrant", "fire hydrants", "close up", "close-up", "black and white",
    "teddy bear", "teddy bears", "living room", "cell phone", "cell phones", "stop sign", "stop signs",
    "traffic light", "traffic lights", "parking meter", "parking lot", "tennis racket", "tennis court",
    "baseball bat", "baseball game", "hot air balloon", "fire truck", "fire engine", "double decker",
    "ice cream", "french fries", "home plate", "big ben", "more than", "a lot", "lots of", "each other",
    "other side", "in the middle", "middle of", "first base", "second base", "third base", "high chair", "cutting board", "stuffed animal",
    "police officer", "hard hat", "hard hats", "school aged", "middle aged", "mega phone", "bus stop", "train station", "train tracks", "side walk", "air port", "frisbee golf",
)


def _norm(s: str) -> str:
    return s.lower().replace("_", "").replace("-", "").replace(" ", "")


def _wn():
    from ..lang import wordnet

    return wordnet()


@lru_cache(maxsize=None)
def _exc_plurals() -> dict[str, frozenset]:
    """singular -> plurals listed in WordNet's noun exception file (noun.exc)."""
    rev: dict[str, set] = {}
    for plural, singulars in _wn()._exception_map["n"].items():
        for s in singulars:
            rev.setdefault(s, set()).add(plural)
    return {k: frozenset(v) for k, v in rev.items()}


def _morphy_all(form: str, pos: str) -> list[str]:
    wn = _wn()
    try:
        return list(wn._morphy(form, pos))
    except (AttributeError, TypeError):  # older/newer NLTK: public single-result morphy
        base = wn.morphy(form, pos)
        return [base] if base else []


def pluralize_word(s: str) -> str:
    """English plural of one lower-case noun: a small irregular table, then suffix rules, using
    WordNet's exception list to spell -f/-fe -> -ves and -o -> -oes where WordNet knows that form."""
    if s in IRREGULAR_PLURALS:
        return IRREGULAR_PLURALS[s]
    exc = _exc_plurals().get(s, frozenset())
    if s.endswith("woman"):
        return s[:-5] + "women"
    if s.endswith("man") and len(s) > 3 and _wn().synsets(s[:-3]):  # fireman -> firemen; not human
        return s[:-3] + "men"
    if s.endswith("fe") and s[:-2] + "ves" in exc:
        return s[:-2] + "ves"
    if s.endswith("f") and s[:-1] + "ves" in exc:
        return s[:-1] + "ves"
    if s.endswith("o") and s + "es" in exc:
        return s + "es"
    if s.endswith(("s", "x", "z", "ch", "sh")):
        return s + "es"
    if s.endswith("y") and len(s) > 1 and s[-2] not in "aeiou":
        return s[:-1] + "ies"
    return s + "s"


def pluralize_phrase(lemma: str) -> str | None:
    """Plural of a WordNet noun lemma (words separated by spaces; the last word is inflected), or None
    when WordNet's own morphology does not map the plural back to the lemma."""
    words = lemma.split(" ")
    if not words[-1].isalpha():
        return None
    plural = " ".join(words[:-1] + [pluralize_word(words[-1].lower())])
    key = plural.replace(" ", "_").lower()
    if lemma.replace(" ", "_").lower() not in [m.lower() for m in _morphy_all(key, "n")]:
        return None
    return plural


@lru_cache(maxsize=200_000)
def synonym_candidates(word: str, wn_pos: str, plural: bool, inflect: bool) -> tuple[str, ...]:
    """Ordered synonym candidates of ``word`` (see the module docstring)."""
    wn = _wn()
    w = word.lower()
    bases = {_norm(w)} | {_norm(b) for b in _morphy_all(w, wn_pos)}
    out: list[str] = []
    seen: set[str] = set()
    for syn in wn.synsets(w, pos=wn_pos):
        names = syn.lemma_names()
        exact = any(n.lower() == w for n in names)
        if exact or not inflect:
            make_plural = False
        elif wn_pos == "n" and plural:
            make_plural = True
        else:
            continue
        for n in names:
            if _norm(n) in bases:
                continue
            cand = n.replace("_", " ")
            if make_plural:
                if any(c.isupper() for c in cand):
                    continue
                cand = pluralize_phrase(cand)
                if cand is None:
                    continue
            if _norm(cand) in bases or cand in seen:
                continue
            seen.add(cand)
            out.append(cand)
    return tuple(out)


@lru_cache(maxsize=200_000)
def common_candidates(word: str, wn_pos: str, plural: bool) -> tuple[str, ...]:
    """Candidates of the ``common`` rule (module docstring): most frequent sense, SemCor-attested
    lower-case single-word lemmas ranked by SemCor count, no inflection/derivation of the word."""
    wn = _wn()
    w = word.lower()
    # a plural noun is looked up by its singular only ("men" alone is also a lemma of the sense "work force")
    forms = [b for b in _morphy_all(w, wn_pos) if b != w] if plural else [w]
    if not forms:  # a plural with no singular in WordNet (cattle, woods): its number cannot be kept reliably
        return ()
    # the sense in which the word itself is most frequent in SemCor (ties: WordNet's order); a word never
    # seen in SemCor has no attested sense and gets no candidate (WordNet's order alone is no evidence)
    best, sense = 0, None
    for syn in wn.synsets(w, pos=wn_pos):
        if wn_pos == "n" and syn.lexname() not in VISUAL_NOUN_FILES:
            continue  # captions describe what is seen: a court is a tennis court here, not a tribunal
        c = sum(lem.count() for lem in syn.lemmas() if lem.name().lower() in forms)
        if c > best:
            best, sense = c, syn
    if sense is None:
        return ()
    bases = {_norm(f) for f in forms} | {_norm(b) for b in _morphy_all(w, wn_pos)}
    ranked = []
    for lem in sense.lemmas():
        name = lem.name()
        if (not name.isalpha() or not name.islower() or _norm(name) in bases or lem.count() < 1
                or name in PREDICATIVE_ONLY or _dominant_sense(name, wn_pos) != sense.name()
                or any(name[:4] == b[:4] for b in bases) or _shares_base(name, w)
                or (wn_pos == "a" and _is_graded_form(name))):
            continue
        cand = name
        if plural and name in MASS_NOUNS:
            continue
        if wn_pos == "n" and not plural and any(b != name for b in _morphy_all(name, "n")):
            continue  # a singular word is never replaced by one that reads as a plural ("sister" -> "sis")
        if plural and name.lower() != w:
            cand = pluralize_phrase(name)
            if cand is None:
                continue
        ranked.append((-lem.count(), cand))
    return tuple(c for _, c in sorted(ranked))


@lru_cache(maxsize=1)
def _fixed_pattern():
    import re

    alts = sorted((r"\s+".join(re.escape(p) for p in e.split(" ")) for e in FIXED_EXPRESSIONS), key=len, reverse=True)
    return re.compile(r"(?<![a-z])(?:" + "|".join(alts) + r")(?![a-z])")


@lru_cache(maxsize=4096)
def _fixed_spans(text: str) -> tuple[tuple[int, int], ...]:
    """Spans of fixed expressions in ``text`` (overlapping matches included: one search per start)."""
    pat, low, out = _fixed_pattern(), text.lower(), []
    pos = 0
    while True:
        m = pat.search(low, pos)
        if m is None:
            return tuple(out)
        out.append(m.span())
        pos = m.start() + 1


def _all_bases(word: str) -> set[str]:
    return {word} | {b for p in ("n", "v", "a") for b in _morphy_all(word, p)}


def _shares_base(a: str, b: str) -> bool:
    """Whether two words are forms of one word for WordNet's morphology (shot / shooting: shoot)."""
    return bool(_all_bases(a.lower()) & _all_bases(b.lower()))


def _is_graded_form(adj: str) -> bool:
    """A comparative/superlative adjective form (older, eldest): WordNet maps it to another adjective."""
    return any(b != adj for b in _morphy_all(adj, "a")) or adj in ("more", "most", "less", "least")


@lru_cache(maxsize=200_000)
def _dominant_sense(word: str, wn_pos: str) -> str | None:
    """The synset (name) in which ``word`` is most frequent in SemCor (ties: WordNet's order). A candidate
    must mean the caption word's sense *first*: "tribunal" for "court", "radical" for "group" do not."""
    best, out = 0, None
    for syn in _wn().synsets(word, pos=wn_pos):
        c = sum(lem.count() for lem in syn.lemmas() if lem.name().lower() == word)
        if c > best:
            best, out = c, syn.name()
    return out


def in_fixed_expression(text: str, start: int, end: int) -> bool:
    """Whether the span text[start:end] lies inside one of :data:`FIXED_EXPRESSIONS` (case- and
    spacing-insensitive, whole words)."""
    return any(s <= start and end <= e for s, e in _fixed_spans(text))


_AN_EXCEPTIONS = ("hour", "honest", "honor", "honour", "heir")
_A_EXCEPTIONS = ("uni", "use", "usu", "uti", "ute", "ura", "uro", "eu", "one", "once", "ewe")


def wants_an(word: str) -> bool:
    """Whether an indefinite article before ``word`` is "an" (spelling heuristic)."""
    w = word.lower()
    if w.startswith(_AN_EXCEPTIONS):
        return True
    if w.startswith(_A_EXCEPTIONS):
        return False
    return w[:1] in ("a", "e", "i", "o", "u")


def match_case(template: str, new: str) -> str:
    if len(template) > 1 and template.isupper():
        return new.upper()
    if template[:1].isupper():
        return new[:1].upper() + new[1:]
    return new


class _Synonym(BasePerturbation):
    family = "lexical"
    version = "2.1"
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
            from .guard import DEFAULT_THRESHOLD

            self.params["threshold"] = DEFAULT_THRESHOLD if self.params["guard"] == "minilm" else None
        if self.params["word_threshold"] is None:
            from .guard import DEFAULT_WORD_THRESHOLD

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
        return tuple(c for c in common_candidates(tok.text, self.wn_pos, plural) if c.lower() not in near)

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
    import re

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
