"""Metric values are bit-for-bit those of the code before the metrics registry (commit 9c666a6).

tests/fixtures/metrics_baseline.json was written by tests/fixtures/make_metrics_baseline.py with that
code: random cases with ties, distractors, extra positives, separate relevance, graded labels and
tiny blocks. Exact equality (not a tolerance): a refactor must not move a single bit.
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


@pytest.mark.parametrize("name", sorted(BASE["cases"]))
def test_bit_for_bit(name):
    want = BASE["cases"][name]
    got = json.loads(json.dumps(case_result(want["config"], want["seed"], want["block_bytes"], want["graded"])))
    builtin = {r["metric"] for r in want["records"]}  # an installed metric plug-in adds records of its own
    got["records"] = [r for r in got["records"] if r["metric"] in builtin]
    for d in M.DIRECTIONS:
        got["per_query"][d] = {c: v for c, v in got["per_query"][d].items() if c in want["per_query"][d]}
    assert got["records"] == want["records"], name
    for d in M.DIRECTIONS:
        assert list(got["per_query"][d]) == list(want["per_query"][d]), (name, d)
        for col, vals in want["per_query"][d].items():
            np.testing.assert_array_equal(np.asarray(got["per_query"][d][col]), np.asarray(vals), err_msg=f"{name} {d} {col}")
