"""Granularity features on hand-analysed captions (thesis section 5.3.1).

Every expected number below is worked out by hand in the comments: which words are the identified
nouns, which modifiers attach to them, which WordNet synsets a word has. Two kinds of tests:

* gold-parse tests build a spaCy ``Doc`` with hand-written part-of-speech tags and dependencies,
  so they check the counting rules independently of the statistical parser;
* end-to-end tests run the real pipeline (``en_core_web_sm``) on short captions whose parse is
  unambiguous (each was checked to be parsed the way a linguist would).
"""

from __future__ import annotations

import math

import pytest
from support.gold_parse import gold  # noqa: E402

from vlbench.granularity.features import (FEATURES, FeatureOptions, analyse_doc, caption_features,  # noqa: E402
                                          features_from_counts, normalize_text, text_problem)


def counts(doc, **opts):
    return analyse_doc(doc, FeatureOptions(**opts))


# ------------------------------------------------------------------------------------------------
# gold parses: the counting rules


def test_two_adjectives_and_a_coordinated_adjective(vocab, wordnet_ready):
    # "a black and white dog with a small red collar"
    #  nouns: dog, collar                                  -> 2
    #  adjectives: black (amod dog), white (conj of black, so also a modifier of dog),
    #              small, red (amod collar)                 -> 4
    #  complement phrases: "with a small red collar" (prep of dog) -> 1
    #  articles: a (dog), a (collar)                        -> 2
    doc = gold(vocab, "a/DET/DT/det/4 black/ADJ/JJ/amod/4 and/CCONJ/CC/cc/1 white/ADJ/JJ/conj/1 "
                      "dog/NOUN/NN/ROOT/4 with/ADP/IN/prep/4 a/DET/DT/det/9 small/ADJ/JJ/amod/9 "
                      "red/ADJ/JJ/amod/9 collar/NOUN/NN/pobj/5")
    c = counts(doc)
    assert (c["n_nouns"], c["n_adjectives"], c["n_complement_phrases"], c["n_articles"], c["n_quantifiers"]) == \
        (2, 4, 1, 2, 0)
    f = features_from_counts(c, FeatureOptions())
    assert f["adjectives"] == pytest.approx(4 / 2)          # per identified noun
    assert f["complement_phrases"] == pytest.approx(1 / 2)
    assert f["articles"] == pytest.approx(2 / 2)
    g = features_from_counts(c, FeatureOptions(np_unit="caption"))
    assert g["adjectives"] == 4 and g["complement_phrases"] == 1   # per caption


def test_relative_and_participial_clauses_are_complement_phrases(vocab, wordnet_ready):
    # "the man who holds a bat and wears a hat"
    #  nouns: man, bat, hat -> 3
    #  CPs of man: "who holds a bat" (relcl) and "wears a hat" (conj of the relcl: a second clause) -> 2
    #  the objects bat/hat have no complements; articles: the, a, a -> 3
    doc = gold(vocab, "the/DET/DT/det/1 man/NOUN/NN/ROOT/1 who/PRON/WP/nsubj/3 holds/VERB/VBZ/relcl/1 "
                      "a/DET/DT/det/5 bat/NOUN/NN/dobj/3 and/CCONJ/CC/cc/3 wears/VERB/VBZ/conj/3 "
                      "a/DET/DT/det/9 hat/NOUN/NN/dobj/7")
    c = counts(doc)
    assert (c["n_nouns"], c["n_complement_phrases"], c["n_articles"]) == (3, 2, 3)
    # only prepositional phrases as CPs: the clauses no longer count
    assert counts(doc, cp_relations=("prep",))["n_complement_phrases"] == 0


def test_prepositional_phrase_on_a_verb_is_not_a_noun_complement(vocab, wordnet_ready):
    # "a dog runs in a park": "in a park" modifies the verb, not a noun -> 0 CPs; nouns dog, park
    doc = gold(vocab, "a/DET/DT/det/1 dog/NOUN/NN/nsubj/2 runs/VERB/VBZ/ROOT/2 in/ADP/IN/prep/2 "
                      "a/DET/DT/det/5 park/NOUN/NN/pobj/3")
    c = counts(doc)
    assert (c["n_nouns"], c["n_complement_phrases"], c["n_articles"]) == (2, 0, 2)


def test_a_lot_of_is_one_quantifier_of_the_noun_after_of(vocab, wordnet_ready):
    # "a lot of people with hats": "a lot of" quantifies "people" (1 quantifier); "lot" is not an
    # identified noun, its "a" is not an article, its "of" is not a complement phrase; the CP
    # "with hats" that the parser hangs on "lot" belongs to the NP "a lot of people".
    #  nouns: people, hats -> 2; quantifiers 1; articles 0; CPs 1
    doc = gold(vocab, "a/DET/DT/det/1 lot/NOUN/NN/ROOT/1 of/ADP/IN/prep/1 people/NOUN/NNS/pobj/2 "
                      "with/ADP/IN/prep/1 hats/NOUN/NNS/pobj/4")
    c = counts(doc)
    assert (c["n_nouns"], c["n_quantifiers"], c["n_articles"], c["n_complement_phrases"]) == (2, 1, 0, 1)
    # option off: "lot" is an ordinary noun with an article and two prepositional complements
    c = counts(doc, phrasal_quantifiers=False)
    assert (c["n_nouns"], c["n_quantifiers"], c["n_articles"], c["n_complement_phrases"]) == (3, 0, 1, 2)


def test_a_few_is_a_quantifier_not_an_article(vocab, wordnet_ready):
    # Parsed the way some parsers do it: "a" as det of "people", "few" as amod.
    # Decision: "a few" is one quantifier (a fixed expression for a small number); its "a" is not
    # an article and "few" is not an adjective.  -> nouns 1, quantifiers 1, articles 0, adjectives 0
    doc = gold(vocab, "a/DET/DT/det/2 few/ADJ/JJ/amod/2 people/NOUN/NNS/ROOT/2")
    c = counts(doc)
    assert (c["n_nouns"], c["n_quantifiers"], c["n_articles"], c["n_adjectives"]) == (1, 1, 0, 0)


def test_quantifier_words_and_numerals(vocab, wordnet_ready):
    # "all the two dogs and several cats and 25 birds and no fish"
    #  all (predet), two (nummod) -> dogs; several (amod, but a quantifier word) -> cats;
    #  25 (nummod) -> birds; no (det) -> fish         -> 5 quantifiers, 4 nouns
    #  "the" is the only article; "several" is not counted as an adjective
    doc = gold(vocab, "all/DET/PDT/predet/3 the/DET/DT/det/3 two/NUM/CD/nummod/3 dogs/NOUN/NNS/ROOT/3 "
                      "and/CCONJ/CC/cc/3 several/ADJ/JJ/amod/6 cats/NOUN/NNS/conj/3 and/CCONJ/CC/cc/6 "
                      "25/NUM/CD/nummod/9 birds/NOUN/NNS/conj/6 and/CCONJ/CC/cc/9 no/DET/DT/det/12 "
                      "fish/NOUN/NN/conj/9")
    c = counts(doc)
    assert (c["n_nouns"], c["n_quantifiers"], c["n_articles"], c["n_adjectives"]) == (4, 5, 1, 0)


def test_compound_modifier_is_not_a_separate_noun(vocab, wordnet_ready):
    # "a man on a motor bike": the NPs are "a man" and "a motor bike" -> identified nouns man, bike
    # ("motor" is a compound modifier). With compounds_as_nouns: man, motor, bike -> 3.
    doc = gold(vocab, "a/DET/DT/det/1 man/NOUN/NN/ROOT/1 on/ADP/IN/prep/1 a/DET/DT/det/5 "
                      "motor/NOUN/NN/compound/5 bike/NOUN/NN/pobj/2")
    assert counts(doc)["n_nouns"] == 2
    assert counts(doc, compounds_as_nouns=True)["n_nouns"] == 3
    assert counts(doc)["n_complement_phrases"] == 1   # "on a motor bike" modifies man


def test_predicative_adjective_only_on_request(vocab, wordnet_ready):
    # "the dog is brown": "brown" is predicated of the subject, not inside its NP.
    # default (attributive only): 0 adjectives; predicative=True: 1 adjective of "dog"
    doc = gold(vocab, "the/DET/DT/det/1 dog/NOUN/NN/nsubj/2 is/AUX/VBZ/ROOT/2 brown/ADJ/JJ/acomp/2")
    assert counts(doc)["n_adjectives"] == 0
    assert counts(doc, predicative=True)["n_adjectives"] == 1


def test_caption_without_noun(vocab, wordnet_ready):
    # "running quickly": no identified noun -> NP ratios are undefined (NaN), counts are 0,
    # concept depth undefined (no noun), words 2
    doc = gold(vocab, "running/VERB/VBG/ROOT/0 quickly/ADV/RB/advmod/0")
    c = counts(doc)
    f = features_from_counts(c, FeatureOptions())
    assert c["n_nouns"] == 0
    assert all(math.isnan(f[k]) for k in ("adjectives", "complement_phrases", "articles", "quantifiers",
                                           "concept_depth"))
    assert f["words_per_caption"] == 2
    g = features_from_counts(c, FeatureOptions(np_unit="caption"))
    assert g["adjectives"] == 0 and g["articles"] == 0


# ------------------------------------------------------------------------------------------------
# concept depth (WordNet 3.0)


def test_concept_depth_readings(vocab, wordnet_ready):
    # "a bike": WordNet 3.0 has two noun synsets for "bike":
    #   motorcycle.n.01: entity > physical_entity > object > whole > artifact > instrumentality >
    #     container > wheeled_vehicle > self-propelled_vehicle > motor_vehicle > motorcycle
    #     -> shortest path to the root has 10 edges: min_depth 10 (longest: max_depth 11)
    #   bicycle.n.01: entity > ... > container > wheeled_vehicle > bicycle -> min_depth 8 (max_depth 9)
    # default reading ("minimum depth ... considering the maximum across all synsets"): max(10, 8) = 10
    doc = gold(vocab, "a/DET/DT/det/1 bike/NOUN/NN/ROOT/1")
    depth = lambda **o: features_from_counts(counts(doc, **o), FeatureOptions(**o))["concept_depth"]  # noqa: E731
    assert depth() == 10
    assert depth(depth_synsets="min") == 8
    assert depth(depth_synsets="mean") == 9
    assert depth(depth_synsets="first") == 10            # motorcycle.n.01 is listed first
    assert depth(depth_measure="max_depth") == 11         # max(11, 9)


def test_concept_depth_of_compound_uses_wordnet_multiword(vocab, wordnet_ready):
    # "a fire hydrant": WordNet has the multiword "fire_hydrant" = fireplug.n.01, min_depth 12:
    #   entity > physical_entity > object > whole > artifact > way > passage > conduit > tube > pipe >
    #   discharge_pipe > hydrant > fireplug  (12 edges)
    # without multiword look-up, the head "hydrant": water_faucet.n.01 (min_depth 7) and
    #   hydrant.n.02 (min_depth 11) -> max 11
    doc = gold(vocab, "a/DET/DT/det/2 fire/NOUN/NN/compound/2 hydrant/NOUN/NN/ROOT/2")
    f = features_from_counts(counts(doc), FeatureOptions())
    assert f["concept_depth"] == 12
    f = features_from_counts(counts(doc, multiword=False), FeatureOptions(multiword=False))
    assert f["concept_depth"] == 11


def test_concept_depth_averages_over_nouns(vocab, wordnet_ready):
    # "an entity and a moped": entity.n.01 is the root (depth 0); moped.n.01 has one synset,
    #   entity > physical_entity > object > whole > artifact > instrumentality > container >
    #   wheeled_vehicle > self-propelled_vehicle > motor_vehicle > motorcycle > minibike > moped: 12
    # caption depth = mean over its nouns = (0 + 12) / 2 = 6
    doc = gold(vocab, "an/DET/DT/det/1 entity/NOUN/NN/ROOT/1 and/CCONJ/CC/cc/1 a/DET/DT/det/4 "
                      "moped/NOUN/NN/conj/1")
    assert features_from_counts(counts(doc), FeatureOptions())["concept_depth"] == 6


# ------------------------------------------------------------------------------------------------
# concept diversity


def test_concept_diversity_merges_wordnet_synonyms(vocab, wordnet_ready):
    # "a man and a guy with a bike and a bicycle": 11 words.
    # content words: man, guy, bike, bicycle. "bike" and "bicycle" share the synset bicycle.n.01
    # (synonyms) -> one concept; man (man.n.01, ...) and guy (guy.n.01-03) share no synset.
    # distinct concepts 3 -> 3/11. Distinct lemmas (no synonym merging): 4/11.
    doc = gold(vocab, "a/DET/DT/det/1 man/NOUN/NN/ROOT/1 and/CCONJ/CC/cc/1 a/DET/DT/det/4 guy/NOUN/NN/conj/1 "
                      "with/ADP/IN/prep/4 a/DET/DT/det/7 bike/NOUN/NN/pobj/5 and/CCONJ/CC/cc/7 "
                      "a/DET/DT/det/10 bicycle/NOUN/NN/conj/7")
    div = lambda **o: features_from_counts(counts(doc, **o), FeatureOptions(**o))["concept_diversity"]  # noqa
    assert div() == pytest.approx(3 / 11)
    assert div(diversity="lemmas") == pytest.approx(4 / 11)
    # first senses: man.n.01, guy.n.01, motorcycle.n.01 (first sense of "bike"), bicycle.n.01 -> 4
    assert div(diversity="first_sense") == pytest.approx(4 / 11)


def test_repeated_word_is_one_concept(vocab, wordnet_ready):
    # "a dog and a dog": 5 words, content words dog, dog -> 1 concept -> 1/5
    doc = gold(vocab, "a/DET/DT/det/1 dog/NOUN/NN/ROOT/1 and/CCONJ/CC/cc/1 a/DET/DT/det/4 dog/NOUN/NN/conj/1")
    assert features_from_counts(counts(doc), FeatureOptions())["concept_diversity"] == pytest.approx(1 / 5)


def test_synonym_pool_reading(vocab, wordnet_ready):
    # "a dog": the literal "unique synonyms" pool = all lemma names of the 7 noun synsets of "dog":
    #   dog.n.01 {dog, domestic_dog, canis_familiaris}; frump.n.01 {frump}; dog.n.03 {};
    #   cad.n.01 {cad, bounder, blackguard, hound, heel}; frank.n.02 {frank, frankfurter, hotdog,
    #   hot_dog, wiener, wienerwurst, weenie}; pawl.n.01 {pawl, detent, click};
    #   andiron.n.01 {andiron, firedog, dog-iron}   (new names only)
    #   -> 3 + 1 + 0 + 5 + 7 + 3 + 3 = 22 distinct names over 2 words = 11.0
    doc = gold(vocab, "a/DET/DT/det/1 dog/NOUN/NN/ROOT/1")
    o = FeatureOptions(diversity="synonym_pool")
    assert features_from_counts(analyse_doc(doc, o), o)["concept_diversity"] == pytest.approx(22 / 2)


# ------------------------------------------------------------------------------------------------
# end to end with the real parser


def test_end_to_end_hand_analysed_captions(parser_ready, wordnet_ready):
    caps = [
        "A small brown dog with a red collar.",      # 0
        "The man who is holding an umbrella.",        # 1
        "Two dogs and several cats.",                 # 2
        "A few people on the beach.",                 # 3
        "A couple of men on a bench.",                # 4
        "An apple and the orange.",                   # 5
        "Running quickly.",                           # 6
        "a dog next to a cat",                        # 7
        "a dog in front of a fence",                  # 8
        "Some people and many birds.",                # 9
    ]
    df = caption_features(caps, profile="per-noun")  # the ratios per noun (the default profile, paper, counts per caption)
    r = df.to_dict("records")
    key = lambda i: (r[i]["n_nouns"], r[i]["n_adjectives"], r[i]["n_complement_phrases"],  # noqa: E731
                     r[i]["n_articles"], r[i]["n_quantifiers"])
    # 0: nouns dog, collar; adjectives small, brown (dog) + red (collar) = 3; CP "with a red collar";
    #    articles A, a
    assert key(0) == (2, 3, 1, 2, 0)
    assert r[0]["adjectives"] == pytest.approx(1.5) and r[0]["complement_phrases"] == pytest.approx(0.5)
    # 1: nouns man, umbrella; CP "who is holding an umbrella" (relative clause on man); The, an
    assert key(1) == (2, 0, 1, 2, 0)
    # 2: nouns dogs, cats; quantifiers "two" (numeral), "several" (not an adjective); no article
    assert key(2) == (2, 0, 0, 0, 2)
    # 3: nouns people, beach; "a few" = 1 quantifier (its "a" is not an article); CP "on the beach";
    #    article "the"
    assert key(3) == (2, 0, 1, 1, 1)
    # 4: nouns men, bench ("couple" is part of the quantifier "a couple of"); quantifier 1; the CP
    #    "on a bench" belongs to "a couple of men"; article "a" (bench)
    assert key(4) == (2, 0, 1, 1, 1)
    # 5: "an" and "the" are both articles: nouns apple, orange -> 2 articles, ratio 1.0
    assert key(5) == (2, 0, 0, 2, 0) and r[5]["articles"] == 1.0
    # 6: no noun: NP ratios undefined; analysed (status ok) with a note
    assert r[6]["n_nouns"] == 0 and math.isnan(r[6]["adjectives"]) and r[6]["status"] == "ok"
    assert r[6]["words_per_caption"] == 2
    # 7: "next to a cat" is a complex preposition modifying "dog": 1 CP; nouns dog, cat
    assert key(7) == (2, 0, 1, 2, 0)
    # 8: "in front of a fence": "front" belongs to the complex preposition, not a noun: nouns dog,
    #    fence; 1 CP (the whole "in front of a fence" on "dog"); articles a, a
    assert key(8) == (2, 0, 1, 2, 0)
    # 9: "some" (det) and "many" (quantifying adjective) -> 2 quantifiers, 0 adjectives
    assert key(9) == (2, 0, 0, 0, 2)


def test_caption_length_and_words(parser_ready, wordnet_ready):
    # "A small brown dog with a red collar." letters: A1 small5 brown5 dog3 with4 a1 red3 collar6 = 28,
    # 7 spaces, 1 full stop -> 28 + 7 + 1 = 36 characters; without the spaces 36 - 7 = 29.
    # words: 8 (the full stop is not a word)
    text = "A small brown dog with a red collar."
    assert caption_features([text])["caption_length"][0] == 36
    assert caption_features([text], length_unit="chars_nospace")["caption_length"][0] == 29
    assert caption_features([text], length_unit="words")["caption_length"][0] == 8
    assert caption_features([text])["words_per_caption"][0] == 8
    # "A man's hat." spaCy splits "man" + "'s": 4 word tokens; whitespace words: A, man's, hat. = 3
    assert caption_features(["A man's hat."])["words_per_caption"][0] == 4
    assert caption_features(["A man's hat."], word_unit="whitespace")["words_per_caption"][0] == 3
    # surrounding / repeated whitespace is not part of the length: "a  dog " -> "a dog" = 5
    assert caption_features(["a  dog "])["caption_length"][0] == 5


def test_normalisation_to_fg_form():
    assert normalize_text("A man's  ice-cream, please.", "fg") == "a mans ice cream please"
    assert normalize_text("  A man's  hat. ", "none") == "A man's hat."


def test_bad_captions_are_excluded_with_a_reason(parser_ready, wordnet_ready):
    texts = ["", "   ", "三只猫在沙发上睡觉", "قطة على الطاولة", "🐶🐱", "...", None, "A dog 🐶 on a sofa.",
             "Une chatte noire sur le canapé."]
    df = caption_features(texts)
    status = list(df["status"])
    assert status[:7] == ["excluded"] * 7
    assert status[7] == "ok" and status[8] == "ok"  # emoji beside English text; Latin-script French
    reasons = list(df["reason"])
    assert "empty" in reasons[0] and "empty" in reasons[1]
    assert "cjk" in reasons[2] and "arabic" in reasons[3]
    assert "no letters" in reasons[4] and "no letters" in reasons[5] and "not a string" in reasons[6]
    assert df.loc[:6, list(FEATURES)].isna().all().all()
    # the emoji is neither a word nor a noun: "A dog 🐶 on a sofa." -> words A dog on a sofa = 5
    assert df["words_per_caption"][7] == 5 and df["n_nouns"][7] == 2


def test_text_problem_rules():
    assert text_problem("a dog") is None
    assert text_problem("café entrée") is None               # accented Latin letters are Latin
    assert text_problem("2 3") is None                       # digits only: analysed (no noun)
    assert "Latin" in text_problem("Собака на диване")
    assert text_problem(42).startswith("not a string")


def test_options_are_validated():
    from vlbench.errors import VlbenchError

    with pytest.raises(VlbenchError, match="np_unit"):
        FeatureOptions(np_unit="sentence")
    with pytest.raises(VlbenchError, match="unknown granularity option"):
        FeatureOptions.from_kwargs(adjective_mode="x")
    with pytest.raises(VlbenchError, match="cp_relations"):
        FeatureOptions(cp_relations=("prep", "nsubj"))
    assert FeatureOptions(noun_pos="NOUN").noun_pos == ("NOUN",)
