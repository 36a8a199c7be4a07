"""vlbench.testing.check_image_perturbation: the 15 ImageNet-C corruptions pass; a corruption that breaks one clause
fails it, and the error names it and the clause."""

from __future__ import annotations

import numpy as np
import pytest
from support.conformance import fails_clause

from vlbench.imageperturb import NAMES
from vlbench.testing import check_image_perturbation


@pytest.mark.parametrize("name", NAMES)
def test_every_builtin_corruption_passes(name):
    report = check_image_perturbation(name)
    assert report.passed[-1] == "corrupt(): size and mode" and not report.skipped


def darken(x, severity, rng):
    noise = rng.integers(0, 8, x.shape)
    return np.clip(x.astype(int) - 20 * severity - noise, 0, 255).astype(np.uint8)


def test_a_plugin_function_passes_and_is_run_through_corrupt_once_registered(monkeypatch):
    from vlbench.imageperturb import image_perturbations
    from vlbench.registry import Entry

    report = check_image_perturbation(darken)
    assert report.plugin == "darken" and "corrupt(): size and mode" in report.skipped
    monkeypatch.setitem(image_perturbations._entries, "darken", Entry("darken", darken, "", "plugin:test"))
    assert "corrupt(): size and mode" in check_image_perturbation("darken").passed


def _in_place(x, severity, rng):
    x -= np.minimum(x, 10)  # writes into the array vlbench passes (read-only in a run)
    return x


BROKEN = [  # (the clause it breaks, how, the function)
    ("load", "not-a-slug", lambda x, s, rng: x),
    ("output shape and values", "cropped", lambda x, s, rng: darken(x, s, rng)[1:]),
    ("output shape and values", "floats-in-0-1", lambda x, s, rng: darken(x, s, rng) / 255.0),
    ("output shape and values", "nan", lambda x, s, rng: np.full(x.shape, np.nan)),
    ("output shape and values", "severity-5-fails", lambda x, s, rng: darken(x, s, rng) if s < 5 else 1 / 0),
    ("deterministic", "unseeded", lambda x, s, rng: darken(x, s, np.random.default_rng())),
    ("input left unchanged", "in-place", _in_place),
    ("severities change the image", "identity-at-1", lambda x, s, rng: x.copy() if s == 1 else darken(x, s, rng)),
]


@pytest.mark.parametrize("clause, fn", [(c, f) for c, _, f in BROKEN], ids=[how for _, how, _ in BROKEN])
def test_a_broken_corruption_fails_the_clause_it_breaks(clause, fn):
    name = "Not A Name" if clause == "load" else "broken_corruption"
    err = fails_clause(check_image_perturbation, fn, "image perturbation", clause, name=name)
    assert err.plugin == name and name in str(err)
