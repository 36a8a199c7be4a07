"""A synonym never brings in a word the caption already has (as a word or a form of one), and
a derived word is never replaced by its base ("bluish" -> "blue"); the audit checks that count both."""

from __future__ import annotations

import pytest

import vlbench.perturbations as P
from vlbench.perturbations.synonym_audit import classify, introduces_present_word, is_derived
from vlbench.perturbations.synonym_words import caption_word_forms, common_candidates, is_derivation

pytestmark = pytest.mark.usefixtures("language")
OFF = {"synonym-noun": {"guard": "off"}, "synonym-adjective": {"guard": "off"}}


def _run(caps, names, params=OFF):
    return P.perturb_captions(caps, [f"c{i}" for i in range(len(caps))], names,
                              params={n: params[n] for n in names})


@pytest.mark.parametrize("caption, name, candidate", [
    ("A variety of shops and stores on a busy city street.", "synonym-noun", "stores"),  # the case
    ("A clean bathroom is pictured in this image.", "synonym-noun", "picture"),  # lemma: pictured -> picture
    ("A giraffe with a big head and large ears.", "synonym-adjective", "large"),
])
def test_a_candidate_already_in_the_caption_is_refused(caption, name, candidate):
    word = {"stores": "shops", "picture": "image", "large": "big"}[candidate]
    pos, plural = ("n", word.endswith("s")) if name == "synonym-noun" else ("a", False)
    # the rules alone would pick it (it is the word's top candidate) ...
    assert common_candidates(word, pos, plural)[0] == candidate
    assert candidate in caption_word_forms(caption) or candidate.rstrip("s") in caption_word_forms(caption)
    # ... but the perturbation does not: nothing else qualifies in these captions, so it is not applicable
    ps = _run([caption], [name])[name]
    assert ps.texts == [caption] and ps.applicable == [False]


def test_other_words_of_the_caption_still_get_their_synonym():
    caps = ["Children sitting on a giraffe statue with other kids nearby.", "A big dog on a small bed.",
            "Several shops line the street."]
    sets = _run(caps, ["synonym-noun", "synonym-adjective"])
    # "kids" is in the caption, so "children" gets the next candidate; "stores" is fine where it is new
    assert sets["synonym-noun"].texts == ["Youngsters sitting on a giraffe statue with other kids nearby.",
                                          "A big dog on a small bed.", "Several stores line the street."]
    assert sets["synonym-adjective"].texts[1] == "A large dog on a small bed."


def test_bluish_is_not_replaced_by_blue():
    assert common_candidates("bluish", "a", False) == ("blue",)  # WordNet lists it; the rule must refuse it
    ps = _run(["A bluish train car pulls into a station."], ["synonym-adjective"])["synonym-adjective"]
    assert ps.applicable == [False]


@pytest.mark.parametrize("word, cand, expected", [
    ("bluish", "blue", True), ("reddish", "red", True), ("sandy", "sand", True), ("wooden", "wood", True),
    ("childlike", "child", True), ("blue", "bluish", True), ("car", "automobile", False), ("big", "large", False),
    ("couch", "sofa", False), ("plane", "airplane", False),
])
def test_is_derivation(word, cand, expected):
    assert is_derivation(word, cand) is expected


def test_caption_word_forms_hold_words_and_their_bases():
    forms = caption_word_forms("Two dogs were running past shops.")
    assert {"dogs", "dog", "running", "run", "shops", "shop", "were", "be"} <= forms


def test_audit_checks_f_and_g():
    assert introduces_present_word("Several shops and stores.", "shops", "stores")
    assert introduces_present_word("A store next to some shops.", "shops", "stores")  # a form of "store"
    assert not introduces_present_word("A girl in a child's swing.", "child's", "kid's")  # the clitic is not new
    assert is_derived("bluish", "blue") and not is_derived("couch", "sofa")
    flags = classify("A bluish train car pulls into a station.", "A blue train car pulls into a station.", "adjective")
    assert flags["derivation"] == 1 and flags["present"] == 0
    flags = classify("A variety of shops and stores.", "A variety of stores and stores.", "noun")
    assert flags["present"] == 1 and flags["repeat"] == 0  # not adjacent: the old check did not see it


def test_version_was_bumped():
    assert P.BUILTINS["synonym-noun"][2] == "2.2" and P.BUILTINS["synonym-adjective"][2] == "2.2"


def test_every_wordnet_load_skips_nltks_identity_map_of_wordnet_30(wordnet_ready):
    """lang.wordnet() (the language fixtures, the audit, the resource versions) loads WordNet 3.0 without
    NLTK 3.9+'s map of 3.0 onto itself: it read index.sense twice, most of a load's seconds (tests/README.md)."""
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    assert getattr(WordNetCorpusReader.map_wn, "_vlbench_identity", False)
    assert wordnet_ready.get_version() == "3.0" and wordnet_ready.map_wn() is None
