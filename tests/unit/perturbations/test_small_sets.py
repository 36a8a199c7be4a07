"""Small runs stay small. The validity sample scales to the set, ``perturb --text`` remembers
its result and imports spaCy without torch, and why synonyms left captions unchanged is said on the console."""

from __future__ import annotations

import subprocess
import sys

import pytest

import vlbench.perturbations as P
from vlbench.cli import main as vlbench_main
from vlbench.perturbations.validity import scaled_sample


@pytest.mark.parametrize("n, cap", [(1, 50), (40, 50), (200, 50), (201, 51), (1000, 250), (5000, 1250),
                                    (8000, 2000), (25000, 2000)])
def test_scaled_sample(n, cap):
    assert scaled_sample(n) == cap
    assert scaled_sample(n, 100) == min(100, cap)


def test_validity_uses_the_scaled_cap(monkeypatch):
    from vlbench.perturbations import validity as V

    seen = {}

    def fake_stats(originals, perturbed, cache=None, *, population=None, precision=None):
        seen["n"] = len(originals)
        return {"mean": 0.1, "p05": 0.0, "p50": 0.1, "p95": 0.2, "n": len(originals), "mean_ci95": 0.01}

    monkeypatch.setattr(V, "drift_stats", fake_stats)
    monkeypatch.setattr("vlbench.perturbations.guard.check_available", lambda: None)
    caps = [f"A dog number {i} runs." for i in range(300)]
    ps = P.perturb_captions(caps, [f"c{i}" for i in range(300)], ["distraction-true"])["distraction-true"]
    v = V.validity(caps, ps, mode="sample")
    assert seen["n"] == 75 and v["drift_sample_size"] == 75  # 300 captions: a quarter, not 2,000 (all 300)
    V.validity(caps, ps, mode="full")
    assert seen["n"] == 300


def test_perturb_text_remembers_its_result(monkeypatch, capsys):
    from vlbench.perturbations import cache  # the perturbed-caption cache calls perturb_captions on a miss

    calls = []
    real = cache.perturb_captions
    monkeypatch.setattr(cache, "perturb_captions", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    argv = ["perturb", "--text", "A small dog runs on the beach.", "--perturb", "typos,distraction"]
    assert vlbench_main(argv) == 0
    first = capsys.readouterr().out
    assert vlbench_main(argv) == 0
    second = capsys.readouterr().out
    assert first == second and "and true is true" in first
    assert len(calls) == 1  # the second call read the remembered result
    assert vlbench_main(argv + ["--no-cache"]) == 0 and len(calls) == 2
    assert vlbench_main(["perturb", "--text", "Another sentence here.", "--perturb", "typos"]) == 0
    assert len(calls) == 3  # another caption is perturbed, not looked up


@pytest.mark.slow  # a subprocess that imports spaCy
def test_spacy_is_imported_without_torch():
    code = ("import sys\n"
            "from vlbench.perturbations.engine import parse\n"
            "toks = parse(['A man rides a red bike.'])['A man rides a red bike.']\n"
            "print([t.tag for t in toks])\n"
            "print('torch' in sys.modules)\n"
            "import torch\n"  # torch still works afterwards (a model or the MiniLM guard)
            "print(torch.zeros(2).sum().item())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines == ["['DT', 'NN', 'VBZ', 'DT', 'JJ', 'NN', '.']", "False", "0.0"]


def test_reason_line():
    ps = P.PerturbedSet(name="synonym-noun", family="lexical", version="2.2", params={}, seed=0,
                        caption_ids=["a", "b", "c", "d"], texts=["x", "y", "z", "w"],
                        applicable=[True, False, False, False], n_empty_input=1,
                        not_applicable_reasons={"no_candidate": 1, "refused_by_guard": 1})
    assert ps.reason_line() == ("synonym-noun: left 3 of 4 captions unchanged: 1 had no eligible word with a common "
                                "same-sense synonym, 1 had candidates the semantic guard refused (MiniLM cosine below "
                                "threshold), 1 were empty")
    assert ps.describe()["not_applicable_reasons"] == {"no_candidate": 1, "refused_by_guard": 1}
    ps.not_applicable_reasons = {}
    assert ps.reason_line() is None and "not_applicable_reasons" not in ps.describe()
