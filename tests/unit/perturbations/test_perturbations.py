"""Caption perturbations: API, the chapter's example, and every definition checked on real captions.

The checks below are written independently of the implementation (own word splitting, own edit
comparisons, a hand-written QWERTY adjacency, WordNet queried directly). Property tests run on the
committed excerpt (tests/fixtures/captions_excerpt.jsonl, 300 captions) and, when the shared caption
files are present, on 2,000 real MS-COCO / Flickr30k / FG captions.
"""

from __future__ import annotations

import collections
import itertools
import json
import random
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from support.data import SHARED_DATA, TESTS

import vlbench.perturbations as P
from vlbench.errors import UnknownNameError, VlbenchError
from vlbench.perturbations.base import CaptionRNG

EXCERPT = TESTS / "fixtures" / "captions_excerpt.jsonl"
SHARED = SHARED_DATA / "captions"
CHAPTER = "An amphibious plane is floating in front of the London Bridge."
NOUNS = {"NN", "NNS", "NNP", "NNPS"}
ADJS = {"JJ", "JJR", "JJS"}
CLITICS = {"'s", "'", "’s", "’", "n't", "n’t", "'re", "’re", "'ve", "’ve", "'ll", "’ll", "'d", "’d", "'m", "’m"}

# Hand-written QWERTY neighbours (same row +-1, row above/below at most one column apart).
TEST_QWERTY = {
    "q": "was", "w": "qeasd", "e": "wrsdf", "r": "etdfg", "t": "ryfgh", "y": "tughj", "u": "yihjk", "i": "uojkl",
    "o": "ipkl", "p": "ol", "a": "qwszx", "s": "qweadzxc", "d": "wersfxcv", "f": "ertdgcvb", "g": "rtyfhvbn",
    "h": "tyugjbnm", "j": "yuihknm", "k": "uiojlm", "l": "iopk", "z": "asx", "x": "asdzc", "c": "sdfxv",
    "v": "dfgcb", "b": "fghvn", "n": "ghjbm", "m": "hjkn",
}


# ----------------------------------------------------------------------------------------------
# independent helpers

def is_p(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P")


def unit_spans(text: str) -> list[tuple[int, int]]:
    """Whitespace chunks without punctuation at their ends (own implementation)."""
    spans = []
    for m in re.finditer(r"\S+", text):
        a, b = m.start(), m.end()
        while a < b and is_p(text[a]):
            a += 1
        while b > a and is_p(text[b - 1]):
            b -= 1
        if a < b:
            spans.append((a, b))
    return spans


def units(text: str) -> list[str]:
    return [text[a:b] for a, b in unit_spans(text)]


def skeleton(text: str) -> str:
    """The caption with every word unit replaced by a placeholder: punctuation + whitespace."""
    out, pos = [], 0
    for a, b in unit_spans(text):
        out.append(text[pos:a] + "\x00")
        pos = b
    return "".join(out) + text[pos:]


def unit_is(text: str, tokens, tagset) -> list[bool]:
    """Per unit: is its head (last non-punctuation, non-clitic token) tagged in ``tagset``."""
    out = []
    for a, b in unit_spans(text):
        toks = [t for t in tokens if t.idx < b and t.idx + len(t.text) > a and t.text.strip()]
        content = [t for t in toks if not all(is_p(c) for c in t.text) and t.tag != "POS"
                   and t.text.lower() not in CLITICS]
        tag = (content or toks)[-1].tag if toks else ""
        out.append(tag in tagset)
    return out


def trigram_blocks(seq):
    return [tuple(seq[i:i + 3]) for i in range(0, len(seq), 3)]


def is_block_concat(seq, blocks) -> bool:
    """Is ``seq`` a concatenation of the blocks in some order (each used once)?"""
    counts = collections.Counter(blocks)

    def rec(pos):
        if pos == len(seq):
            return sum(counts.values()) == 0
        for b in list(counts):
            if counts[b] and tuple(seq[pos:pos + len(b)]) == b:
                counts[b] -= 1
                if rec(pos + len(b)):
                    return True
                counts[b] += 1
        return False

    return rec(0)


def changed_chunk(orig: str, pert: str) -> tuple[str, str]:
    """The one whitespace-delimited chunk that differs (asserts the rest is identical)."""
    a, b = re.split(r"(\s+)", orig), re.split(r"(\s+)", pert)
    assert len(a) == len(b), (orig, pert)
    diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    assert len(diff) == 1, (orig, pert)
    assert a[diff[0]].strip(), (orig, pert)
    return a[diff[0]], b[diff[0]]


def letter_run_len(s: str, i: int) -> int:
    """Length of the run of letters containing position i."""
    a = b = i
    while a > 0 and s[a - 1].isalpha():
        a -= 1
    while b < len(s) and s[b].isalpha():
        b += 1
    return b - a


def check_missing(orig, pert):
    old, new = changed_chunk(orig, pert)
    assert len(new) == len(old) - 1
    hits = [i for i in range(len(old)) if old[:i] + old[i + 1:] == new]
    assert hits and any(old[i].isalpha() and letter_run_len(old, i) >= 2 for i in hits), (old, new)


def check_extra(orig, pert):
    old, new = changed_chunk(orig, pert)
    assert len(new) == len(old) + 1
    hits = [i for i in range(1, len(new)) if new[:i] + new[i + 1:] == old]
    assert any(new[i].isascii() and new[i].isalpha() and new[i - 1].isalpha() for i in hits), (old, new)


def check_swap(orig, pert):
    old, new = changed_chunk(orig, pert)
    assert len(new) == len(old)
    diff = [i for i in range(len(old)) if old[i] != new[i]]
    assert len(diff) == 2 and diff[1] == diff[0] + 1, (old, new)
    i = diff[0]
    assert old[i].isalpha() and old[i + 1].isalpha()
    assert old[i].lower() == new[i + 1].lower() and old[i + 1].lower() == new[i].lower()  # adjacent transposition
    assert old[i].lower() != old[i + 1].lower()
    assert [c.isupper() for c in old] == [c.isupper() for c in new]  # case stays with the position


def check_nearby(orig, pert):
    old, new = changed_chunk(orig, pert)
    assert len(new) == len(old)
    diff = [i for i in range(len(old)) if old[i] != new[i]]
    assert len(diff) == 1, (old, new)
    i = diff[0]
    assert new[i].lower() in TEST_QWERTY[old[i].lower()], (old, new)
    assert old[i].isupper() == new[i].isupper()
    assert letter_run_len(old, i) >= 2


def distraction_expected(orig: str, phrase: str) -> str:
    stripped = orig.rstrip()
    body = stripped.rstrip(".!?\u2026").rstrip()
    return body + " " + phrase + orig[len(body):]


def wants_an_test(word: str) -> bool:
    w = word.lower()
    if w.startswith(("hour", "honest", "honor", "honour", "heir")):
        return True
    if w.startswith(("uni", "use", "usu", "uti", "ute", "ura", "uro", "eu", "one", "once", "ewe")):
        return False
    return w[:1] in "aeiou"


def find_replacement(orig: str, pert: str, tokens, tagset):
    """(token, new text) such that pert = orig with that token replaced (and an a/an fixed)."""
    found = []
    for i, tok in enumerate(tokens):
        if tok.tag not in tagset:
            continue
        end = tok.idx + len(tok.text)
        suffix = orig[end:]
        if not pert.endswith(suffix):
            continue
        head = pert[:len(pert) - len(suffix)]
        prefix = orig[:tok.idx]
        if head.startswith(prefix) and len(head) > len(prefix):
            found.append((tok, head[len(prefix):], None))
            continue
        m = re.search(r"(?:^|(?<=\s))(a|an|A|An|AN)(\s+)$", prefix)
        if m:
            toggled = {"a": "an", "an": "a", "A": "An", "An": "A", "AN": "A"}[m.group(1)]
            prefix2 = prefix[:m.start(1)] + toggled + m.group(2)
            if head.startswith(prefix2):
                found.append((tok, head[len(prefix2):], toggled))
    return found


def check_synonym(orig, pert, tokens, tagset, wn_pos, wn):
    found = find_replacement(orig, pert, tokens, tagset)
    assert found, (orig, pert)
    ok = False
    for tok, new, article in found:
        if new.lower() == tok.text.lower():
            continue
        shared = set(wn.synsets(new.replace(" ", "_").lower(), pos=wn_pos)) & set(wn.synsets(tok.text.lower(), pos=wn_pos))
        if shared and (article is None or wants_an_test(new) == (article.lower() == "an")):
            ok = True
    assert ok, (orig, pert, [(t.text, n) for t, n, _ in found])


# ----------------------------------------------------------------------------------------------
# fixtures

def _read_rows(path: Path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _corpus(name: str):
    if name == "excerpt":
        caps, ids = [], []
        for r in _read_rows(EXCERPT):
            for j, c in enumerate(r["captions"]):
                caps.append(c)
                ids.append(f"{r['image']}#{j}")
        return caps, ids
    if not (SHARED / "coco5k_test.jsonl").is_file():
        pytest.skip(f"the real caption files are not in {SHARED}; the excerpt tests still run")
    caps, ids = [], []
    for fname, step, n in (("coco5k_test.jsonl", 5, 250), ("flickr30k_test.jsonl", 2, 100),
                           ("coco5k_fg_test.jsonl", 50, 30), ("flickr30k_fg_test.jsonl", 15, 20)):
        for r in _read_rows(SHARED / fname)[::step][:n]:
            for j, c in enumerate(r["captions"]):
                caps.append(c)
                ids.append(f"{fname}/{r['image']}#{j}")
    return caps[:2000], ids[:2000]


@pytest.fixture(scope="module", params=[pytest.param("excerpt", marks=pytest.mark.slow),
                                               pytest.param("shared", marks=pytest.mark.slow)])  # 300 / 5,000 captions
def corpus(request):
    """Captions, ids, spaCy tokens and all 13 perturbations (seed 0) for one corpus; computed once."""
    from vlbench.perturbations import engine
    from vlbench.perturbations.engine import parse

    caps, ids = _corpus(request.param)
    tokens = parse(caps)
    with pytest.MonkeyPatch.context() as mp:  # tag once: the engine gets the same tags from this cache
        mp.setattr(engine, "parse", lambda texts, **kw: {t: tokens[t] for t in texts})
        sets = P.perturb_captions(caps, ids, P.resolve("all"), seed=0)
    return {"name": request.param, "captions": caps, "ids": ids, "sets": sets, "tokens": tokens}


@pytest.fixture(scope="module")
def wn():
    from vlbench.lang import wordnet

    return wordnet()


# ----------------------------------------------------------------------------------------------
# API, registry, resolve

def test_import_is_cheap():
    code = ("import sys, vlbench.perturbations, vlbench.perturbations.cli; "
            "print([m for m in ('torch', 'spacy', 'nlpaug', 'nltk', 'numpy', 'sentence_transformers') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_thirteen_builtins_registered_with_family_and_version():
    from vlbench.registry import perturbations as reg

    assert sum(len(v) for v in P.FAMILIES.values()) == 13
    assert P.FAMILIES == {
        "typos": ["char-swap", "missing-char", "extra-char", "nearby-char"],
        "lexical": ["synonym-noun", "synonym-adjective"],
        "distraction": ["distraction-true", "distraction-false"],
        "word-order": ["shuffle-nouns-adjectives", "shuffle-all-words", "shuffle-all-but-nouns-adjectives",
                       "shuffle-within-trigrams", "shuffle-trigrams"],
    }
    for fam, names in P.FAMILIES.items():
        for n in names:
            e = reg.entry(n)
            assert e.meta["family"] == fam and e.meta["version"] and e.source == "builtin"
            obj = reg.get(n)()
            assert (obj.name, obj.family, obj.version) == (n, fam, e.meta["version"])
            assert isinstance(obj.params, dict) and isinstance(obj.needs_parse, bool)


def test_resolve():
    assert P.resolve("all") == [n for ns in P.FAMILIES.values() for n in ns]
    assert P.resolve("typos") == P.FAMILIES["typos"]
    assert P.resolve(" lexical , char-swap,lexical ") == ["synonym-noun", "synonym-adjective", "char-swap"]
    assert P.resolve("shuffle-trigrams") == ["shuffle-trigrams"]


@pytest.mark.parametrize("bad, expect", [("char-swp", "char-swap"), ("typo", "typos"),
                                          ("shuffle-trigram", "shuffle-trigrams"), ("synonym-adj", "synonym-adjective")])
def test_unknown_name_suggests_close_matches(bad, expect):
    with pytest.raises(UnknownNameError) as ei:
        P.resolve(f"char-swap,{bad}")
    assert repr(expect) in str(ei.value) and "did you mean" in str(ei.value)


def test_empty_spec_and_bad_params():
    with pytest.raises(VlbenchError):
        P.resolve(" , ")
    with pytest.raises(VlbenchError, match="did you mean 'choice'"):
        P.perturb_captions(["a dog"], ["d#0"], ["synonym-noun"], params={"synonym-noun": {"choise": "random"}})
    with pytest.raises(VlbenchError, match="not allowed"):
        P.perturb_captions(["a dog"], ["d#0"], ["synonym-noun"], params={"synonym-noun": {"choice": "best"}})
    with pytest.raises(VlbenchError, match="integer"):
        P.perturb_captions(["a dog"], ["d#0"], ["char-swap"], params={"char-swap": {"edits": 0}})
    with pytest.raises(VlbenchError, match="not selected"):
        P.perturb_captions(["a dog"], ["d#0"], ["char-swap"], params={"missing-char": {"edits": 2}})
    with pytest.raises(VlbenchError, match="more than once"):
        P.perturb_captions(["a dog", "a cat"], ["d#0", "d#0"], ["char-swap"])
    with pytest.raises(VlbenchError, match="ids"):
        P.perturb_captions(["a dog", "a cat"], ["d#0"], ["char-swap"])


def test_caption_rng_is_pinned_and_portable():
    """Known answers: the per-caption stream must never change silently (it is part of the results)."""
    r = CaptionRNG("0/char-swap/x#0")
    assert [r.randbelow(1000) for _ in range(6)] == [739, 150, 998, 12, 75, 732]
    assert r.random() == pytest.approx(0.39672481579666286, abs=0)
    assert CaptionRNG.for_caption(7, "shuffle-all-words", "img.jpg#3").permutation(8) == [1, 5, 6, 3, 4, 7, 2, 0]
    # unbiased enough: 3 buckets over 30k draws
    r = CaptionRNG("uniformity")
    counts = collections.Counter(r.randbelow(3) for _ in range(30000))
    assert all(abs(c - 10000) < 400 for c in counts.values())


# ----------------------------------------------------------------------------------------------
# the chapter's example (Figure 5.1)

GOLDEN_SEED0 = {  # caption id "fig#0", seed 0; a change here needs a version bump of that perturbation
    "char-swap": "An amphibious plane is floating in fornt of the London Bridge.",
    "missing-char": "An amphibious plane is floatin in front of the London Bridge.",
    "extra-char": "An amphibious plane is floating in fwront of the London Bridge.",
    "nearby-char": "An amphibious plane is floatigg in front of the London Bridge.",
    "synonym-noun": "An amphibious airplane is floating in front of the London Bridge.",
    # v2.0: "amphibian" is a derivation of "amphibious" (same first four letters), so not applicable
    "synonym-adjective": "An amphibious plane is floating in front of the London Bridge.",
    "distraction-true": "An amphibious plane is floating in front of the London Bridge and true is true.",
    "distraction-false": "An amphibious plane is floating in front of the London Bridge and false is false.",
    "shuffle-nouns-adjectives": "An amphibious Bridge is floating in front of the London plane.",
    "shuffle-all-words": "in of is Bridge plane the floating front An London amphibious.",
    "shuffle-all-but-nouns-adjectives": "floating amphibious plane the An of front is in London Bridge.",
    "shuffle-within-trigrams": "An plane amphibious in is floating front of the London Bridge.",
    "shuffle-trigrams": "London Bridge An amphibious plane front of the is floating in.",
}


@pytest.fixture(scope="module")
def chapter_runs():
    """The chapter's caption under 40 seeds (as 40 caption ids), all perturbations."""
    ids = [f"fig#{i}" for i in range(40)]
    return ids, P.perturb_captions([CHAPTER] * 40, ids, P.resolve("all"), seed=0)


def test_chapter_example_golden(chapter_runs):
    ids, sets = chapter_runs
    assert {n: ps.texts[0] for n, ps in sets.items()} == GOLDEN_SEED0
    assert all(all(ps.applicable) for n, ps in sets.items() if n != "synonym-adjective")


def test_chapter_example_definitions(chapter_runs, wn):
    from vlbench.perturbations.engine import parse

    ids, sets = chapter_runs
    toks = parse([CHAPTER])[CHAPTER]
    assert [(t.text, t.tag) for t in toks if t.tag in NOUNS | ADJS] == [
        ("amphibious", "JJ"), ("plane", "NN"), ("front", "NN"), ("London", "NNP"), ("Bridge", "NNP")]
    words = units(CHAPTER)
    assert words[-1] == "Bridge"
    noun_pos = [1 + 1, 6, 9, 10]  # plane, front, London, Bridge (unit indices)
    for i in range(len(ids)):
        t = {n: ps.texts[i] for n, ps in sets.items()}
        check_swap(CHAPTER, t["char-swap"])
        check_missing(CHAPTER, t["missing-char"])
        check_extra(CHAPTER, t["extra-char"])
        check_nearby(CHAPTER, t["nearby-char"])
        for name in ("shuffle-nouns-adjectives", "shuffle-all-words", "shuffle-all-but-nouns-adjectives",
                     "shuffle-within-trigrams", "shuffle-trigrams"):
            assert t[name].endswith(".") and skeleton(t[name]) == skeleton(CHAPTER)
            assert sorted(units(t[name])) == sorted(words) and t[name] != CHAPTER
        w = units(t["shuffle-nouns-adjectives"])
        assert w[1] == "amphibious"  # the only adjective cannot move (separate mode)
        assert sorted(w[k] for k in noun_pos) == sorted(words[k] for k in noun_pos)
        assert [w[k] for k in range(len(w)) if k not in noun_pos] == [words[k] for k in range(len(w)) if k not in noun_pos]
        w = units(t["shuffle-all-but-nouns-adjectives"])
        assert [w[k] for k in (1, *noun_pos)] == [words[k] for k in (1, *noun_pos)]
    # the deterministic common-synonym rule (k = 1); the adjective has no same-sense common synonym
    check_synonym(CHAPTER, sets["synonym-noun"].texts[0], toks, NOUNS, "n", wn)
    assert not any(sets["synonym-adjective"].applicable)
    first = P.perturb_captions([CHAPTER], ["x"], ["synonym-adjective"],
                               params={"synonym-adjective": {"choice": "first"}})["synonym-adjective"]
    check_synonym(CHAPTER, first.texts[0], toks, ADJS, "a", wn)  # the chapter's (version 1.0) rule
    assert len(set(sets["synonym-noun"].texts)) == 1  # "first" rule: independent of the caption id
    # the shuffles really are random per caption id
    assert len(set(sets["shuffle-all-words"].texts)) > 30


def test_nouns_adjectives_joint_mode_moves_the_adjective():
    ids = [f"fig#{i}" for i in range(40)]
    ps = P.perturb_captions([CHAPTER] * 40, ids, ["shuffle-nouns-adjectives"],
                            params={"shuffle-nouns-adjectives": {"mode": "joint"}})["shuffle-nouns-adjectives"]
    slots = [1, 2, 6, 9, 10]
    words = units(CHAPTER)
    assert any(units(t)[1] != "amphibious" for t in ps.texts)
    for t in ps.texts:
        w = units(t)
        assert sorted(w[k] for k in slots) == sorted(words[k] for k in slots)


def test_synonym_choice_random_and_k(wn):
    from vlbench.perturbations.engine import parse

    ids = [f"fig#{i}" for i in range(30)]
    ps = P.perturb_captions([CHAPTER] * 30, ids, ["synonym-noun"],
                            params={"synonym-noun": {"choice": "random"}})["synonym-noun"]
    toks = parse([CHAPTER])[CHAPTER]
    assert len(set(ps.texts)) > 3 and all(ps.applicable)
    for t in ps.texts:
        check_synonym(CHAPTER, t, toks, NOUNS, "n", wn)
    again = P.perturb_captions([CHAPTER] * 30, ids, ["synonym-noun"], params={"synonym-noun": {"choice": "random"}})
    assert again["synonym-noun"].texts == ps.texts
    k2 = P.perturb_captions([CHAPTER], ["x"], ["synonym-noun"],
                            params={"synonym-noun": {"k": 2, "choice": "first"}})["synonym-noun"]
    assert k2.texts[0] == "An amphibious airplane is floating in front end of the London Bridge."


@pytest.mark.parametrize("caption, expected", [
    ("A picture of a cat.", "An image of a cat."),  # a -> an before a vowel
    ("Two dogs are running.", "Two domestic dogs are running."),  # plural kept
    ("A woman's purse on a table.", "An adult female's purse on a table."),  # possessive host word
])
def test_synonym_noun_form_and_article(caption, expected):
    first = {"synonym-noun": {"choice": "first"}}  # the version-1.0 rule, still reachable
    assert P.perturb_captions([caption], ["c"], ["synonym-noun"], params=first)["synonym-noun"].texts[0] == expected


def test_synonym_inflect_false_inserts_bare_lemma():
    out = P.perturb_captions(["Two dogs are running."], ["c"], ["synonym-noun"],
                             params={"synonym-noun": {"inflect": False, "choice": "first"}})["synonym-noun"].texts[0]
    assert out == "Two domestic dog are running."


def test_synonym_not_applicable_without_candidates():
    res = P.perturb_captions(["The dog runs.", "Quickly!"], ["a", "b"], ["synonym-adjective"])["synonym-adjective"]
    assert res.applicable == [False, False] and res.texts == ["The dog runs.", "Quickly!"]


@pytest.mark.parametrize("caption, true_out", [
    ("A dog runs.", "A dog runs and true is true."),
    ("A dog runs", "A dog runs and true is true"),
    ("A dog runs!!", "A dog runs and true is true!!"),
    ("a dog runs .", "a dog runs and true is true ."),
    ('A sign says "stop."', 'A sign says "stop." and true is true'),
])
def test_distraction_placement(caption, true_out):
    res = P.perturb_captions([caption], ["c"], ["distraction-true", "distraction-false"])
    assert res["distraction-true"].texts[0] == true_out
    assert res["distraction-false"].texts[0] == true_out.replace("true is true", "false is false")


def test_distraction_compat_mode_reproduces_authors_code():
    res = P.perturb_captions(["A dog runs.", "Wow!", "A cat"], ["a", "b", "c"], ["distraction-true", "distraction-false"],
                             params={"distraction-true": {"compat": True}, "distraction-false": {"compat": True}})
    assert res["distraction-true"].texts == ["A dog runs and true it true.", "Wow! and true it true.",
                                             "A cat and true it true."]
    assert res["distraction-false"].texts[0] == "A dog runs and false is false."
    end = P.perturb_captions(["A dog runs."], ["a"], ["distraction-true"],
                             params={"distraction-true": {"position": "end"}})["distraction-true"]
    assert end.texts == ["A dog runs. and true is true"]


def test_empty_and_whitespace_captions_are_not_applicable():
    caps = ["", "   ", "...", "A dog runs.", "dog"]
    res = P.perturb_captions(caps, [f"c#{i}" for i in range(5)], P.resolve("all"))
    for name, ps in res.items():
        assert ps.texts[:3] == caps[:3] and ps.applicable[:3] == [False, False, False], name
        assert ps.n_empty_input == 3 and ps.describe()["n_empty_input"] == 3
        assert all(t.strip() for t in ps.texts[3:])
    # one-word caption: shuffles cannot apply, typos and distraction can
    assert res["shuffle-all-words"].applicable[4] is False and res["shuffle-trigrams"].applicable[4] is False
    assert res["char-swap"].applicable[4] is True and res["distraction-true"].applicable[4] is True
    assert res["shuffle-all-words"].n_not_applicable == 4
    assert res["shuffle-all-words"].not_applicable_rate == pytest.approx(0.8)


def test_identical_words_cannot_be_shuffled():
    caps = ["dog dog dog", "dog dog dog dog", "the the the the the the", "a b", "a a b"]
    res = P.perturb_captions(caps, [f"c{i}" for i in range(5)],
                             ["shuffle-all-words", "shuffle-within-trigrams", "shuffle-trigrams"])
    assert res["shuffle-all-words"].applicable == [False, False, False, True, True]
    assert res["shuffle-within-trigrams"].applicable == [False, False, False, True, True]
    assert res["shuffle-trigrams"].applicable == [False, False, False, False, False]
    assert res["shuffle-all-words"].texts[3] == "b a"  # the only different order, always found


def test_describe_and_hash():
    res = P.perturb_captions([CHAPTER, "Dogs."], ["a#0", "a#1"], ["shuffle-all-words", "synonym-noun"], seed=3)
    d = res["shuffle-all-words"].describe()
    json.dumps(d)
    assert {"name", "family", "version", "params", "seed", "captions_hash", "n_not_applicable",
            "not_applicable_rate", "n_captions"} <= set(d)
    assert d["seed"] == 3 and d["n_captions"] == 2 and d["n_not_applicable"] == 1
    assert len(d["captions_hash"]) == 64
    assert res["synonym-noun"].describe()["resources"]["wordnet"].startswith("WordNet 3.0")
    other = P.perturb_captions([CHAPTER, "Dogs."], ["a#0", "a#1"], ["shuffle-all-words"], seed=4)
    assert other["shuffle-all-words"].captions_hash() != res["shuffle-all-words"].captions_hash()


def test_multiple_edits_go_to_distinct_words():
    caption = "Several colorful umbrellas standing beside wooden benches near water."
    ps = P.perturb_captions([caption] * 20, [f"x{i}" for i in range(20)], ["missing-char"],
                            params={"missing-char": {"edits": 3}})["missing-char"]
    for t in ps.texts:
        a, b = caption.split(" "), t.split(" ")
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        assert len(diff) == 3 and all(len(b[i]) == len(a[i]) - 1 for i in diff)


def test_extra_char_keyboard_source_and_rate():
    caption = "Several colorful umbrellas standing beside wooden benches near water."
    ids = [f"x{i}" for i in range(30)]
    ps = P.perturb_captions([caption] * 30, ids, ["extra-char"],
                            params={"extra-char": {"source": "keyboard"}})["extra-char"]
    for t in ps.texts:
        old, new = changed_chunk(caption, t)
        i = next(i for i in range(1, len(new)) if new[:i] + new[i + 1:] == old and new[i].lower() in TEST_QWERTY[new[i - 1].lower()])
        assert new[i].lower() in TEST_QWERTY[new[i - 1].lower()]
    ps = P.perturb_captions([caption] * 5, ids[:5], ["nearby-char"], params={"nearby-char": {"rate": 0.5}})["nearby-char"]
    for t in ps.texts:  # 9 eligible words -> ceil(4.5) = 5 edited words
        assert sum(a != b for a, b in zip(caption.split(" "), t.split(" "))) == 5


def test_qwerty_map_matches_nlpaug_resource():
    """Our map = nlpaug's English keyboard file restricted to letters, with its broken 'u' entry fixed."""
    import importlib.util

    from vlbench.perturbations.typos import QWERTY

    assert {k: "".join(sorted(v)) for k, v in QWERTY.items()} == {k: "".join(sorted(v)) for k, v in TEST_QWERTY.items()}
    spec = importlib.util.find_spec("nlpaug")  # a core dependency
    assert spec is not None and spec.submodule_search_locations, "nlpaug (a core dependency) is not installed"
    path = Path(spec.submodule_search_locations[0]) / "res" / "char" / "keyboard" / "en.json"
    raw = json.loads(path.read_text())
    nl = {k: sorted({v for v in vals if len(v) == 1 and v.isalpha() and v != k}) for k, vals in raw.items()
          if k.isalpha()}
    for k, v in nl.items():
        if k == "u":
            assert " t" in raw["u"] and "y" not in raw["u"]  # nlpaug's bug: fixed in ours
            assert sorted(QWERTY[k]) == sorted(set(v) | {"y"})
        else:
            assert sorted(QWERTY[k]) == v, k


class _Upper:
    """A minimal third-party perturbation (plug-in protocol)."""

    name = "test-upper"
    family = "test"
    version = "0.1"
    needs_parse = False

    def __init__(self, every: int = 1):
        self.params = {"every": every}

    def apply(self, text, *, rng, tokens=None):
        if text.isupper():
            return None
        return text.upper() if rng.randbelow(self.params["every"]) == 0 else text


def test_plugin_protocol():
    from vlbench.registry import perturbations as reg

    reg.register("test-upper", _Upper, source="plugin:test 0.1")
    try:
        assert P.resolve("test-upper,distraction-true") == ["test-upper", "distraction-true"]
        assert "test-upper" not in P.resolve("all")  # "all" means the built-ins
        res = P.perturb_captions(["a dog", "A CAT", ""], ["1", "2", "3"], ["test-upper"],
                                 params={"test-upper": {"every": 1}})["test-upper"]
        assert res.texts == ["A DOG", "A CAT", ""] and res.applicable == [True, False, False]
        assert res.source == "plugin:test 0.1" and res.describe()["params"] == {"every": 1}
    finally:
        reg._entries.pop("test-upper", None)


def test_plugin_missing_attributes_is_reported():
    from vlbench.registry import perturbations as reg

    class Broken:
        name = "test-broken"

        def __init__(self, **kw):
            pass

    reg.register("test-broken", Broken, source="plugin:test 0.1")
    try:
        with pytest.raises(VlbenchError, match="lacks family, version, params, needs_parse, apply"):
            P.perturb_captions(["a dog"], ["1"], ["test-broken"])
    finally:
        reg._entries.pop("test-broken", None)


# ----------------------------------------------------------------------------------------------
# properties on real captions

def _pairs(corpus, name):
    ps = corpus["sets"][name]
    return zip(corpus["captions"], ps.texts, ps.applicable)


def test_rates_are_plausible(corpus):
    sets = corpus["sets"]
    for name in P.FAMILIES["typos"] + P.FAMILIES["distraction"] + ["shuffle-all-words", "shuffle-within-trigrams",
                                                                   "shuffle-trigrams"]:
        assert sets[name].not_applicable_rate < 0.01, name
    # v2.1 common rule + semantic guard: conservative (about 11 % of COCO captions get a noun synonym)
    assert 0.6 < sets["synonym-noun"].not_applicable_rate < 0.98, sets["synonym-noun"].not_applicable_rate
    assert sets["shuffle-all-but-nouns-adjectives"].not_applicable_rate < 0.02
    assert 0.6 < sets["synonym-adjective"].not_applicable_rate < 0.98, sets["synonym-adjective"].not_applicable_rate
    for ps in sets.values():
        assert len(ps.texts) == len(corpus["captions"]) and all(t.strip() for t in ps.texts)


@pytest.mark.parametrize("name, check", [("char-swap", check_swap), ("missing-char", check_missing),
                                         ("extra-char", check_extra), ("nearby-char", check_nearby)])
def test_typo_is_one_edit_of_one_word(corpus, name, check):
    for orig, pert, app in _pairs(corpus, name):
        if app:
            check(orig, pert)
        else:
            assert pert == orig


def test_distraction_adds_exactly_the_phrase(corpus):
    for name, phrase in (("distraction-true", "and true is true"), ("distraction-false", "and false is false")):
        for orig, pert, app in _pairs(corpus, name):
            assert app and pert == distraction_expected(orig, phrase)
            assert pert.replace(" " + phrase, "", 1) == orig


def test_shuffles_keep_words_and_punctuation(corpus):
    for name in P.FAMILIES["word-order"]:
        for orig, pert, app in _pairs(corpus, name):
            assert collections.Counter(units(pert)) == collections.Counter(units(orig)), (name, orig, pert)
            assert skeleton(pert) == skeleton(orig), (name, orig, pert)
            assert (pert != orig) == app


def test_shuffle_all_words_applicability(corpus):
    for orig, pert, app in _pairs(corpus, "shuffle-all-words"):
        assert app == (len(set(units(orig))) > 1)


def test_shuffle_nouns_adjectives_keeps_other_words(corpus):
    for orig, pert, app in _pairs(corpus, "shuffle-nouns-adjectives"):
        toks = corpus["tokens"][orig]
        a, b = units(orig), units(pert)
        is_n, is_j = unit_is(orig, toks, NOUNS), unit_is(orig, toks, ADJS)
        for k in range(len(a)):
            if not is_n[k] and not is_j[k]:
                assert a[k] == b[k], (orig, pert)
        for flags in (is_n, is_j):  # separate mode: each class permuted within its own slots
            assert sorted(x for x, f in zip(a, flags) if f) == sorted(x for x, f in zip(b, flags) if f)
        can = any(len({x for x, f in zip(a, flags) if f}) > 1 for flags in (is_n, is_j))
        assert app == can, (orig, pert)


def test_shuffle_all_but_keeps_nouns_adjectives_in_place(corpus):
    for orig, pert, app in _pairs(corpus, "shuffle-all-but-nouns-adjectives"):
        toks = corpus["tokens"][orig]
        a, b = units(orig), units(pert)
        fixed = [n or j for n, j in zip(unit_is(orig, toks, NOUNS), unit_is(orig, toks, ADJS))]
        assert [x for x, f in zip(a, fixed) if f] == [x for x, f in zip(b, fixed) if f]
        assert [k for k in range(len(a)) if fixed[k]] == [k for k in range(len(b)) if fixed[k] and a[k] == b[k]]
        assert app == (len({x for x, f in zip(a, fixed) if not f}) > 1)


def test_shuffle_within_trigrams_keeps_each_trigram(corpus):
    for orig, pert, app in _pairs(corpus, "shuffle-within-trigrams"):
        a, b = trigram_blocks(units(orig)), trigram_blocks(units(pert))
        assert [sorted(x) for x in a] == [sorted(x) for x in b]
        assert app == any(len(set(x)) > 1 for x in a)


def test_shuffle_trigrams_keeps_trigrams_intact(corpus):
    for orig, pert, app in _pairs(corpus, "shuffle-trigrams"):
        a = units(orig)
        blocks = trigram_blocks(a)
        assert is_block_concat(units(pert), blocks), (orig, pert)
        if not app:  # then no order of the blocks changes the words
            assert len(blocks) <= 7
            assert all([w for blk in perm for w in blk] == a for perm in itertools.permutations(blocks))


@pytest.mark.parametrize("name, tagset, wn_pos", [("synonym-noun", NOUNS, "n"), ("synonym-adjective", ADJS, "a")])
def test_synonym_is_a_wordnet_synonym_of_the_right_pos(corpus, wn, name, tagset, wn_pos):
    n_checked = 0
    for orig, pert, app in _pairs(corpus, name):
        if not app:
            assert pert == orig
            continue
        check_synonym(orig, pert, corpus["tokens"][orig], tagset, wn_pos, wn)
        n_checked += 1
    # the common rule with the semantic guard (v2.1) applies to about 10 % of captions (30 of 300 nouns here)
    assert n_checked > 0.05 * len(corpus["captions"])


def test_order_and_batch_independence(corpus):
    rnd = random.Random(0)
    idx = rnd.sample(range(len(corpus["captions"])), min(250, len(corpus["captions"])))
    caps = [corpus["captions"][i] for i in idx]
    ids = [corpus["ids"][i] for i in idx]
    sub = P.perturb_captions(caps, ids, P.resolve("all"), seed=0, batch_size=7)
    for name, ps in sub.items():
        full = corpus["sets"][name]
        assert ps.texts == [full.texts[i] for i in idx], name
        assert ps.applicable == [full.applicable[i] for i in idx], name


def test_different_seed_gives_different_results(corpus):
    names = ["shuffle-all-words", "shuffle-trigrams", "char-swap", "nearby-char"]
    other = P.perturb_captions(corpus["captions"], corpus["ids"], names, seed=1)
    for name in names:
        a, b = corpus["sets"][name].texts, other[name].texts
        long = [i for i, c in enumerate(corpus["captions"]) if len(units(c)) >= 8]
        assert sum(a[i] != b[i] for i in long) > 0.8 * len(long), name
    same = P.perturb_captions(corpus["captions"][:50], corpus["ids"][:50], names, seed=0)
    for name in names:
        assert same[name].texts == corpus["sets"][name].texts[:50]


# ----------------------------------------------------------------------------------------------
# The meaning-changing replacements of the version-1.0 rule no longer happen by default

ISSUE10_NOUN = [  # (caption, replacement that must not appear) from the issue's COCO audit
    ("A horse standing in the grass.", "Grass"), ("A brown horse in a field.", "Equus"),
    ("A glass of water on a table.", "H2O"), ("A bride and groom cut a cake.", "Bridget"),
    ("Footprints in the sand at the beach.", "George"), ("A cook prepares food in a kitchen.", "James"),
    ("A jet plane on the runway.", "plane plane"), ("BASEBALL GAME GOING ON", "GAME GAME"),
    ("A fire hydrant on the street.", "firing"), ("A boy eats a hot dog.", "raging"),
    ("A close up of a cat.", "near up"), ("Two men walking down a road.", "work force"),
    ("more than the usual cars", "than than"), ("A  woman with an umbrella.", "adult female"),
]
ISSUE10_ADJ = [
    ("A black cat on a bed.", "bleak"), ("Other people watch a game.", "early"),
    ("Several people on a beach.", "respective"), ("A tall man in a suit.", "grandiloquent"),
    ("An old man on a bench.", "older"), ("A black and white photo of a dog.", "bleak"),
]


@pytest.mark.parametrize("name, cases", [("synonym-noun", ISSUE10_NOUN), ("synonym-adjective", ISSUE10_ADJ)])
def test_issue10_replacements_gone_by_default(name, cases):
    caps = [c for c, _ in cases]
    out = P.perturb_captions(caps, [f"c{i}" for i in range(len(caps))], [name])[name]
    for (cap, bad), new in zip(cases, out.texts):
        assert bad not in new, (cap, new)
        words = new.lower().split()
        assert all(a != b for a, b in zip(words, words[1:])), new  # no adjacent repeat
        # a replaced lower-case word never becomes capitalised; capitalised words stay where they were
        assert [w[0].isupper() for w in new.split()] == [w[0].isupper() for w in cap.split()][:len(new.split())] \
            or len(new.split()) != len(cap.split()), new


def test_common_rule_keeps_number_article_and_fixed_expressions():
    caps = ["A plane on the runway.", "Two cars on a road.", "A hot dog and a fire hydrant.", "A  plane on the runway."]
    out = P.perturb_captions(caps, ["a", "b", "c", "d"], ["synonym-noun"])["synonym-noun"]
    # plane -> airplane (its visual sense, both words' dominant sense); the article is fixed whatever the
    # spacing; car -> automobile keeps the plural; hot dog / fire hydrant untouched
    assert out.texts == ["An airplane on the runway.", "Two automobiles on a road.", "A hot dog and a fire hydrant.",
                         "An  airplane on the runway."]
    assert out.applicable == [True, True, False, True]


def test_first_rule_still_reachable_and_old_output_reproducible():
    first = {"synonym-noun": {"choice": "first"}}
    out = P.perturb_captions(["A horse standing in the grass."], ["c"], ["synonym-noun"], params=first)
    # the version-1.0 output quoted in the issue ("Equus caballus" for horse, first noun with a synonym)
    assert out["synonym-noun"].texts[0] == "An Equus caballus standing in the grass."
