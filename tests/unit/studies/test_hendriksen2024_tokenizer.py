"""The compatible synonyms and trigram shuffles tokenize as NLTK 3.8.1 (the
authors' pin) whatever NLTK is installed. NLTK 3.9+ splits an opening single quote from any word; 3.8.1 only
from a one-letter word, which changed the authors' output on 3 COCO test captions."""

from __future__ import annotations


import pytest

from vlbench.studies.hendriksen2024.compat import CompatPerturbation, nltk_tokens, synonym_compat
from vlbench.studies.hendriksen2024.tokenizer381 import tokenize_sentence

from support.data import SHARED_NLTK

NLTK_DATA = SHARED_NLTK

# the three COCO test captions, their NLTK 3.8.1 tokens, and the authors' synonym outputs with NLTK 3.8.1
# (worked out with NLTK 3.8.1's own NLTKWordTokenizer, pos_tag and WordNet's first differing lemma)
QUOTE_CASES = [
    ("A pedestrian stop light showing the word 'walk'",
     ["A", "pedestrian", "stop", "light", "showing", "the", "word", "'walk", "'"],
     "A pedestrian halt light showing the word 'walk '", "A walker stop light showing the word 'walk '"),
    ("A street sign reading 'Alameda Street' is shown, with a skyscraper in the background.",
     ["A", "street", "sign", "reading", "'Alameda", "Street", "'", "is", "shown", ",", "with", "a", "skyscraper", "in",
      "the", "background", "."],
     "A street mark reading 'Alameda Street ' is shown , with a skyscraper in the background .",
     "A street sign reading 'Alameda Street ' is shown , with a skyscraper in the background ."),
    ("A 'No Parking' sign is attached to a traffic cone on a sidewalk.",
     ["A", "'No", "Parking", "'", "sign", "is", "attached", "to", "a", "traffic", "cone", "on", "a", "sidewalk", "."],
     "A 'No park ' sign is attached to a traffic cone on a sidewalk .",
     "A 'No Parking ' sign is attached to a traffic cone on a sidewalk ."),
]


@pytest.mark.parametrize("sentence, tokens", [
    ("A 'No Parking' sign.", ["A", "'No", "Parking", "'", "sign", "."]),  # 3.9+: "'", "No"
    ("He said 'a dog' there.", ["He", "said", "'", "a", "dog", "'", "there", "."]),  # one-letter word: split in 3.8.1
    ("no—maybe yes", ["no—maybe", "yes"]),  # 3.9+ splits the em dash
    ("It's a cat's toy, isn't it?", ["It", "'s", "a", "cat", "'s", "toy", ",", "is", "n't", "it", "?"]),
    ('She said "hi" (twice) -- cannot stop.', ["She", "said", "``", "hi", "''", "(", "twice", ")", "--", "can",
                                               "not", "stop", "."]),
])
def test_tokenize_sentence_is_nltk_381(sentence, tokens):
    assert tokenize_sentence(sentence) == tokens


def test_the_variant_records_its_tokenizer():
    for name in ("synonym-noun", "synonym-adjective", "shuffle-within-trigrams", "shuffle-trigrams"):
        obj = CompatPerturbation(name)
        assert obj.params == {"variant": "hendriksen2024", "tokenizer": "nltk-3.8.1"}
        assert "nltk" in obj.resources
    assert CompatPerturbation("char-swap").params == {"variant": "hendriksen2024"}


@pytest.fixture
def nltk_data(monkeypatch):
    if not (NLTK_DATA / "tokenizers" / "punkt_tab").is_dir():
        pytest.skip(f"NLTK punkt_tab / tagger data not at {NLTK_DATA}")
    import nltk

    from vlbench import lang

    try:
        lang.wordnet()
    except Exception as exc:  # pragma: no cover
        pytest.skip(f"WordNet missing: {exc}")
    monkeypatch.setattr(nltk.data, "path", [str(NLTK_DATA), *nltk.data.path])


@pytest.mark.parametrize("caption, tokens, noun, adjective", QUOTE_CASES)
def test_quote_cases_equal_the_authors_output_under_nltk_381(nltk_data, caption, tokens, noun, adjective):
    assert nltk_tokens(caption) == tokens
    assert synonym_compat("synonym-noun", caption) == noun
    assert synonym_compat("synonym-adjective", caption) == adjective


def test_engine_records_the_tokenizer(nltk_data):
    from vlbench.perturbations import perturb_captions

    sets = perturb_captions([QUOTE_CASES[2][0]], ["q"], ["synonym-noun", "shuffle-trigrams"],
                            params={"synonym-noun": {"variant": "hendriksen2024"},
                                    "shuffle-trigrams": {"variant": "hendriksen2024"}})
    assert sets["synonym-noun"].texts == [QUOTE_CASES[2][2]]
    for ps in sets.values():
        assert ps.params["tokenizer"] == "nltk-3.8.1"
        assert ps.resources["nltk"].startswith("NLTKWordTokenizer of NLTK 3.8.1")
    # the trigram shuffle moves 3.8.1's tokens: "'No" stays one token
    assert "'No" in sets["shuffle-trigrams"].texts[0].split()
