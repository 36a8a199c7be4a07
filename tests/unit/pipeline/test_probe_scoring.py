"""The scores of meaning-changing probes (vlbench/pipeline/sensitivity/scores.py) against recomputations from
their definitions: plain Python loops over the vectors, on real-valued vectors with exact and near ties."""

from __future__ import annotations

import re

import numpy as np
import pytest

from vlbench.errors import VlbenchError
from vlbench.perturbations.probes import PROBES, ProbeSet
from vlbench.pipeline import sensitivity as S


def _vectors(seed=0, n_img=6, per=3, dim=8):
    rng = np.random.default_rng(seed)
    img = rng.standard_normal((n_img, dim)).astype(np.float32)
    orig = rng.standard_normal((n_img * per, dim)).astype(np.float32)
    probe = rng.standard_normal((n_img * per, dim)).astype(np.float32)
    image_of = np.repeat(np.arange(n_img), per)
    probe[0] = orig[0]  # an exact tie: the same text vector
    probe[1] = orig[1] * np.float32(1.0)  # exact tie again (a copy)
    # a near tie: the probe scores a hair below the original (a win), and one a hair above (a miss)
    g2, g3 = img[image_of[2]].astype(np.float64), img[image_of[3]].astype(np.float64)
    probe[2] = orig[2] - np.float32(1e-6) * np.sign(g2).astype(np.float32)
    probe[3] = orig[3] + np.float32(1e-6) * np.sign(g3).astype(np.float32)
    return img, np.concatenate([orig, probe]), image_of


def _loop_scores(img, txt, image_of, off):
    out_a, out_b = [], []
    for i, g in enumerate(image_of):
        v = [float(x) for x in img[g]]
        a = sum(x * float(y) for x, y in zip(v, txt[i]))
        b = sum(x * float(y) for x, y in zip(v, txt[off + i]))
        out_a.append(a)
        out_b.append(b)
    return out_a, out_b


def test_pairwise_accuracy_equals_a_loop_over_the_vectors_with_ties_as_misses():
    img, txt, image_of = _vectors()
    n = len(image_of)
    applicable = [i % 5 != 4 for i in range(n)]  # some captions had no probe
    a, b = S.pair_scores(img, txt, image_of, n)
    la, lb = _loop_scores(img, txt, image_of, n)
    wins = [x > y for x, y, ok in zip(la, lb, applicable) if ok]
    ties = [x == y for x, y, ok in zip(la, lb, applicable) if ok]
    res = S.pairwise(a, b, applicable, n_boot=200, seed=3)
    assert res["accuracy"] == pytest.approx(100.0 * sum(wins) / len(wins), abs=1e-12)
    assert res["n_ties"] == sum(ties) == 2  # the two exact ties: counted, and misses
    assert not wins[0] and not wins[1]
    assert wins[2] and not wins[3]  # the near ties fall on the side their scores say
    assert res["n_applicable"] == sum(applicable) and res["n_not_applicable"] == n - sum(applicable)
    assert res["accuracy_ties_half"] == pytest.approx(100.0 * (sum(wins) + 0.5 * sum(ties)) / len(wins))
    assert res["ci_low"] <= res["accuracy"] <= res["ci_high"]


def test_pairwise_interval_is_the_runs_resampling_of_the_wins():
    wins = np.array([1, 0, 1, 1, 0, 1, 1, 1, 0, 1], dtype=np.float64)
    res = S.pairwise(wins, np.zeros(10), [True] * 10, n_boot=500, seed=7)
    rng = np.random.default_rng(7)
    means = []
    for _ in range(0, 500, 100):  # the run's resampling: chunks of 100 replicates, captions with replacement
        means.append(wins[rng.integers(0, 10, size=(100, 10))].mean(axis=1))
    dist = np.concatenate(means) * 100
    assert res["ci_low"] == pytest.approx(float(np.quantile(dist, 0.025)))
    assert res["ci_high"] == pytest.approx(float(np.quantile(dist, 0.975)))


def test_pairwise_without_applicable_captions_reports_no_accuracy():
    res = S.pairwise(np.ones(3), np.zeros(3), [False] * 3, n_boot=10, seed=0)
    assert res["accuracy"] is None and res["n_not_applicable"] == 3


def _regex_mentions(captions, image_of, n_gallery, word):
    forms = [word, word + "s", word + "es"]
    pat = re.compile(r"(?<![a-z0-9])(" + "|".join(re.escape(f) for f in forms) + r")(?![a-z0-9])")
    hit = [False] * n_gallery
    for text, g in zip(captions, image_of):
        if pat.search(text.lower()):
            hit[g] = True
    return hit


def test_denial_shares_equal_a_sort_by_score_then_index():
    rng = np.random.default_rng(1)
    n_gallery, dim = 9, 6
    img = rng.standard_normal((n_gallery, dim)).astype(np.float32)
    img[4] = img[2]  # two images with the same vector: every query ties them; the lower index ranks first
    captions = ["A dog on grass.", "two dogs run", "a cat sleeps", "the Cat and a bus", "buses in the rain",
                "a hotdog stand", "dog-walker with a leash", "a horse", "a boxes pile"]
    image_of = list(range(8)) + [8]
    queries = rng.standard_normal((5, dim)).astype(np.float32)
    denied = ["dog", "cat", "bus", "box", "horse"]
    mentions = S.MentionIndex(captions, image_of, n_gallery + 1)  # one distractor image without captions
    gallery_vecs = np.concatenate([img, rng.standard_normal((1, dim)).astype(np.float32)])
    ks = [1, 3, 20]
    got = S.denial_shares(queries, gallery_vecs, np.arange(n_gallery + 1), denied, mentions, ks)
    for qi, (q, word) in enumerate(zip(queries, denied)):
        scores = [sum(float(a) * float(b) for a, b in zip(q, g)) for g in gallery_vecs]
        order = sorted(range(len(scores)), key=lambda j: (-scores[j], j))
        hit = _regex_mentions(captions, image_of, n_gallery + 1, word)
        for k in ks:
            top = order[:min(k, len(order))]
            assert got[k][qi] == pytest.approx(sum(hit[j] for j in top) / len(top)), (word, k)
    # the tie at gallery rows 2 and 4: row 2 first in every query's ranking
    top = S.top_k(queries, gallery_vecs, np.arange(n_gallery + 1), n_gallery + 1)
    assert all(list(r).index(2) < list(r).index(4) for r in top)


def test_mentions_are_whole_words_with_plurals():
    m = S.MentionIndex(["A dog on grass.", "a hotdog stand", "two puppies", "teddy bears on a bed", "men talk"],
                       [0, 1, 2, 3, 4], 5)
    assert list(m("dog")) == [True, False, False, False, False]  # "hotdog" is no mention of a dog
    assert list(m("puppy")) == [False, False, True, False, False]
    assert list(m("teddy bear")) == [False, False, False, True, False]
    assert list(m("man")) == [False, False, False, False, True]


def test_effect_comes_from_the_probe_not_a_list_of_names():
    assert PROBES["negation-absent"].effect == "true"
    assert all(PROBES[n].effect == "false" for n in PROBES if n != "negation-absent")
    hand = ProbeSet(name="swap-by-hand", family="swap", version="1", params={}, seed=0, caption_ids=["a"],
                    texts=["x"], applicable=[True], meta=[{"swapped": ["a", "b"]}], verified=[True])
    assert S.effect(hand) == "false"  # a probe the scorer does not know is scored pairwise


def test_unknown_probe_names_are_refused_with_the_known_ones():
    with pytest.raises(VlbenchError) as err:
        S.probe_names("negation,dog")
    assert "dog" in str(err.value) and "half-truth" in str(err.value)
    assert S.probe_names("negation") == ["negation-absent", "negation-present"]
    assert set(S.probe_names("sensitivity")) == set(PROBES)


@pytest.mark.parametrize("k", [1, 2, 5, 11, 12, 40])
def test_top_k_keeps_the_lower_index_among_ties_at_the_cut(k):
    """Scores from a few levels only (ties everywhere, also at the k-th place): the top k equal a full sort by
    (score desc, gallery index asc), for every k below, at and above the gallery size."""
    rng = np.random.default_rng(k)
    gallery = rng.integers(0, 3, size=(12, 4)).astype(np.float32)  # many equal dot products
    queries = rng.integers(0, 3, size=(30, 4)).astype(np.float32)
    cands = np.arange(12)
    got = S.top_k(queries, gallery, cands, k)
    for q, row in zip(queries, got):
        s = [float(np.dot(q.astype(np.float64), g.astype(np.float64))) for g in gallery]
        assert list(row) == sorted(range(12), key=lambda j: (-s[j], j))[:min(k, 12)]


def test_probe_sets_are_made_once_then_read_from_the_cache(tmp_path, monkeypatch):
    from support.data import write_manifest

    from vlbench.datasets.core import load_dataset
    from vlbench.pipeline.sensitivity import plan

    ds = load_dataset(f"custom:{write_manifest(tmp_path / 'data', 4)}")
    said: list[str] = []
    first = plan.probe_sets(ds, ["negation-present", "half-truth-object"], params=None, seed=0,
                            cache_dir=tmp_path / "cache", log=said.append)

    def refuse(*a, **k):
        raise AssertionError("made again: the cache was not read")

    monkeypatch.setattr(plan, "make_probes", refuse)
    again = plan.probe_sets(ds, ["negation-present", "half-truth-object"], params=None, seed=0,
                            cache_dir=tmp_path / "cache", log=said.append)
    assert said[-1] == "probes from the cache (2 probe(s))"
    assert {n: (p.texts, p.meta) for n, p in again.items()} == {n: (p.texts, p.meta) for n, p in first.items()}
    with pytest.raises(AssertionError):  # another seed is another key: made again
        plan.probe_sets(ds, ["negation-present"], params=None, seed=1, cache_dir=tmp_path / "cache")


def test_absence_probes_on_one_caption_per_image_are_refused_naming_the_fix(tmp_path):
    from support.data import write_rows

    from vlbench.datasets.core import load_dataset
    from vlbench.pipeline.sensitivity import plan

    man = write_rows(tmp_path / "m.jsonl", [{"image": "a.png", "captions": ["a dog on grass"]},
                                            {"image": "b.png", "captions": ["a red bus", "a bus on a street"]}])
    ds = load_dataset(f"custom:{man}", require_images=False)
    with pytest.raises(VlbenchError) as err:
        plan.probe_sets(ds, ["negation-absent", "negation-present"], params=None, seed=0, write=False, read=False)
    assert "'a.png'" in str(err.value) and "negation-present" in err.value.hint
    made = plan.probe_sets(ds, ["negation-present"], params=None, seed=0, write=False, read=False)
    assert made["negation-present"].applicable[0]  # needs no other caption: made


def test_a_probe_given_to_perturb_points_to_the_probes_option():
    from vlbench.perturbations import resolve

    with pytest.raises(VlbenchError) as err:
        resolve("typos,negation")
    assert "--probes negation" in err.value.hint
