"""One parsed caption -> its granularity counts (features.py turns counts into the eight features).

The closed word classes, the cached WordNet look-ups and the dependency rules of each NP-level count
live here; docs/granularity.md describes the readings and ``FeatureOptions`` (features.py) the options.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

# ----------------------------------------------------------------------------------------------
# closed word classes (see docs/granularity.md, "Quantifiers" and "Articles")

ARTICLES = frozenset({"a", "an", "the"})
#: quantifying determiners / adjectives (a word in this list is a quantifier, never an adjective)
QUANTIFIER_WORDS = frozenset({
    "all", "any", "both", "each", "either", "enough", "every", "few", "fewer", "many", "more", "most",
    "much", "neither", "no", "several", "some", "numerous", "multiple", "countless", "various",
})
#: nouns that quantify the noun of their "of" phrase: "a lot of people", "a couple of dogs"
QUANTITY_NOUNS = frozenset({"lot", "lots", "couple", "number", "plenty", "dozen", "dozens", "hundreds",
                            "thousands", "millions", "handful"})
#: "a" + one of these is the start of a quantifier ("a few", "a dozen"), not an article (so is the "a"
#: of a recognised phrasal quantifier: "a lot of", "a couple of")
_A_QUANT_NEXT = frozenset({"few", "dozen", "hundred", "thousand", "million"})
#: nouns of lexicalised complex prepositions: "in front of", "on top of", "in back of"
COMPLEX_PREP_NOUNS = frozenset({"front", "top", "back"})
_COMPLEX_PREP_HEADS = frozenset({"in", "on", "at"})

_WN_POS = {"NOUN": "n", "PROPN": "n", "VERB": "v", "ADJ": "a", "ADV": "r"}
CONTENT_POS = tuple(_WN_POS)

def _has_alnum(s: str) -> bool:
    return any(ch.isalnum() for ch in s)


# ----------------------------------------------------------------------------------------------
# WordNet look-ups, cached per (word, WordNet part of speech)

_SYNSETS: dict = {}
_DEPTH: dict = {}
_LEMMAS: dict = {}


def _wn():
    from .. import lang  # lazy: vlbench ls imports this module; keep it light

    return lang.wordnet()


def synsets(word: str, pos: str | None) -> tuple:
    key = (word, pos)
    got = _SYNSETS.get(key)
    if got is None:
        try:
            got = tuple(_wn().synsets(word, pos))
        except Exception:  # odd strings (WordNet's morphy chokes on nothing we know of, but be safe)
            got = ()
        _SYNSETS[key] = got
    return got


def word_depth(word: str, pos: str, how: str = "max", measure: str = "min_depth") -> float | None:
    """Depth of a word's concept: ``how`` over its synsets of ``measure``; None if not in WordNet."""
    key = (word, pos, how, measure)
    if key in _DEPTH:
        return _DEPTH[key]
    ss = synsets(word, pos)
    if not ss:
        value = None
    else:
        vals = [getattr(s, measure)() for s in (ss[:1] if how == "first" else ss)]
        value = float(max(vals) if how in ("max", "first") else min(vals) if how == "min" else sum(vals) / len(vals))
    _DEPTH[key] = value
    return value


def synonym_lemmas(word: str, pos: str | None) -> frozenset:
    """All lemma names of all synsets of the word (its WordNet synonyms, itself included)."""
    key = (word, pos)
    got = _LEMMAS.get(key)
    if got is None:
        got = frozenset(lemma.lower() for s in synsets(word, pos) for lemma in s.lemma_names())
        _LEMMAS[key] = got
    return got


# ----------------------------------------------------------------------------------------------
# one parsed caption -> counts


def _conj_root(t):
    while t.dep_ == "conj" and t.head.i != t.i:
        t = t.head
    return t


def _phrasal_skips(toks, lower, opts) -> tuple[set, dict, set, Counter]:
    """Multi-token quantifiers and complex prepositions: their nouns are not "identified nouns".

    Returns the token ids that are parts of those phrases, quantity noun -> the noun it quantifies (its
    modifiers move there), the "of" of those phrases (not a complement phrase), and noun id -> the
    quantifiers credited to it by "a lot of" & co."""
    skip: set[int] = set()
    proxy: dict[int, int] = {}
    skip_of: set[int] = set()
    credit: Counter = Counter()
    if opts.phrasal_quantifiers:
        for t in toks:
            if lower[t.i] in QUANTITY_NOUNS and t.pos_ in ("NOUN", "PROPN", "NUM"):
                of = next((c for c in t.children if c.dep_ == "prep" and c.lower_ == "of"), None)
                obj = None if of is None else next((g for g in of.children if g.dep_ == "pobj"), None)
                if of is not None and obj is not None and obj.pos_ in opts.noun_pos:
                    skip.add(t.i)
                    skip_of.add(of.i)
                    proxy[t.i] = obj.i
                    credit[obj.i] += 1
    for t in toks:
        if (lower[t.i] in COMPLEX_PREP_NOUNS and t.dep_ == "pobj" and t.head.lower_ in _COMPLEX_PREP_HEADS
                and not any(c.dep_ in ("det", "amod", "poss", "nummod", "compound") for c in t.children)
                and any(c.dep_ == "prep" and c.lower_ == "of" for c in t.children)):
            skip.add(t.i)
    return skip, proxy, skip_of, credit


def _np_counts(toks, lower, noun_ids: set, proxy: dict, skip_of: set, skip: set, opts) -> list[int]:
    """Adjectives, complement phrases, articles and quantifiers attached to the identified nouns."""

    def noun_of(head) -> int | None:
        h = proxy.get(head.i, head.i)
        return h if h in noun_ids else None

    def inside_np(t) -> bool:  # cp_scope="np": the phrase lies inside an identified noun's phrase
        return any(noun_of(a) is not None for a in t.ancestors)

    n = [0, 0, 0, 0]  # adjectives, complement phrases, articles, quantifiers
    for t in toks:
        if t.head.i == t.i:
            continue
        lw, dep, pos = lower[t.i], t.dep_, t.pos_
        # adjectives ------------------------------------------------------------------------
        is_adj = pos == "ADJ" or (opts.participles and pos == "VERB" and t.tag_ in ("VBN", "VBG"))
        if is_adj and lw not in QUANTIFIER_WORDS:
            r = _conj_root(t) if dep == "conj" else t
            if r.dep_ == "amod" and noun_of(r.head) is not None:
                n[0] += 1
            elif opts.predicative and r.dep_ == "acomp" and pos == "ADJ":
                subj = next((c for c in r.head.children if c.dep_ in ("nsubj", "nsubjpass")), None)
                if subj is not None and subj.i in noun_ids:
                    n[0] += 1
        # complement phrases ------------------------------------------------------------------
        if t.i not in skip_of:
            r = _conj_root(t) if dep == "conj" and pos in ("ADP", "VERB", "AUX") else t
            rel = r.dep_
            if opts.cp_scope == "caption":
                if rel in opts.cp_relations and (r.head.i not in skip or r.head.i in proxy):
                    n[1] += 1
            elif opts.cp_scope == "np":
                if rel in opts.cp_relations and (r.head.i not in skip or r.head.i in proxy) and inside_np(r):
                    n[1] += 1
            elif rel in opts.cp_relations and noun_of(r.head) is not None:
                n[1] += 1
            elif ("prep" in opts.cp_relations and rel == "advmod" and r.pos_ == "ADV" and r.i == t.i
                  and noun_of(r.head) is not None and any(c.dep_ == "prep" for c in r.children)):
                n[1] += 1  # complex preposition headed by an adverb: "next to", "close to"
        # articles ------------------------------------------------------------------------------
        if dep == "det" and lw in ARTICLES and t.head.i in noun_ids:
            nxt = lower[t.i + 1] if t.i + 1 < len(toks) else ""
            if not (lw in ("a", "an") and (nxt in _A_QUANT_NEXT or t.i + 1 in proxy)):
                n[2] += 1
        # quantifiers ------------------------------------------------------------------------
        if t.head.i in noun_ids:
            if dep == "nummod" or (lw in QUANTIFIER_WORDS and dep in ("det", "predet", "preconj", "amod",
                                                                      "quantmod", "advmod", "nmod")):
                n[3] += 1
    return n


def _noun_depth(n, toks, lower, opts) -> float | None:
    d = None
    if opts.multiword:
        comp: list = []
        j = n.i - 1
        while j >= 0 and toks[j].dep_ == "compound" and toks[j].head.i == n.i and toks[j].pos_ in ("NOUN", "PROPN"):
            comp.insert(0, lower[j])
            j -= 1
        for k in range(len(comp)):  # longest compound first
            d = word_depth("_".join(comp[k:] + [lower[n.i]]), "n", opts.depth_synsets, opts.depth_measure)
            if d is not None:
                break
    if d is None:
        d = word_depth(lower[n.i], "n", opts.depth_synsets, opts.depth_measure)
    return d


def _depths(toks, lower, nouns, opts) -> list[float]:
    """WordNet depths of the identified nouns (and verbs, if asked) that WordNet knows."""
    depths: list[float] = []
    if "NOUN" in opts.depth_pos:
        depths += [d for d in (_noun_depth(n, toks, lower, opts) for n in nouns) if d is not None]
    if "VERB" in opts.depth_pos:
        for t in toks:
            if t.pos_ == "VERB":
                d = word_depth(lower[t.i], "v", opts.depth_synsets, opts.depth_measure)
                if d is not None:
                    depths.append(d)
    return depths


def _numerals(toks) -> int:
    """quantifier_set="numerals": the cardinal numbers of the caption (universal POS ``NUM``), one per
    number: "twenty five" is one ("twenty" is a part of "five"), "two men, one in red" is two."""
    return sum(1 for t in toks if t.pos_ == "NUM"
               and not (t.dep_ in ("compound", "quantmod", "nummod") and t.head.pos_ == "NUM" and t.head.i != t.i))


def analyse_doc(doc, opts, text: str | None = None) -> dict:
    """Counts for one parsed caption (spaCy ``Doc``) under ``opts`` (FeatureOptions). ``text``: the
    caption as analysed."""
    text = doc.text if text is None else text
    toks = list(doc)
    lower = [t.lower_ for t in toks]
    skip, proxy, skip_of, credit = _phrasal_skips(toks, lower, opts)
    excluded_deps = ("nummod", "quantmod") if opts.compounds_as_nouns else ("compound", "nummod", "quantmod")
    nouns = [t for t in toks if t.pos_ in opts.noun_pos and t.i not in skip and t.dep_ not in excluded_deps]
    noun_ids = {t.i for t in nouns}
    n_adj, n_cp, n_art, n_quant = _np_counts(toks, lower, noun_ids, proxy, skip_of, skip, opts)
    if opts.quantifier_set == "numerals":
        n_quant = _numerals(toks)
    else:
        n_quant += sum(credit[i] for i in noun_ids)
    depths = _depths(toks, lower, nouns, opts)
    n_tokens = sum(1 for t in toks if _has_alnum(t.text))
    n_ws = sum(1 for w in text.split() if _has_alnum(w))
    content: list[tuple[str, str | None]] = [(lower[t.i], _WN_POS[t.pos_]) for t in toks
                                             if t.pos_ in _WN_POS and t.i not in skip and _has_alnum(t.text)]
    concept_words = content  # "concepts": every word, a function word is a concept of its own
    if opts.diversity == "concepts":
        concept_words = [(lower[t.i], _WN_POS.get(t.pos_)) for t in toks if _has_alnum(t.text)]
    return {
        "n_chars": len(text),
        "n_chars_nospace": sum(1 for ch in text if not ch.isspace()),
        "n_words": n_tokens if opts.word_unit == "token" else n_ws,
        "n_nouns": len(nouns),
        "n_adjectives": n_adj,
        "n_complement_phrases": n_cp,
        "n_articles": n_art,
        "n_quantifiers": n_quant,
        "n_depth_words": len(depths),
        "depth_sum": float(sum(depths)),
        "n_content_words": len(content),
        "n_concepts": _count_concepts(concept_words, opts.diversity),
    }


def _count_concepts(content: Sequence[tuple[str, str | None]], mode: str) -> int:
    """Numerator of concept diversity over the caption's content words (word, WordNet pos)."""
    if not content:
        return 0
    if mode == "synonym_pool":
        pool: set = set()
        for w, p in content:
            lem = synonym_lemmas(w, p)
            pool |= lem if lem else {w}
        return len(pool)
    if mode == "lemmas":
        keys = set()
        for w, p in content:
            m = _wn().morphy(w, p) if synsets(w, p) else None
            keys.add((m or w, p))
        return len(keys)
    if mode == "first_sense":
        return len({(ss[0].name() if (ss := synsets(w, p)) else ("word", w, p)) for w, p in content})
    # "synonyms": two words are one concept when they share a synset (WordNet synonymy); union-find
    items = list(dict.fromkeys(content))  # the same word twice is one concept anyway
    parent = list(range(len(items)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict = {}
    for i, (w, p) in enumerate(items):
        for s in (synsets(w, p) if p else ()):
            j = owner.setdefault(s, i)
            if j != i:
                a, b = find(i), find(j)
                if a != b:
                    parent[a] = b
    return len({find(i) for i in range(len(items))})
