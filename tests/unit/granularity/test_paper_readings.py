"""The paper profile's readings of complement phrases, quantifiers, concept depth and
concept diversity (docs/granularity.md gives the argument for each), on gold parses worked by hand.

Each gold ``Doc`` has hand-written tags and dependencies, so the counting rules are checked without the
statistical parser; WordNet depths are NLTK's ``min_depth`` values of WordNet 3.0 (stated in comments).
"""

from __future__ import annotations

import pytest
from support.gold_parse import gold  # noqa: E402

from vlbench.errors import VlbenchError  # noqa: E402
from vlbench.granularity.features import FeatureOptions, analyse_doc, features_from_counts, profile_options  # noqa: E402

PAPER = FeatureOptions.from_kwargs(**profile_options("paper"))
PER_CAPTION = FeatureOptions.from_kwargs(**profile_options("per-caption"))  # CPs inside noun phrases
PER_NOUN = FeatureOptions.from_kwargs(**profile_options("per-noun"))


def feats(doc, opts):
    return features_from_counts(analyse_doc(doc, opts), opts)


MAN_RIDING = ("a/DET/DT/det/1 man/NOUN/NN/ROOT/1 riding/VERB/VBG/acl/1 a/DET/DT/det/4 horse/NOUN/NN/dobj/2 "
              "in/ADP/IN/prep/2 a/DET/DT/det/7 field/NOUN/NN/pobj/5")


def test_the_paper_profile_names_the_four_readings():
    for name in ("paper", "per-caption"):  # the study's profile and the library's default share these
        readings = profile_options(name)
        assert readings["quantifier_set"] == "numerals"
        assert readings["depth_pos"] == ("NOUN", "VERB")
        assert readings["diversity"] == "concepts"
    # CPs: inside a noun's phrase (the library's default) / every prepositional phrase (the paper)
    assert profile_options("per-caption")["cp_scope"] == "np"
    assert (PAPER.cp_scope, PAPER.cp_relations) == ("caption", ("prep",))
    # FeatureOptions' own defaults (the per-noun profile) keep the earlier readings
    assert (PER_NOUN.cp_scope, PER_NOUN.quantifier_set, PER_NOUN.depth_pos, PER_NOUN.diversity) == \
        ("noun", "all", ("NOUN",), "synonyms")


def test_complement_phrases_inside_the_noun_phrase(vocab, wordnet_ready):
    # "a man riding a horse in a field": "riding a horse in a field" is an acl of "man"; "in a field"
    # attaches to "riding", so it lies inside the man's phrase.
    #   cp_scope="noun": riding (acl of man) -> 1;   cp_scope="np": riding + in -> 2;
    #   paper (every prepositional phrase): "in a field" -> 1 (the participial clause is a verb phrase)
    doc = gold(vocab, MAN_RIDING)
    assert analyse_doc(doc, FeatureOptions(np_unit="caption"))["n_complement_phrases"] == 1
    assert analyse_doc(doc, PER_CAPTION)["n_complement_phrases"] == 2
    assert feats(doc, PER_CAPTION)["complement_phrases"] == 2.0
    assert analyse_doc(doc, PAPER)["n_complement_phrases"] == 1


def test_the_paper_counts_a_phrase_whatever_it_attaches_to(vocab, wordnet_ready):
    # "a dog runs in a park": "in a park" hangs from the main verb, not from any noun -> 0 in the noun
    # scopes; the paper's reading counts it, as it counts the same detail in "a dog running in a park"
    runs = gold(vocab, "a/DET/DT/det/1 dog/NOUN/NN/nsubj/2 runs/VERB/VBZ/ROOT/2 in/ADP/IN/prep/2 "
                       "a/DET/DT/det/5 park/NOUN/NN/pobj/3")
    running = gold(vocab, "a/DET/DT/det/1 dog/NOUN/NN/ROOT/1 running/VERB/VBG/acl/1 in/ADP/IN/prep/2 "
                          "a/DET/DT/det/5 park/NOUN/NN/pobj/3")
    assert analyse_doc(runs, PER_CAPTION)["n_complement_phrases"] == 0
    assert analyse_doc(runs, PER_NOUN)["n_complement_phrases"] == 0
    assert analyse_doc(running, PER_CAPTION)["n_complement_phrases"] == 2  # the clause and its phrase
    assert analyse_doc(runs, PAPER)["n_complement_phrases"] == 1
    assert analyse_doc(running, PAPER)["n_complement_phrases"] == 1       # the same detail, the same count


def test_complex_prepositions_and_phrasal_quantifiers_stay_one_phrase(vocab, wordnet_ready):
    # "a cat in front of a fence": "in front of" is one complex preposition -> 1 (the "of" under the
    # non-noun "front" is not a second phrase)
    doc = gold(vocab, "a/DET/DT/det/1 cat/NOUN/NN/ROOT/1 in/ADP/IN/prep/1 front/NOUN/NN/pobj/2 "
                      "of/ADP/IN/prep/3 a/DET/DT/det/6 fence/NOUN/NN/pobj/4")
    for opts in (PAPER, PER_CAPTION):
        assert analyse_doc(doc, opts)["n_complement_phrases"] == 1
    # "a lot of people in a park", "in a park" parsed onto "lot": the "of" of the quantifier is not a
    # phrase, "in a park" belongs to "people" -> 1
    doc = gold(vocab, "a/DET/DT/det/1 lot/NOUN/NN/ROOT/1 of/ADP/IN/prep/1 people/NOUN/NNS/pobj/2 "
                      "in/ADP/IN/prep/1 a/DET/DT/det/6 park/NOUN/NN/pobj/4")
    for opts in (PAPER, PER_CAPTION):
        assert analyse_doc(doc, opts)["n_complement_phrases"] == 1


def test_quantifiers_are_the_numerals(vocab, wordnet_ready):
    # "two dogs and several cats with twenty five birds"
    #   numerals: two, "twenty five" (one number: "twenty" is a part of "five") -> 2
    #   all quantifiers (per-noun reading): two, several, five -> 3 (per noun: 3 / 3 nouns)
    doc = gold(vocab, "two/NUM/CD/nummod/1 dogs/NOUN/NNS/ROOT/1 and/CCONJ/CC/cc/1 several/ADJ/JJ/amod/4 "
                      "cats/NOUN/NNS/conj/1 with/ADP/IN/prep/1 twenty/NUM/CD/compound/7 five/NUM/CD/nummod/8 "
                      "birds/NOUN/NNS/pobj/5")
    assert analyse_doc(doc, PAPER)["n_quantifiers"] == 2
    assert analyse_doc(doc, PER_NOUN)["n_quantifiers"] == 3
    assert feats(doc, PER_NOUN)["quantifiers"] == pytest.approx(3 / 3)
    # "two men, one in red": the second numeral quantifies the elided noun ("one [man]") -> 2
    doc = gold(vocab, "two/NUM/CD/nummod/1 men/NOUN/NNS/ROOT/1 ,/PUNCT/,/punct/1 one/NUM/CD/appos/1 "
                      "in/ADP/IN/prep/3 red/NOUN/NN/pobj/4")
    assert analyse_doc(doc, PAPER)["n_quantifiers"] == 2
    assert analyse_doc(doc, PER_NOUN)["n_quantifiers"] == 1


def test_concept_depth_of_nouns_and_verbs(vocab, wordnet_ready):
    # max over synsets of min_depth: man 13 (homo.n.02), horse 14, field 8; riding (ride, verb) 4
    doc = gold(vocab, MAN_RIDING)
    assert feats(doc, PER_NOUN)["concept_depth"] == pytest.approx((13 + 14 + 8) / 3)
    assert feats(doc, PAPER)["concept_depth"] == pytest.approx((13 + 14 + 8 + 4) / 4)


def test_concept_diversity_counts_distinct_concepts_per_caption(vocab, wordnet_ready):
    # "a man and a guy with a bike and a bicycle": words a, man, and, a, guy, with, a, bike, and, a, bicycle
    #   (11); distinct words a, man, and, guy, with, bike, bicycle (7); bike and bicycle share bicycle.n.01
    #   (one concept), man and guy share no synset -> 6 concepts in the caption
    doc = gold(vocab, "a/DET/DT/det/1 man/NOUN/NN/ROOT/1 and/CCONJ/CC/cc/1 a/DET/DT/det/4 guy/NOUN/NN/conj/1 "
                      "with/ADP/IN/prep/1 a/DET/DT/det/7 bike/NOUN/NN/pobj/5 and/CCONJ/CC/cc/7 "
                      "a/DET/DT/det/10 bicycle/NOUN/NN/conj/7")
    assert feats(doc, PAPER)["concept_diversity"] == 6.0
    assert analyse_doc(doc, PAPER)["n_content_words"] == 4  # man, guy, bike, bicycle: still content words only
    # the per-noun reading: distinct content concepts (man, guy, bike/bicycle) per word -> 3 / 11
    assert feats(doc, PER_NOUN)["concept_diversity"] == pytest.approx(3 / 11)
    # a function word with WordNet noun senses ("a": ampere, vitamin A, ...) is not merged through them
    doc = gold(vocab, "a/DET/DT/det/1 ampere/NOUN/NN/ROOT/1")
    assert feats(doc, PAPER)["concept_diversity"] == 2.0


def test_the_readings_are_options_of_their_own(vocab, wordnet_ready):
    doc = gold(vocab, MAN_RIDING)
    o = FeatureOptions(cp_scope="np")
    assert analyse_doc(doc, o)["n_complement_phrases"] == 2 and o.quantifier_set == "all"
    with pytest.raises(VlbenchError, match="cp_scope"):
        FeatureOptions(cp_scope="sentence")
    with pytest.raises(VlbenchError, match="quantifier_set"):
        FeatureOptions(quantifier_set="some")
