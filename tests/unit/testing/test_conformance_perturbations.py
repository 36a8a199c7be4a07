"""vlbench.testing.check_perturbation: every built-in perturbation passes (those that tag captions need spaCy, the
synonyms WordNet: slow); a perturbation that breaks one clause fails it, and the error names it and the clause."""

from __future__ import annotations

import random

import pytest
from support.conformance import fails_clause

from vlbench import BasePerturbation
from vlbench import perturbations as P
from vlbench.testing import ConformanceError, check_perturbation

FAST = [n for n, (_, family, _, _) in P.BUILTINS.items() if family in ("typos", "distraction")]
TAGGED = [n for n in P.BUILTINS if n not in FAST]


@pytest.mark.parametrize("name", FAST)
def test_every_builtin_without_tags_passes(name):
    assert check_perturbation(name).passed[-1] == "applies"


@pytest.mark.slow
@pytest.mark.parametrize("name", TAGGED)
def test_every_builtin_that_tags_passes(name, language):
    assert check_perturbation(name).passed[-1] == "applies"


class SwapColour(BasePerturbation):
    name = "swap-colour"
    family = "lexical"
    version = "1"

    def apply(self, text, *, rng, tokens=None):
        words = text.split(" ")
        new = [rng.choice([c for c in ("red", "blue") if c != w]) if w in ("red", "blue") else w for w in words]
        return " ".join(new) if new != words else None


def test_a_good_plugin_passes_as_class_object_and_registered_name(monkeypatch):
    from vlbench import registry

    assert check_perturbation(SwapColour).passed == ["builds", "record", "unknown parameter refused", "edge captions",
                                                     "deterministic", "independent of the other captions", "applies"]
    report = check_perturbation(SwapColour())
    assert "unknown parameter refused" in report.skipped
    registry.perturbations.names()
    monkeypatch.setitem(registry.perturbations._entries, "swap-colour",
                        registry.Entry("swap-colour", SwapColour, "", "plugin:test"))
    assert check_perturbation("swap-colour").plugin == "swap-colour"


def _variant(name, **attrs):
    return type("Broken", (SwapColour,), {"name": name, **attrs})


class _Counter:
    n = 0


def _stateful(self, text, *, rng, tokens=None):  # the output depends on how many captions came before
    _Counter.n += 1
    return f"{text} #{_Counter.n}"


class _TakesAnything(SwapColour):
    def __init__(self, **params):  # ignores a misspelt --param instead of refusing it
        self.params = {}


BROKEN = [  # (the clause it breaks, how, the perturbation)
    ("record", "not-a-slug", _variant("Swap Colour")),
    ("record", "params-not-json", _variant("swap-colour", defaults={"f": object()})),
    ("record", "unknown-resource", _variant("swap-colour", resources=("gpt",))),
    ("unknown parameter refused", "takes-anything", _TakesAnything),
    ("edge captions", "crashes-on-one-word", _variant("swap-colour", apply=lambda s, t, *, rng, tokens=None:
                                                      t.split()[1])),
    ("edge captions", "empty-output", _variant("swap-colour", apply=lambda s, t, *, rng, tokens=None: " ")),
    ("edge captions", "not-a-str", _variant("swap-colour", apply=lambda s, t, *, rng, tokens=None: t.split())),
    ("deterministic", "global-random", _variant("swap-colour", apply=lambda s, t, *, rng, tokens=None:
                                                f"{t} {random.random()}")),
    ("deterministic", "stateful", _variant("swap-colour", apply=_stateful)),
    ("applies", "never", _variant("swap-colour", apply=lambda s, t, *, rng, tokens=None: None)),
]


@pytest.mark.parametrize("clause, target", [(c, t) for c, _, t in BROKEN], ids=[how for _, how, _ in BROKEN])
def test_a_broken_perturbation_fails_the_clause_it_breaks(clause, target):
    fails_clause(check_perturbation, target, "perturbation", clause)


def test_a_perturbation_that_reads_the_caption_before_fails_independence():
    """Repeatable in one order (it passes the determinism clause) but not in another."""
    from vlbench.testing.perturbation import CAPTIONS

    before: list = [None]

    def apply(self, text, *, rng, tokens=None):
        prev, before[0] = before[0], text
        return f"{text} (after {prev})" if prev in CAPTIONS else f"{text}!"

    with pytest.raises(ConformanceError) as err:
        check_perturbation(_variant("swap-colour", apply=apply))
    assert err.value.check == "independent of the other captions"
    assert "reversed" in err.value.found
