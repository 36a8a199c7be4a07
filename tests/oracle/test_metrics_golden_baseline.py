"""A regression baseline, not an oracle: metric values are bit-for-bit those of the code before the metrics
registry (commit 9c666a6). The fixture is that code's own output, so this file proves that later code did not move a
bit, not that the values are right; the oracles that check the definitions are test_metrics_numpy_oracle.py (NumPy,
from embeddings), test_metrics_random_oracles.py and test_metrics_hand_worked.py.

tests/fixtures/metrics_baseline.json was written by tests/fixtures/make_metrics_baseline.py with that
code: random cases with ties, distractors, extra positives, separate relevance, graded labels and
tiny blocks. Exact equality (not a tolerance): a refactor must not move a single bit. One exception, which
is the machine's and not the code's: NumPy's vectorised log2 (the DCG discount) differs from the C library's
by one unit in the last place on some inputs on CPUs with AVX-512 (13 of 100,000 integers on the AMD EPYC of
the CI machine; none where the fixture was written), so a per-query value that differs must lie within 2 units
in the last place, and a DCG record (a mean of such values, which can cancel to near 0) within 1e-12; every
other value and record is compared exactly.
"""

import json
import sys

import numpy as np
import pytest
from support.data import FIXTURES as FIX

sys.path.insert(0, str(FIX))

from make_metrics_baseline import case_result  # noqa: E402

from vlbench.metrics import compute as M  # noqa: E402

BASE = json.loads((FIX / "metrics_baseline.json").read_text())


def test_metric_version_unchanged():
    assert M.METRIC_VERSION == BASE["metric_version"]


def _discounted(record: dict) -> bool:
    """A DCG-family record: its per-query values went through the vectorised log2 (see above)."""
    return "dcg" in record["metric"] and isinstance(record["value"], float)


def _exact(record: dict) -> dict:
    """A record with a DCG value left out (compared within 1e-12 instead)."""
    return {k: v for k, v in record.items() if not (k == "value" and _discounted(record))}


@pytest.mark.parametrize("name", sorted(BASE["cases"]))
def test_bit_for_bit(name):
    want = BASE["cases"][name]
    got = json.loads(json.dumps(case_result(want["config"], want["seed"], want["block_bytes"], want["graded"])))
    builtin = {r["metric"] for r in want["records"]}  # an installed metric plug-in adds records of its own
    got["records"] = [r for r in got["records"] if r["metric"] in builtin]
    for d in M.DIRECTIONS:
        got["per_query"][d] = {c: v for c, v in got["per_query"][d].items() if c in want["per_query"][d]}
    assert [_exact(r) for r in got["records"]] == [_exact(r) for r in want["records"]], name
    for g, w in zip(got["records"], want["records"]):
        assert abs(g["value"] - w["value"]) <= 1e-12 if _discounted(g) else g["value"] == w["value"], (name, g)
    for d in M.DIRECTIONS:
        assert list(got["per_query"][d]) == list(want["per_query"][d]), (name, d)
        for col, vals in want["per_query"][d].items():
            g, w = np.asarray(got["per_query"][d][col], dtype=float), np.asarray(vals, dtype=float)
            assert g.shape == w.shape, (name, d, col)
            moved = ~((g == w) | (np.isnan(g) & np.isnan(w)))
            np.testing.assert_array_max_ulp(g[moved], w[moved], maxulp=2)  # the SIMD log2 only (see above)
