"""The random torch corruptions under their own draws (torch.Generator) match the reference's statistics as the
table of docs/image_perturbations.md states (tests/support/corruption_agreement.py: the statistic, the photographs,
the tolerance): per corruption, severities 1-5, four 224 px photographs x 8 seeds per backend."""

from __future__ import annotations

import pytest
from support.corruption_agreement import STATISTIC, STATS_TOLERANCE, photos, statistics

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def images():
    return photos()


@pytest.mark.parametrize("name", sorted(STATISTIC))
def test_statistics_match_the_reference(name, images):
    for severity in (1, 2, 3, 4, 5):
        got = statistics(name, severity, images, seeds=8)
        assert got["rel"] <= STATS_TOLERANCE[name], (name, severity, got)


def test_the_statistics_tell_severities_apart(images):
    """The statistic is not blind: it moves with severity as the corruption gets stronger (both backends)."""
    lo, hi = (statistics("gaussian_noise", s, images[:1], seeds=2) for s in (1, 5))
    assert hi["reference"] > 2 * lo["reference"] and hi["torch"] > 2 * lo["torch"]
    lo, hi = (statistics("motion_blur", s, images[:1], seeds=2) for s in (1, 5))
    assert hi["reference"] < lo["reference"] and hi["torch"] < lo["torch"]  # sharper -> blurrier
