"""Meaning-changing probes (vlbench.perturbations.probes): absent means absent from every caption of the image
(checked by the audit's independent count), never a synonym / hypernym / hyponym of a mentioned noun, the same
probes twice, a refusal on one caption per image, and kept apart from the meaning-preserving families."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re

import pytest
from support.data import TESTS
from support.synthetic_runs import synth_run

from vlbench.errors import VlbenchError
from vlbench.perturbations import FAMILIES, cli, resolve
from vlbench.perturbations.lexical import wants_an
from vlbench.perturbations.probes import PROBES, make_probes, resolve_probes
from vlbench.perturbations.probes.audit import audit_file, audit_probes, hand_forms
from vlbench.pipeline.report import family_summary
from vlbench.results import RunRecord

FLICKR = TESTS / "fixtures" / "flickr30k_excerpt.jsonl"
COCO = TESTS / "fixtures" / "granularity_coco_excerpt.jsonl"


def _load(path, limit=None):
    caps, ids, imgs = [], [], []
    for k, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if limit is not None and k >= limit:
            break
        row = json.loads(line)
        for j, c in enumerate(row["captions"]):
            caps.append(c)
            ids.append(f"{row['image']}#{j}")
            imgs.append(row["image"])
    return caps, ids, imgs


@pytest.mark.parametrize("path", [FLICKR, COCO], ids=["flickr30k", "coco"])
def test_probes_on_real_caption_excerpts_pass_the_independent_audit(path):
    caps, ids, imgs = _load(path)
    sets = make_probes(caps, ids, imgs)
    report = audit_probes(caps, imgs, sets)
    for name in PROBES:
        assert report[name]["n_applied"] > 0, name
        assert report[name]["failures"] and set(report[name]["failures"].values()) == {0}, \
            (name, report[name]["examples"])
    for ps in sets.values():  # every applied probe says what changed and why
        for ok, meta in zip(ps.applicable, ps.meta):
            assert (meta is not None) == ok
            if ok:
                assert (meta.get("denied") or meta.get("added") or meta.get("replaced") or meta.get("swapped")
                        or meta.get("count_to")) and meta["why"]
        assert ps.describe()["kind"] == "sensitivity" and ps.describe()["changes_meaning"] is True


def test_probes_are_the_same_twice_and_do_not_depend_on_caption_order():
    caps, ids, imgs = _load(FLICKR)
    vocab = ("dog", "ball", "car", "tree", "bicycle", "hat", "umbrella", "boat", "chair", "table")
    first = make_probes(caps, ids, imgs, vocabulary=vocab, seed=3)
    again = make_probes(caps, ids, imgs, vocabulary=vocab, seed=3)
    back = make_probes(caps[::-1], ids[::-1], imgs[::-1], vocabulary=vocab, seed=3)
    other_seed = make_probes(caps, ids, imgs, vocabulary=vocab, seed=4)
    for name in PROBES:
        assert first[name].texts == again[name].texts and first[name].meta == again[name].meta
        assert first[name].texts == back[name].texts[::-1]
    assert first["negation-absent"].texts != other_seed["negation-absent"].texts  # the seed matters


def _denied(caps, vocab):
    out = set()
    for seed in range(40):
        ps = make_probes(caps, [str(k) for k in range(len(caps))], ["img"] * len(caps),
                         ["negation-absent", "half-truth-object"], vocabulary=vocab, seed=seed)
        out |= {m["denied"] for m in ps["negation-absent"].meta if m}
        out |= {m["added"] for m in ps["half-truth-object"].meta if m}
    return out


def test_negation_absent_never_denies_a_mentioned_word_its_plural_a_synonym_hypernym_or_hyponym():
    caps = ["Two dogs play in the yard.", "A puppy runs on the grass."]
    vocab = ("dog", "canine", "animal", "puppy", "mammal", "poodle", "cat", "chair")
    # dog (plural in a caption), puppy (mentioned), canine / mammal / animal (hypernyms), poodle (a hyponym of dog)
    assert _denied(caps, vocab) == {"cat", "chair"}
    # under "animal", a cat may be in the picture: hyponyms of a mentioned noun are never denied
    assert _denied([*caps, "An animal is running outside."], vocab) == {"chair"}


def test_negation_present_denies_a_noun_of_the_caption_in_its_written_number():
    ps = make_probes(["Two dogs chase a ball.", "Dogs at play."], ["a", "b"], ["img", "img"], ["negation-present"],
                     vocabulary=("dog", "ball"))["negation-present"]
    text, meta = ps.texts[0], ps.meta[0]
    assert meta["denied"] in ("dog", "ball")
    assert text in ("Two dogs chase a ball. There are no dogs.", "Two dogs chase a ball. There is no ball.")


@pytest.mark.parametrize("form,expected", [
    ("sentence", "A cat sleeps on a bed. There is no dog."),
    ("clause", "A cat sleeps on a bed, but no dog."),
    ("negation-first", "There is no dog. A cat sleeps on a bed."),
])
def test_negation_forms_are_written_as_documented(form, expected):
    caps = ["A cat sleeps on a bed.", "A kitten naps."]
    ps = make_probes(caps, ["a", "b"], ["i", "i"], ["negation-absent"], vocabulary=("dog",),
                     params={"negation-absent": {"form": form}})
    assert ps["negation-absent"].texts[0] == expected


def test_half_truth_attribute_fixes_the_article_and_never_colours_a_person():
    caps = ["A man holds an umbrella.", "A person with an umbrella in the rain."]
    seen = set()
    for seed in range(30):
        ps = make_probes(caps, ["a", "b"], ["i", "i"], ["half-truth-attribute"], vocabulary=("umbrella",),
                         seed=seed)["half-truth-attribute"]
        text, meta = ps.texts[0], ps.meta[0]
        assert meta["to"] == "umbrella"
        art = "an" if wants_an(meta["added"]) else "a"
        assert text == f"A man holds {art} {meta['added']} umbrella."
        seen.add(meta["added"])
    assert len(seen) > 3  # the colour is drawn, not fixed


def test_one_caption_per_image_is_refused_for_absence_probes_and_labelled_when_allowed():
    caps, ids, imgs = ["A dog on a couch.", "A red car."], ["a", "b"], ["i1", "i2"]
    for name in ("negation-absent", "half-truth-object", "half-truth-attribute", "replace-object", "count"):
        with pytest.raises(VlbenchError) as err:
            make_probes(caps, ids, imgs, [name], vocabulary=("cat",))
        assert "unverified=True" in err.value.hint
    ok = make_probes(caps, ids, imgs, ["negation-present"], vocabulary=("dog", "car"))["negation-present"]
    assert all(ok.applicable) and all(ok.verified)  # denying what the caption says needs no other caption
    lab = make_probes(caps, ids, imgs, ["negation-absent"], vocabulary=("cat",), unverified=True)["negation-absent"]
    assert all(lab.applicable) and not any(lab.verified) and lab.describe()["n_unverified"] == 2


def test_sensitivity_probes_are_never_selected_with_the_meaning_preserving_families():
    assert all(cls.kind == "sensitivity" and cls.changes_meaning for cls in PROBES.values())
    assert not set(PROBES) & set(resolve("all"))
    assert not set(PROBES) & {n for names in FAMILIES.values() for n in names}
    assert resolve_probes("typos,lexical") is None
    assert resolve_probes("sensitivity") == list(PROBES)
    assert resolve_probes("negation") == ["negation-absent", "negation-present"]
    with pytest.raises(VlbenchError):
        resolve_probes("negation-absent,typos")


def test_family_summary_never_averages_sensitivity_conditions_with_invariance(tmp_path):
    rec = RunRecord.load(synth_run(tmp_path / "run", perturb=("char-swap", "nearby-char")))
    # nearby-char relabelled as a meaning-changing probe that even shares the family name
    conds = dict(rec.conditions)
    conds["nearby-char"] = dataclasses.replace(conds["nearby-char"], meta={**conds["nearby-char"].meta,
                                                                           "kind": "sensitivity"})
    probe = dataclasses.replace(rec, conditions=conds)
    rows = {ln.split("|")[1].strip(): [c.strip() for c in ln.split("|")[1:-1]]
            for ln in family_summary(probe).splitlines()[2:]}
    clean = rec.value("clean", "both", "rsum")
    assert rows["typos"][1] == "1" and rows["typos"][2] == f"{rec.value('char-swap', 'both', 'rsum') - clean:+.2f}"


def _perturb(argv):
    parser = argparse.ArgumentParser(prog="vlbench perturb")
    cli.configure(parser)
    return cli.main(parser.parse_args(argv))


def test_perturb_text_shows_probes_marked_unverified(capsys, tmp_path):
    assert _perturb(["--text", "A man walks his dog on the beach.", "--perturb", "sensitivity",
                     "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "negation-present      negation    A man walks his dog on the beach. There is no dog.\n" in out
    assert re.search(r"negation-absent .*There is no \w+\.  \[unverified: one caption\]", out)
    rows = [json.loads(ln) for ln in (tmp_path / "negation-absent.jsonl").read_text().splitlines()]
    assert rows[0]["verified"] is False and rows[0]["meta"]["absent_from"] == 1
    assert json.loads((tmp_path / "probes.json").read_text())["negation-absent"]["kind"] == "sensitivity"


def test_hand_plural_rule_of_the_audit():
    assert {"boxes", "cherries", "knives", "men"} <= hand_forms("box") | hand_forms("cherry") | \
        hand_forms("knife") | hand_forms("man")


@pytest.mark.slow  # tags 1,000 real captions twice (about 30 s on two loaded cores)
@pytest.mark.parametrize("name", ["flickr30k_test.jsonl", "coco5k_test.jsonl"])
def test_probes_on_200_real_images_pass_the_audit_and_are_deterministic(shared_captions, name):
    report = audit_file(str(shared_captions / name), limit=200)
    assert report["deterministic"] is True
    for probe, r in report["probes"].items():
        assert sum(r["failures"].values()) == 0, (probe, r["examples"])
        assert r["n_applied"] > 0


def test_perturb_dataset_writes_probes_grouped_by_image_the_same_as_make_probes(capsys, tmp_path):
    excerpt = TESTS / "fixtures" / "captions_excerpt.jsonl"
    assert _perturb(["--dataset", f"custom:{excerpt}", "--perturb", "negation", "--out", str(tmp_path)]) == 0
    assert "negation-absent" in capsys.readouterr().out
    caps, ids, imgs = _load(excerpt)
    rows = [json.loads(ln) for ln in (tmp_path / "negation-absent.jsonl").read_text().splitlines()]
    assert [r["original"] for r in rows] == caps
    ref = make_probes(caps, [r["caption_id"] for r in rows], [r["image"] for r in rows], ["negation-absent"])
    assert [r["perturbed"] for r in rows] == ref["negation-absent"].texts
    assert all(r["verified"] for r in rows)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["negation-absent.jsonl", "negation-present.jsonl",
                                                          "probes.json"]


def test_an_image_whose_captions_say_object_or_stuff_gets_no_absent_object():
    caps = ["A kid playing with stuff.", "A child holds a yellow object."]
    ps = make_probes(caps, ["a", "b"], ["i", "i"], ["negation-absent", "half-truth-object"], vocabulary=("glove",))
    assert not any(ps["negation-absent"].applicable) and not any(ps["half-truth-object"].applicable)


def test_the_object_vocabulary_leaves_out_general_nouns_and_plural_only_bases():
    from vlbench.perturbations.engine import parse
    from vlbench.perturbations.probes.words import object_vocabulary

    caps = ["A dog and a cat.", "A horse near a dog.", "An animal in jeans.", "A cat by a car.", "A bus, a car."]
    vocab = object_vocabulary([[c] for c in caps], parse(caps))
    assert {"dog", "cat", "horse", "car", "bus"} <= set(vocab)
    assert "animal" not in vocab and "jean" not in vocab  # a hypernym of dog, cat and horse; only "jeans" written
    assert vocab[:3] == ("car", "cat", "dog")  # two images each, ties alphabetical; then bus, horse (one each)


def test_the_paper_leaderboard_has_no_retained_family_for_sensitivity_conditions():
    from vlbench.leaderboards.paper.summary import _family

    class _Run:  # the one method _family reads
        def __init__(self, meta):
            self.meta = meta

        def condition_meta(self, cond):
            return self.meta

    assert _family(_Run({"family": "negation", "kind": "sensitivity"}), "negation-absent") is None
    assert _family(_Run({"family": "typos"}), "char-swap") == "typos"


def test_a_probe_name_given_as_a_perturbation_is_refused_with_a_pointer_to_vlbench_perturb():
    from vlbench.perturbations.engine import PROBE_NAMES
    from vlbench.perturbations.probes import FAMILIES as PROBE_FAMILIES

    assert PROBE_NAMES == {*PROBES, *PROBE_FAMILIES, "sensitivity"}  # the engine's copy of the names
    for spec in ("negation-absent", "half-truth", "sensitivity", "typos,negation"):
        with pytest.raises(VlbenchError) as err:
            resolve(spec)
        assert "vlbench perturb" in err.value.hint
