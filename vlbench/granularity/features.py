"""Per-caption granularity features: adjectives, complement phrases, articles, quantifiers, concept depth and diversity.

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
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields

from .. import registry
from ..errors import VlbenchError
from .counts import _wn, analyse_doc

FEATURES = ("adjectives", "complement_phrases", "articles", "quantifiers", "concept_depth",
            "caption_length", "words_per_caption", "concept_diversity")
NP_FEATURES = FEATURES[:4]

# ----------------------------------------------------------------------------------------------
# options

_CHOICES = {
    "normalize": ("none", "fg"),
    "np_unit": ("noun", "caption"),
    "depth_synsets": ("max", "min", "mean", "first"),
    "depth_measure": ("min_depth", "max_depth"),
    "length_unit": ("chars", "chars_nospace", "words"),
    "word_unit": ("token", "whitespace"),
    "diversity": ("synonyms", "first_sense", "lemmas", "synonym_pool", "concepts"),
    "cp_scope": ("noun", "np", "caption"),
    "quantifier_set": ("all", "numerals"),
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
    #: complement phrases attached to an identified noun ("noun"), anywhere inside its phrase ("np":
    #: "in a field" of "a man riding a horse in a field" belongs to the man's phrase), or anywhere in the
    #: caption, whatever the phrase attaches to ("caption": "a man is standing *on a ladder*" counts as
    #: "a man standing *on a ladder*" does)
    cp_scope: str = "noun"
    #: "a lot of", "a couple of", "a number of", ... quantify the noun after "of"
    phrasal_quantifiers: bool = True
    #: quantifiers: numerals, quantifying words and phrasal quantifiers ("all") or the numbers only
    #: ("numerals": the exact quantities, universal POS NUM)
    quantifier_set: str = "all"
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
    #: numerator of concept diversity (denominator: the word count); "concepts": the number of distinct
    #: concepts among all the caption's words, per caption (not divided)
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
    def from_kwargs(cls, **kwargs) -> FeatureOptions:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise VlbenchError(f"unknown granularity option(s): {', '.join(unknown)}",
                               f"valid options: {', '.join(sorted(known))}")
        return cls(**kwargs)

    def to_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}


#: the library's named sets of readings (docs/granularity.md, "Profiles"); more come from the registry
#: (``vlbench.registry.granularity_profiles``, e.g. a study's reading of its own table). "per-noun": the NP
#: features as ratios per identified noun. "per-caption" (the default): the NP features as counts per
#: caption ("adjectives per caption"), CPs anywhere inside a noun's phrase, numerals as the quantifiers,
#: the depth of nouns and verbs, and concept diversity as the number of distinct concepts per caption
#: (each reading argued in docs/granularity.md).
PROFILES = {
    "per-noun": {},
    "per-caption": {"np_unit": "caption", "participles": True, "predicative": True, "cp_scope": "np",
                    "quantifier_set": "numerals", "depth_pos": ("NOUN", "VERB"), "diversity": "concepts"},
}
DEFAULT_PROFILE = "per-caption"
for _name, _readings in PROFILES.items():
    registry.granularity_profiles.register(_name, _readings, description="built-in feature readings")


def profile_options(profile: str | None = None, **overrides) -> dict:
    """The keyword options of a named profile, with ``overrides`` (not None) on top."""
    name = DEFAULT_PROFILE if profile is None else profile
    if name not in registry.granularity_profiles:
        raise VlbenchError(f"unknown granularity profile {name!r}",
                           f"use one of: {', '.join(registry.granularity_profiles.names())}")
    out = dict(registry.granularity_profiles.get(name))
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
    if opts.diversity == "concepts":
        out["concept_diversity"] = float(c["n_concepts"]) if c["n_words"] else nan
    else:
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
        from .. import lang  # lazy: vlbench ls imports this module; keep it light

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
