"""Authors-compatible variants of the 13 perturbations (``variant="hendriksen2024"``).

They follow what the code of Hendriksen et al. (github.com/mariyahendriksen/model-robustness-for-itr,
``src/perturbations/perturbation_types``) does, so that the chapter's numbers can be reproduced:

- typos: the ``typo`` package, ``typo.StrErrer(caption, seed=42)`` built afresh for every caption, one
  call of ``char_swap`` / ``missing_char`` / ``extra_char`` / ``nearby_char``; exact.
- distractions: ``caption.strip('.') + ' ' + phrase + '.'`` with the phrases "and true it true" (sic) and
  "and false is false"; exact.
- synonyms: NLTK ``word_tokenize`` (NLTK 3.8.1's rules whatever NLTK is installed: :func:`nltk_tokens`) +
  ``pos_tag``; the first noun (NN*) / adjective (JJ*) that has a WordNet
  synonym is replaced by the first lemma name of any part of speech that differs from the word
  (underscores become spaces); tokens re-joined with single spaces. Needs NLTK's tokenizer and tagger data.
- shuffles: ARO's ``TextShuffler`` (mertyg/vision-language-models-are-bows): spaCy tokens joined with
  single spaces for the noun/adjective shuffles, ``str.split(" ")`` for all words, NLTK ``word_tokenize``
  for the trigram shuffles. ARO draws from the global unseeded NumPy / ``random`` state; here the draws
  come from vlbench's per-(seed, caption id) stream, so the permutations differ from any one run of
  theirs but the token and punctuation behaviour is the same and runs are repeatable.

The condition names are those of the standard perturbations, so tables line up; the version strings
carry the variant so cached results of the two never mix.
"""

from __future__ import annotations

from vlbench import langdata, stores
from vlbench.errors import VlbenchError
from vlbench.lang import skip_identity_map
from vlbench.perturbations.base import CaptionRNG, Token
from vlbench.perturbations.support.languages import LANGUAGE_FREE
from vlbench.perturbations.variants import PerturbationVariant

from .tokenizer381 import TOKENIZER, tokenize_sentence

VARIANT = "hendriksen2024"
VERSION = "hendriksen2024-1"
TYPO_SEED = 42
DISTRACTION_PHRASES = {"distraction-true": "and true it true", "distraction-false": "and false is false"}
TYPO_METHODS = {"char-swap": "char_swap", "missing-char": "missing_char", "extra-char": "extra_char",
                "nearby-char": "nearby_char"}
_NOUN_TAGS = ("NN", "NNS", "NNP", "NNPS")
_ADJ_TAGS = ("JJ", "JJR", "JJS")


def _typo_module():
    try:
        import typo
    except ImportError as exc:
        raise VlbenchError("the hendriksen2024 typo variants need the 'typo' package, which is not installed",
                           "pip install typo==0.1.7") from exc
    return typo


_STORES_SEARCHED: set = set()  # cache roots whose language-data store NLTK already searches


def _search_store() -> None:
    """Make NLTK search vlbench's language-data store (once per cache root, not on every NLTK call)."""
    root = str(stores.root())  # the current cache root (--cache-dir / stores.using)
    if root not in _STORES_SEARCHED:
        langdata.use_store()
        _STORES_SEARCHED.add(root)


def _nltk_call(what: str, fn, *args):
    """Run an NLTK function (searching vlbench's language-data store too, so `vlbench perturb` and
    ``perturb_captions`` find what `setup-language-data` installed); a missing data package becomes a
    VlbenchError naming the offline route and the download."""
    _search_store()
    try:
        return fn(*args)
    except LookupError as exc:
        raise VlbenchError(f"the hendriksen2024 variant needs NLTK data for {what}, which is not installed",
                           langdata.hint(["punkt_tab", "averaged_perceptron_tagger_eng", "wordnet"])) from exc


def typo_compat(name: str, text: str) -> str:
    """The authors' typo: a fresh ``typo.StrErrer(text, seed=42)`` and one call of the named method."""
    errer = _typo_module().StrErrer(text, seed=TYPO_SEED)
    return getattr(errer, TYPO_METHODS[name])().result


def distraction_compat(name: str, text: str) -> str:
    """The authors' distraction: leading/trailing periods stripped, the phrase and a period appended."""
    return text.strip(".") + " " + DISTRACTION_PHRASES[name] + "."


def nltk_tokens(text: str) -> list[str]:
    """``nltk.word_tokenize(text)`` as NLTK 3.8.1 gives it: Punkt sentences (the installed NLTK's English
    model), each split by :func:`tokenize_sentence`."""
    import nltk
    sentences = _nltk_call("word_tokenize (punkt_tab)", nltk.sent_tokenize, text)
    return [tok for sent in sentences for tok in tokenize_sentence(sent)]


def _first_synonym(word: str) -> str | None:
    from nltk.corpus import wordnet

    skip_identity_map()  # before the lazy corpus loads: a faster load, the same synsets
    for syn in _nltk_call("WordNet (wordnet)", wordnet.synsets, word):
        for lemma in syn.lemmas():
            if lemma.name().lower() != word.lower():
                return lemma.name().replace("_", " ")
    return None


def synonym_compat(name: str, text: str) -> str:
    """The authors' synonym replacement of the first replaceable noun / adjective (see module text)."""
    import nltk
    tags = _NOUN_TAGS if name == "synonym-noun" else _ADJ_TAGS
    tagged = _nltk_call("pos_tag (averaged_perceptron_tagger_eng)", nltk.pos_tag, nltk_tokens(text))
    out, done = [], False
    for word, pos in tagged:
        synonym = _first_synonym(word) if (pos in tags and not done) else None
        out.append(synonym if synonym is not None else word)
        done = done or synonym is not None
    return " ".join(out)


def trigrams(tokens: list[str]) -> list[list[str]]:
    """Consecutive groups of three tokens; the last group keeps what is left (ARO's ``get_trigrams``)."""
    return [tokens[i:i + 3] for i in range(0, len(tokens), 3)]


def _shuffle_at(items: list, idx: list[int], rng: CaptionRNG) -> None:
    chosen = [items[i] for i in idx]
    rng.shuffle(chosen)
    for i, value in zip(idx, chosen):
        items[i] = value


def shuffle_compat(name: str, text: str, rng: CaptionRNG, tokens: tuple[Token, ...] | None) -> str:
    """ARO's shuffles (token/punctuation behaviour of ``TextShuffler``), drawn from ``rng``."""
    if name == "shuffle-all-words":
        words = text.split(" ")
        rng.shuffle(words)
        return " ".join(words)
    if name in ("shuffle-within-trigrams", "shuffle-trigrams"):
        groups = trigrams(nltk_tokens(text))
        if name == "shuffle-trigrams":
            rng.shuffle(groups)
        else:
            for group in groups:
                rng.shuffle(group)
        return " ".join(" ".join(g) for g in groups)
    if tokens is None:
        raise VlbenchError(f"perturbation {name!r} ({VARIANT}) needs spaCy tokens", "call it through the engine")
    words = [t.text for t in tokens]
    nouns = [i for i, t in enumerate(tokens) if t.tag in _NOUN_TAGS]
    adjs = [i for i, t in enumerate(tokens) if t.tag in _ADJ_TAGS]
    if name == "shuffle-nouns-adjectives":
        _shuffle_at(words, nouns, rng)
        _shuffle_at(words, adjs, rng)
    else:
        keep = set(nouns) | set(adjs)
        _shuffle_at(words, [i for i in range(len(words)) if i not in keep], rng)
    return " ".join(words)


_FAMILIES = {**{n: "typos" for n in TYPO_METHODS}, **{n: "distraction" for n in DISTRACTION_PHRASES},
             "synonym-noun": "lexical", "synonym-adjective": "lexical",
             **{n: "word-order" for n in ("shuffle-nouns-adjectives", "shuffle-all-words",
                                          "shuffle-all-but-nouns-adjectives", "shuffle-within-trigrams",
                                          "shuffle-trigrams")}}
NAMES = tuple(_FAMILIES)
#: the perturbations that split words with NLTK's word tokenizer (:func:`nltk_tokens`)
NLTK_TOKENIZED = ("synonym-noun", "synonym-adjective", "shuffle-within-trigrams", "shuffle-trigrams")


class CompatPerturbation:
    """One perturbation under the authors-compatible variant; same name as the standard one."""

    version = VERSION
    tokenizer = TOKENIZER  # how results describe the word tokenizer (resource kind "nltk")

    def __init__(self, name: str):
        if name not in _FAMILIES:
            raise VlbenchError(f"perturbation {name!r} has no {VARIANT} variant",
                               f"the variant exists for: {', '.join(NAMES)}")
        self.name = name
        self.family = _FAMILIES[name]
        self.params = {"variant": VARIANT}
        self.needs_parse = name in ("shuffle-nouns-adjectives", "shuffle-all-but-nouns-adjectives")
        self.resources: tuple = ("spacy",) if self.needs_parse else ()
        if name in NLTK_TOKENIZED:  # recorded: the output depends on these tokenizer rules, not on NLTK's version
            self.params["tokenizer"] = "nltk-3.8.1"
            self.resources = ("nltk", "wordnet") if self.family == "lexical" else ("nltk",)

    def apply(self, text: str, *, rng: CaptionRNG, tokens: tuple[Token, ...] | None = None) -> str | None:
        if self.family == "typos":
            return typo_compat(self.name, text)
        if self.family == "distraction":
            return distraction_compat(self.name, text)
        if self.family == "lexical":
            return synonym_compat(self.name, text)
        return shuffle_compat(self.name, text, rng, tokens)

    def __repr__(self) -> str:
        return f"<perturbation {self.name} v{self.version} {self.params}>"


#: the variant's record (``--perturb-variant hendriksen2024``): what it implements and what it needs
VARIANT_RECORD = PerturbationVariant(
    VARIANT, CompatPerturbation, NAMES,
    nltk_data={"synonym-noun": (langdata.TOKENIZER, langdata.TAGGER),
               "synonym-adjective": (langdata.TOKENIZER, langdata.TAGGER),
               "shuffle-within-trigrams": (langdata.TOKENIZER,), "shuffle-trigrams": (langdata.TOKENIZER,)},
    modules={n: ("typo", "typo==0.1.7") for n in TYPO_METHODS},
    # its trigram shuffles split words with NLTK's English tokenizer, so they are English-only here
    language_free=frozenset(LANGUAGE_FREE - {"shuffle-within-trigrams", "shuffle-trigrams"}),
    tokenizer=TOKENIZER,
    description="the authors-compatible implementations of the 13 perturbations (Hendriksen et al.'s code)")
