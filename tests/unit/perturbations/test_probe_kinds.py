"""The replace / swap / count / antonym probes (vlbench.perturbations.probes): what each writes on hand-made
captions, what it refuses (synonyms, hypernyms, counts or words another caption of the image gives), and that the
independent audit catches a probe that breaks its rule."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from vlbench.perturbations import cli
from vlbench.perturbations.probes import make_probes, resolve_probes
from vlbench.perturbations.probes.audit import audit_probes


def _probe(caps, name, seed=0, vocabulary=None):
    return make_probes(caps, [f"c{k}" for k in range(len(caps))], ["img"] * len(caps), [name], seed=seed,
                       vocabulary=vocabulary, unverified=True)[name]


def _outputs(caps, name, seeds=25, vocabulary=None):
    """The first caption's probe text and meta over many seeds."""
    out = []
    for seed in range(seeds):
        ps = _probe(caps, name, seed, vocabulary)
        out.append((ps.texts[0], ps.meta[0]))
    return out


def test_replace_object_keeps_the_number_and_never_uses_a_synonym_hypernym_hyponym_or_mentioned_object():
    caps = ["Two dogs play with a ball.", "A puppy and a ball on the grass."]
    vocab = ("dog", "puppy", "canine", "animal", "poodle", "cat", "frisbee", "ball")
    seen = set()
    for text, meta in _outputs(caps, "replace-object", vocabulary=vocab):
        assert meta["by"] in ("cat", "frisbee")
        if meta["replaced"] == "dog":
            assert text == f"Two {meta['by']}s play with a ball."
        else:
            assert text == f"Two dogs play with a {meta['by']}."
        seen.add(text)
    assert len(seen) == 4  # both slots and both objects are drawn


def test_replace_attribute_stays_in_its_class_and_never_takes_a_near_synonym_or_a_used_word():
    caps = ["A small dog on a red couch.", "A little dog sits on an orange sofa."]
    seen = set()
    for text, meta in _outputs(caps, "replace-attribute", seeds=40):
        if meta["replaced"] == "small":
            assert meta["class"] == "size" and meta["by"] in ("big", "large", "huge", "giant")
            assert meta["by"] not in ("tiny", "little")  # near-synonyms (WordNet similar-to) and a used word
        else:
            assert meta["class"] == "colour" and meta["by"] not in ("red", "orange")
            article = "an" if meta["by"][0] in "aeiou" else "a"
            assert text == f"A small dog on {article} {meta['by']} couch."
        seen.add(meta["replaced"])
    assert seen == {"small", "red"}


def test_replace_relation_never_uses_a_near_synonym_or_a_preposition_another_caption_states():
    caps = ["A cat sits on a table.", "A cat under a table."]
    for text, meta in _outputs(caps, "replace-relation", seeds=40):
        if meta["relation"] == "preposition":
            assert meta["object"] == "table"
            assert meta["by"] not in ("on", "atop", "onto", "upon", "under", "beneath", "below", "underneath")
            assert text == f"A cat sits {meta['by']} a table."


def test_replace_relation_replaces_an_ing_verb_with_a_caption_set_verb_the_image_does_not_use():
    caps = ["A man riding a horse.", "A man is riding a brown horse.", "A woman holding a cup.",
            "A woman is holding a mug.", "A boy eating a sandwich.", "A kid eating lunch."]
    imgs = ["h", "h", "c", "c", "s", "s"]
    sets = make_probes(caps, [str(k) for k in range(6)], imgs, ["replace-relation"])["replace-relation"]
    assert sets.texts[0] in ("A man holding a horse.", "A man eating a horse.")
    assert sets.meta[0]["relation"] == "verb" and sets.meta[0]["replaced"] == "riding"


def test_swap_object_exchanges_two_nouns_in_the_number_of_their_slots():
    ps = _probe(["A dog chasing two cats.", "A dog runs."], "swap-object")
    assert ps.texts[0] == "A cat chasing two dogs."
    assert ps.meta[0]["swapped"] == ["dog", "cats"] and ps.meta[0]["bases"] == ["dog", "cat"]
    ps = _probe(["An elephant next to a bus."], "swap-object")
    assert ps.texts[0] == "A bus next to an elephant."  # the articles follow the new words
    assert _probe(["Two dogs and a cat."], "swap-object").texts[0] == "Two cats and a dog."  # the counts move


@pytest.mark.parametrize("caption", ["A dog and a puppy.", "A dog beside a dog.", "A car behind an automobile.",
                                     "A dog and a cat.", "Dogs, cats and horses."])
def test_swap_object_refuses_equal_synonym_or_hypernym_or_merely_coordinated_nouns(caption):
    assert not _probe([caption], "swap-object").applicable[0]


def test_swap_attribute_moves_the_adjectives_to_the_other_noun_and_refuses_synonyms():
    assert _probe(["A white dog and a black cat."], "swap-attribute").texts[0] == "A black dog and a white cat."
    assert _probe(["An old dog and a young cat."], "swap-attribute").texts[0] == "A young dog and an old cat."
    assert not _probe(["A small dog and a little cat."], "swap-attribute").applicable[0]
    assert not _probe(["A white dog and a white cat."], "swap-attribute").applicable[0]


def test_count_changes_a_number_to_one_no_caption_of_the_image_gives():
    caps = ["Two dogs on the couch.", "A couple of dogs rest.", "Three dogs and 4 pillows."]
    for text, meta in _outputs(caps, "count"):
        assert meta["count_from"] == 2 and meta["count_to"] == 5  # 2, 3, 4 given; max_count 5
        assert text == "Five dogs on the couch."


def test_count_makes_a_singular_plural_with_the_verb_agreeing():
    for text, meta in _outputs(["A dog sits on a bench.", "A dog is outside."], "count", seeds=10):
        n = meta["count_to"]
        assert meta["count_from"] == 1 and n in (2, 3, 4, 5)
        assert text == f"{['Two', 'Three', 'Four', 'Five'][n - 2]} dogs sit on a bench."
    assert _probe(["A man is on a horse."], "count").texts[0] in \
        {f"{w} men are on a horse." for w in ("Two", "Three", "Four", "Five")} | \
        {f"A man is on {w} horses." for w in ("two", "three", "four", "five")}


def test_count_leaves_a_singular_alone_when_another_verb_would_disagree():
    # "a dog" is the subject of "is" at a distance, "a toy" is in a prepositional phrase: neither "two dogs with a
    # toy is" nor "a dog with two toys are" is made
    assert not _probe(["A dog with a toy is sleeping."], "count").applicable[0]


def test_antonym_attribute_uses_a_wordnet_antonym_no_caption_of_the_image_uses():
    assert _probe(["A small dog on a wet road."], "antonym-attribute", seed=0).texts[0] in (
        "A large dog on a wet road.", "A small dog on a dry road.")
    caps = ["A small dog on a wet road.", "A dry road and a dog."]
    for text, meta in _outputs(caps, "antonym-attribute", seeds=10):
        assert (meta["replaced"], meta["by"]) == ("small", "large") and text == "A large dog on a wet road."
    assert not _probe(["A small dog.", "A large dog."], "antonym-attribute").applicable[0]


def test_families_of_the_new_probes():
    assert resolve_probes("replace") == ["replace-object", "replace-attribute", "replace-relation"]
    assert resolve_probes("swap") == ["swap-object", "swap-attribute"]
    assert resolve_probes("count,antonym") == ["count", "antonym-attribute"]


def _tamper(ps, i, text=None, **meta):
    texts, metas = list(ps.texts), list(ps.meta)
    if text is not None:
        texts[i] = text
    metas[i] = {**metas[i], **meta}
    return dataclasses.replace(ps, texts=texts, meta=metas)


def test_the_audit_catches_a_synonym_a_hypernym_a_present_word_a_false_swap_count_and_antonym():
    caps = ["A small dog chasing two cats on a couch.", "Two cats and a dog inside."]
    imgs = ["i", "i"]
    sets = make_probes(caps, ["a", "b"], imgs, ["replace-object", "swap-object", "count", "antonym-attribute"],
                       vocabulary=("chair", "ball"))
    assert all(sum(r["failures"].values()) == 0 for r in audit_probes(caps, imgs, sets).values())
    bad = {
        "replace-object": _tamper(sets["replace-object"], 0, "A small puppy chasing two cats on a couch.",
                                  replaced="dog", as_written="dog", by="puppy", written_as="puppy"),
        "swap-object": _tamper(sets["swap-object"], 0, "A small dog chasing two couches on a cat.",
                               bases=["dog", "cat"]),
        "count": _tamper(sets["count"], 0, "A small dog chasing two cats on two couches.", count_from=1,
                         count_to=2),
        "antonym-attribute": _tamper(sets["antonym-attribute"], 0, "A tiny dog chasing two cats on a couch.",
                                     replaced="small", by="tiny"),
    }
    fails = {name: {k for k, v in audit_probes(caps, imgs, {name: ps})[name]["failures"].items() if v}
             for name, ps in bad.items()}
    assert fails["replace-object"] == {"related"}  # puppy: a hyponym of dog
    assert fails["swap-object"] == {"not_swapped"}
    assert fails["count"] == {"present"}  # two is a count the captions give
    assert fails["antonym-attribute"] == {"not_antonym"}
    synonym = _tamper(sets["replace-object"], 0, "A small cad chasing two cats on a couch.", replaced="dog",
                      as_written="dog", by="cad", written_as="cad")  # WordNet: "cad, bounder, blackguard, dog, hound"
    present = _tamper(sets["replace-object"], 0, "A small dog chasing two cats on a cat.", replaced="couch",
                      as_written="couch", by="cat", written_as="cat")
    for ps, expected in ((synonym, {"synonym"}), (present, {"present"})):
        r = audit_probes(caps, imgs, {"replace-object": ps})["replace-object"]
        assert {k for k, v in r["failures"].items() if v} == expected


def test_perturb_text_shows_a_swap_family(capsys):
    parser = argparse.ArgumentParser(prog="vlbench perturb")
    cli.configure(parser)
    assert cli.main(parser.parse_args(["--text", "A white dog and a black cat.", "--perturb", "swap"])) == 0
    out = capsys.readouterr().out
    assert "  swap-object     swap        A white cat and a black dog.\n" in out
    assert "  swap-attribute  swap        A black dog and a white cat.\n" in out
