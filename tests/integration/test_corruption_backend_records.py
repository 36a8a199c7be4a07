"""docs/image_perturbations.md ("Same pixels, same numbers?") says how far --corrupt-backend torch moves a run's
numbers for the deterministic corruptions: the exact three (contrast, pixelate, jpeg_compression) move no record,
and its table gives the measured count of records that differ and both RSUMs. Checked here against a fresh
measurement with the script's own function (tests/support/corruption_agreement.py: record_changes), for the
default geometry (--corrupt-at input); the doc once claimed the same numbers for all six."""

from __future__ import annotations

import re

import pytest
from support.corruption_agreement import DETERMINISTIC, record_changes
from support.data import ROOT

pytestmark = pytest.mark.slow

EXACT = ("contrast", "pixelate", "jpeg_compression")


def _doc_rows() -> dict[str, tuple[int, int, float, float]]:
    text = (ROOT / "docs" / "image_perturbations.md").read_text(encoding="utf-8")
    section = text[text.index("**Same pixels, same numbers?**"):]
    rows = {}
    for name in DETERMINISTIC:
        m = re.search(rf"^\| {name} \| (\d+) of (\d+) \| ([\d.]+) / ([\d.]+) \|", section, re.M)
        assert m, f"no row for {name} in the doc's table"
        rows[name] = (int(m.group(1)), int(m.group(2)), float(m.group(3)), float(m.group(4)))
    return rows


def test_the_docs_backend_agreement_table_is_what_a_fresh_measurement_gives(tmp_path):
    doc = _doc_rows()
    measured = record_changes(tmp_path, n_images=24, severity=3, corrupt_at="input")
    for name in EXACT:
        assert measured[name]["differ"] == 0, (name, measured[name])  # exact pixels, exact numbers
    for name in DETERMINISTIC:
        r = measured[name]
        got = (r["differ"], r["records"], round(r["rsum_reference"], 2), round(r["rsum_torch"], 2))
        assert got == doc[name], f"{name}: measured {got}, the doc says {doc[name]} (re-run the script, fix the doc)"
