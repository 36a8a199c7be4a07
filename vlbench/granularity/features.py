"""Per-caption granularity features (thesis chapter 5, section 5.3.1, Table 5.1).

Eight features, each computed per caption and then averaged per dataset:

* NP level, counted in relation to the nouns they belong to: ``adjectives``, ``complement_phrases``,
  ``articles``, ``quantifiers`` and ``concept_depth`` (WordNet);
* caption level: ``caption_length`` (characters), ``words_per_caption`` and ``concept_diversity``.

Tokens, parts of speech and dependencies come from spaCy (``vlbench.lang.nlp()``), depth and synonyms
from WordNet through NLTK (``vlbench.lang.wordnet()``). The reading chosen for each feature, and the
alternatives offered as options, are described in docs/granularity.md; ``FeatureOptions`` holds them.

Speed: every distinct caption is parsed once (``nlp().pipe``), and every WordNet look-up is cached
per (word, part of speech) for the life of the process.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import asdict, dataclass, fields
from typing import Callable, Iterable, Sequence

from ..errors import VlbenchError

FEATURES = ("adjectives", "complement_phrases", "articles", "quantifiers", "concept_depth",
            "caption_length", "words_per_caption", "concept_diversity")
NP_FEATURES = FEATURES[:4]

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

# ----------------------------------------------------------------------------------------------
# options

_CHOICES = {
    "normalize": ("none", "fg"),
    "np_unit": ("noun", "caption"),
    "depth_synsets": ("max", "min", "mean", "first"),
    "depth_measure": ("min_depth", "max_depth"),
    "length_unit": ("chars", "chars_nospace", "words"),
    "word_unit": ("token", "whitespace"),
    "diversity": ("synonyms", "first_sense", "lemmas", "synonym_pool"),
}
_TUPLE_CHOICES = {
    "noun_pos": ("NOUN", "PROPN"),
    "cp_relations": ("prep", "acl", "relcl"),
    "depth_pos": ("NOUN", "VERB"),
}


@dataclass(frozen=True)
class FeatureOptions:
    """How each feature is read. The defaults are the readings argued for in docs/granularity.md."""

    #: text before analysis: "none" (as released; whitespace collapsed) or "fg" (the FG release's
    #: form: lowercase, apostrophes dropped, other punctuation replaced by spaces)
    normalize: str = "none"
    #: parts of speech of "identified nouns"
    noun_pos: tuple = ("NOUN", "PROPN")
    #: count the modifier nouns of compounds ("motor" in "motor bike") as nouns of their own
    compounds_as_nouns: bool = False
    #: NP features as a ratio per identified noun ("noun") or as a count per caption ("caption")
    np_unit: str = "noun"
    #: count participles in attributive position ("a crocheted hat") as adjectives
    participles: bool = False
    #: count predicative adjectives ("the dog is brown") as adjectives of the subject noun
    predicative: bool = False
    #: dependency relations from a noun that make a complement phrase
    cp_relations: tuple = ("prep", "acl", "relcl")
    #: "a lot of", "a couple of", "a number of", ... quantify the noun after "of"
    phrasal_quantifiers: bool = True
    #: concept depth of a word: aggregate over its synsets ...
    depth_synsets: str = "max"
    #: ... of this per-synset measure (NLTK ``Synset.min_depth`` / ``max_depth``)
    depth_measure: str = "min_depth"
    #: which words get a depth: the identified nouns, optionally also verbs
    depth_pos: tuple = ("NOUN",)
    #: look noun compounds up as WordNet multiword entries ("fire_hydrant") before the head noun
    multiword: bool = True
    #: caption length in characters, characters without spaces, or words
    length_unit: str = "chars"
    #: words: spaCy tokens with a letter or digit ("token") or whitespace-separated chunks
    word_unit: str = "token"
    #: numerator of concept diversity (denominator: the word count)
    diversity: str = "synonyms"

    def __post_init__(self):
        for name, choices in _CHOICES.items():
            if getattr(self, name) not in choices:
                raise VlbenchError(f"granularity option {name}={getattr(self, name)!r} is not valid",
                                   f"use one of: {', '.join(choices)}")
        for name, allowed in _TUPLE_CHOICES.items():
            value = getattr(self, name)
            if isinstance(value, str):
                value = tuple(v.strip() for v in value.split(",") if v.strip())
            value = tuple(value)
            bad = [v for v in value if v not in allowed]
            if bad or not value:
                raise VlbenchError(f"granularity option {name}={getattr(self, name)!r} is not valid",
                                   f"give one or more of: {', '.join(allowed)}")
            object.__setattr__(self, name, value)
        for name in ("compounds_as_nouns", "participles", "predicative", "phrasal_quantifiers", "multiword"):
            if not isinstance(getattr(self, name), bool):
                raise VlbenchError(f"granularity option {name} must be True or False",
                                   f"got {getattr(self, name)!r}")

    @classmethod
    def from_kwargs(cls, **kwargs) -> "FeatureOptions":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise VlbenchError(f"unknown granularity option(s): {', '.join(unknown)}",
                               f"valid options: {', '.join(sorted(known))}")
        return cls(**kwargs)

    def to_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    @property
    def parse_key(self) -> str:
        """Options that change what is parsed (others reuse the same parse)."""
        return self.normalize


#: named sets of readings (docs/granularity.md, "Profiles"). "per-noun": the NP features as ratios per
#: identified noun, as section 5.3.1 defines them. "paper": the chapter's results paragraph and its two
#: published percentages read Table 5.1 per caption ("adjectives per caption"), so the NP features are
#: counts per caption; every other reading is the same in both.
PROFILES = {
    "per-noun": {},
    "paper": {"np_unit": "caption", "participles": True, "predicative": True},
}
DEFAULT_PROFILE = "paper"


def profile_options(profile: str | None = None, **overrides) -> dict:
    """The keyword options of a named profile, with ``overrides`` (not None) on top."""
    name = DEFAULT_PROFILE if profile is None else profile
    if name not in PROFILES:
        raise VlbenchError(f"unknown granularity profile {name!r}", f"use one of: {', '.join(PROFILES)}")
    out = dict(PROFILES[name])
    out.update({k: v for k, v in overrides.items() if v is not None})
    return out


def resolve_options(options: FeatureOptions | None = None, profile: str | None = None,
                    **kwargs) -> FeatureOptions:
    """Options from a FeatureOptions object, or from a profile (default ``DEFAULT_PROFILE``) with
    keyword options on top."""
    if options is not None and (kwargs or profile is not None):
        raise VlbenchError("pass either a FeatureOptions object or a profile / keyword options, not both")
    return options if options is not None else FeatureOptions.from_kwargs(**profile_options(profile, **kwargs))


# ----------------------------------------------------------------------------------------------
# text checks and normalisation

_WS = re.compile(r"\s+")
_APOSTROPHES = "'\u2019\u2018`\u00b4"


def normalize_text(text: str, mode: str = "none") -> str:
    """NFC, whitespace runs collapsed, ends stripped; mode "fg" also lowercases and drops punctuation."""
    text = unicodedata.normalize("NFC", text)
    if mode == "fg":
        text = text.lower()
        text = "".join("" if ch in _APOSTROPHES else (" " if unicodedata.category(ch)[0] == "P" else ch)
                       for ch in text)
    return _WS.sub(" ", text).strip()


def text_problem(text) -> str | None:
    """Why a caption is excluded from analysis (None: it is analysed).

    * not a string, empty or whitespace only;
    * no letter or digit at all (emoji only, punctuation only);
    * mostly written in a non-Latin script (Chinese, Arabic, Cyrillic, ...): fewer than half of its
      letters are Latin letters. The English spaCy pipeline and WordNet cannot analyse such text,
      so its counts would be meaningless, not zero.
    """
    if not isinstance(text, str):
        return f"not a string ({type(text).__name__})"
    if not text.strip():
        return "empty caption"
    letters = [ch for ch in text if ch.isalpha()]
    if not letters and not any(ch.isdigit() for ch in text):
        return "no letters or digits (e.g. emoji or punctuation only)"
    if letters:
        latin = sum(1 for ch in letters if unicodedata.name(ch, "").startswith("LATIN"))
        if latin * 2 < len(letters):
            scripts = Counter(unicodedata.name(ch, "UNKNOWN").split(" ")[0] for ch in letters
                              if not unicodedata.name(ch, "").startswith("LATIN"))
            return f"not in Latin script ({scripts.most_common(1)[0][0].lower()}): English analysis does not apply"
    return None


def _has_alnum(s: str) -> bool:
    return any(ch.isalnum() for ch in s)


# ----------------------------------------------------------------------------------------------
# WordNet look-ups, cached per (word, WordNet part of speech)

_SYNSETS: dict = {}
_DEPTH: dict = {}
_LEMMAS: dict = {}


def _wn():
    from .. import lang

    return lang.wordnet()


def synsets(word: str, pos: str) -> tuple:
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


def synonym_lemmas(word: str, pos: str) -> frozenset:
    """All lemma names of all synsets of the word (its WordNet synonyms, itself included)."""
    key = (word, pos)
    got = _LEMMAS.get(key)
    if got is None:
        got = frozenset(l.lower() for s in synsets(word, pos) for l in s.lemma_names())
        _LEMMAS[key] = got
    return got


def clear_caches() -> None:
    _SYNSETS.clear()
    _DEPTH.clear()
    _LEMMAS.clear()


# ----------------------------------------------------------------------------------------------
# one parsed caption -> counts


def _conj_root(t):
    while t.dep_ == "conj" and t.head.i != t.i:
        t = t.head
    return t


def analyse_doc(doc, opts: FeatureOptions, text: str | None = None) -> dict:
    """Counts for one parsed caption (spaCy ``Doc``). ``text``: the caption as analysed."""
    text = doc.text if text is None else text
    toks = list(doc)
    noun_pos = opts.noun_pos
    lower = [t.lower_ for t in toks]

    # 1. multi-token quantifiers and complex prepositions: their nouns are not "identified nouns"
    skip: set[int] = set()          # token ids that are parts of quantifiers / complex prepositions
    proxy: dict[int, int] = {}      # quantity noun -> the noun it quantifies (its modifiers move there)
    skip_of: set[int] = set()       # the "of" of those phrases (not a complement phrase)
    credit: Counter = Counter()     # noun id -> quantifiers from "a lot of" & co.
    if opts.phrasal_quantifiers:
        for t in toks:
            if lower[t.i] in QUANTITY_NOUNS and t.pos_ in ("NOUN", "PROPN", "NUM"):
                of = next((c for c in t.children if c.dep_ == "prep" and c.lower_ == "of"), None)
                obj = None if of is None else next((g for g in of.children if g.dep_ == "pobj"), None)
                if obj is not None and obj.pos_ in noun_pos:
                    skip.add(t.i)
                    skip_of.add(of.i)
                    proxy[t.i] = obj.i
                    credit[obj.i] += 1
    for t in toks:
        if (lower[t.i] in COMPLEX_PREP_NOUNS and t.dep_ == "pobj" and t.head.lower_ in _COMPLEX_PREP_HEADS
                and not any(c.dep_ in ("det", "amod", "poss", "nummod", "compound") for c in t.children)
                and any(c.dep_ == "prep" and c.lower_ == "of" for c in t.children)):
            skip.add(t.i)

    excluded_deps = ("nummod", "quantmod") if opts.compounds_as_nouns else ("compound", "nummod", "quantmod")
    nouns = [t for t in toks if t.pos_ in noun_pos and t.i not in skip and t.dep_ not in excluded_deps]
    noun_ids = {t.i for t in nouns}

    def noun_of(head) -> int | None:
        h = proxy.get(head.i, head.i)
        return h if h in noun_ids else None

    n_adj = n_cp = n_art = n_quant = 0
    n_quant += sum(credit[i] for i in noun_ids)
    for t in toks:
        if t.head.i == t.i:
            continue
        lw, dep, pos = lower[t.i], t.dep_, t.pos_
        # adjectives ------------------------------------------------------------------------
        is_adj = pos == "ADJ" or (opts.participles and pos == "VERB" and t.tag_ in ("VBN", "VBG"))
        if is_adj and lw not in QUANTIFIER_WORDS:
            r = _conj_root(t) if dep == "conj" else t
            if r.dep_ == "amod" and noun_of(r.head) is not None:
                n_adj += 1
            elif opts.predicative and r.dep_ == "acomp" and pos == "ADJ":
                subj = next((c for c in r.head.children if c.dep_ in ("nsubj", "nsubjpass")), None)
                if subj is not None and subj.i in noun_ids:
                    n_adj += 1
        # complement phrases ------------------------------------------------------------------
        if t.i not in skip_of:
            r = _conj_root(t) if dep == "conj" and pos in ("ADP", "VERB", "AUX") else t
            rel = r.dep_
            if rel in opts.cp_relations and noun_of(r.head) is not None:
                n_cp += 1
            elif ("prep" in opts.cp_relations and rel == "advmod" and r.pos_ == "ADV" and r.i == t.i
                  and noun_of(r.head) is not None and any(c.dep_ == "prep" for c in r.children)):
                n_cp += 1  # complex preposition headed by an adverb: "next to", "close to"
        # articles ------------------------------------------------------------------------------
        if dep == "det" and lw in ARTICLES and t.head.i in noun_ids:
            nxt = lower[t.i + 1] if t.i + 1 < len(toks) else ""
            if not (lw in ("a", "an") and (nxt in _A_QUANT_NEXT or t.i + 1 in proxy)):
                n_art += 1
        # quantifiers ------------------------------------------------------------------------
        if t.head.i in noun_ids:
            if dep == "nummod" or (lw in QUANTIFIER_WORDS and dep in ("det", "predet", "preconj", "amod",
                                                                      "quantmod", "advmod", "nmod")):
                n_quant += 1

    # 2. concept depth ------------------------------------------------------------------------
    depths: list[float] = []
    if "NOUN" in opts.depth_pos:
        for n in nouns:
            d = None
            if opts.multiword:
                comp = []
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
            if d is not None:
                depths.append(d)
    if "VERB" in opts.depth_pos:
        for t in toks:
            if t.pos_ == "VERB":
                d = word_depth(lower[t.i], "v", opts.depth_synsets, opts.depth_measure)
                if d is not None:
                    depths.append(d)

    # 3. words and concepts -------------------------------------------------------------------
    n_tokens = sum(1 for t in toks if _has_alnum(t.text))
    n_ws = sum(1 for w in text.split() if _has_alnum(w))
    n_words = n_tokens if opts.word_unit == "token" else n_ws
    content = [(lower[t.i], _WN_POS[t.pos_]) for t in toks
               if t.pos_ in _WN_POS and t.i not in skip and _has_alnum(t.text)]
    n_concepts = _count_concepts(content, opts.diversity)

    return {
        "n_chars": len(text),
        "n_chars_nospace": sum(1 for ch in text if not ch.isspace()),
        "n_words": n_words,
        "n_nouns": len(nouns),
        "n_adjectives": n_adj,
        "n_complement_phrases": n_cp,
        "n_articles": n_art,
        "n_quantifiers": n_quant,
        "n_depth_words": len(depths),
        "depth_sum": float(sum(depths)),
        "n_content_words": len(content),
        "n_concepts": n_concepts,
    }


def _count_concepts(content: Sequence[tuple[str, str]], mode: str) -> int:
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
        for s in synsets(w, p):
            j = owner.setdefault(s, i)
            if j != i:
                a, b = find(i), find(j)
                if a != b:
                    parent[a] = b
    return len({find(i) for i in range(len(items))})


def features_from_counts(c: dict, opts: FeatureOptions) -> dict:
    """The eight feature values of one caption from its counts (NaN where undefined)."""
    nan = math.nan
    n_nouns = c["n_nouns"]
    out = {}
    for feat in NP_FEATURES:
        k = c[f"n_{feat}"]
        out[feat] = (k / n_nouns if n_nouns else nan) if opts.np_unit == "noun" else float(k)
    out["concept_depth"] = c["depth_sum"] / c["n_depth_words"] if c["n_depth_words"] else nan
    out["caption_length"] = float({"chars": c["n_chars"], "chars_nospace": c["n_chars_nospace"],
                                   "words": c["n_words"]}[opts.length_unit])
    out["words_per_caption"] = float(c["n_words"])
    out["concept_diversity"] = c["n_concepts"] / c["n_words"] if c["n_words"] else nan
    return out


# ----------------------------------------------------------------------------------------------
# many captions

COUNT_COLUMNS = ("n_chars", "n_chars_nospace", "n_words", "n_nouns", "n_adjectives", "n_complement_phrases",
                 "n_articles", "n_quantifiers", "n_depth_words", "depth_sum", "n_content_words", "n_concepts")


def analyse_texts(texts: Iterable, opts: FeatureOptions, *, batch_size: int = 1000, n_process: int = 1,
                  progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """One record per input text: ``text`` (as analysed), ``status``, ``reason``, counts, features.

    Each distinct (normalised) text is parsed once. Excluded texts get status "excluded", a reason
    and NaN features.
    """
    texts = list(texts)
    normalized: list = []
    problems: list = []
    for raw in texts:
        problem = text_problem(raw)
        norm = normalize_text(raw, opts.normalize) if problem is None else (raw if isinstance(raw, str) else None)
        if problem is None and not norm:
            problem = "empty after normalisation"
        if problem is None:
            problem = text_problem(norm)
        normalized.append(norm)
        problems.append(problem)
    unique = list(dict.fromkeys(n for n, p in zip(normalized, problems) if p is None))
    counts: dict[str, dict] = {}
    if unique:
        from .. import lang

        nlp = lang.nlp()
        _wn()  # load WordNet before timing-sensitive work and before forking workers
        kw = {"batch_size": batch_size}
        if n_process and n_process > 1:
            kw["n_process"] = n_process
        for k, (text, doc) in enumerate(zip(unique, nlp.pipe(unique, **kw)), start=1):
            counts[text] = analyse_doc(doc, opts, text)
            if progress is not None and (k % 5000 == 0 or k == len(unique)):
                progress(k, len(unique))
    records = []
    nan_feats = {f: math.nan for f in FEATURES}
    for norm, problem in zip(normalized, problems):
        if problem is not None:
            rec = {"text": norm, "status": "excluded", "reason": problem}
            rec.update({c: math.nan for c in COUNT_COLUMNS})
            rec.update(nan_feats)
        else:
            c = counts[norm]
            rec = {"text": norm, "status": "ok", "reason": "" if c["n_nouns"] else "no noun (NP features undefined)"}
            rec.update(c)
            rec.update(features_from_counts(c, opts))
        records.append(rec)
    return records


def caption_features(texts: Iterable, *, batch_size: int = 1000, n_process: int = 1,
                     options: FeatureOptions | None = None, profile: str | None = None, **feature_options):
    """Per-caption granularity features as a pandas DataFrame (one row per input text, same order).

    Columns: ``text`` (as analysed), ``status`` ("ok" / "excluded"), ``reason``, the eight
    ``FEATURES`` (NaN where undefined: excluded captions; NP ratios of captions without nouns;
    depth of captions without a noun in WordNet), and the raw counts (``n_nouns``, ``n_adjectives``,
    ...). ``profile``: a named set of readings (``PROFILES``); ``feature_options``: fields of
    ``FeatureOptions`` on top of it.
    """
    import pandas as pd

    opts = resolve_options(options, profile, **feature_options)
    if isinstance(texts, str):
        texts = [texts]
    records = analyse_texts(texts, opts, batch_size=batch_size, n_process=n_process)
    cols = ["text", "status", "reason", *FEATURES, *COUNT_COLUMNS]
    return pd.DataFrame.from_records(records, columns=cols)
