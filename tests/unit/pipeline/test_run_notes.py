"""What a run says about numbers that are what they are by construction: a Recall@k cut-off at or above the number
of candidates (``--limit 5`` gave R@10 = 100 with 5 candidates and no word), and a caption budget that cut no caption
(it showed "+0.00 [+0.00, +0.00]" with no n_cut)."""

from __future__ import annotations

from support.data import write_manifest

from vlbench.datasets.core import limited, load_dataset
from vlbench.granularity.budgets import budget_rows, uncut_note
from vlbench.pipeline.record import cutoff_warnings


def test_recall_cutoff_at_or_above_the_candidate_count_is_warned(tmp_path):
    ds = load_dataset(f"custom:{write_manifest(tmp_path / 'd', 8)}")
    five = limited(ds, 5)  # 5 images, 25 captions
    found = cutoff_warnings((1, 5, 10), five)
    assert len(found) == 1 and found[0].startswith("t2i R@5, R@10 with 5 candidates (images) are 100 by construction")
    assert "--limit" in found[0]
    assert cutoff_warnings((1, 4), five) == []  # below the count: not trivial
    assert cutoff_warnings((25,), five)[1].startswith("i2t R@25 with 25 candidates (captions) is 100")
    full = cutoff_warnings((10,), ds)  # no --limit: the test set is what to grow
    assert len(full) == 1 and "8 candidates" in full[0] and "larger test set" in full[0]


def test_budget_that_cuts_no_caption_is_said_with_its_n_cut():
    conditions = {"clean": {"kind": "clean"},
                  "budget:4": {"kind": "budget", "unit": "tokens", "budget": 4, "n_cut": 30, "n_captions": 40,
                               "n_cut_by_context": 0},
                  "budget:77": {"kind": "budget", "unit": "tokens", "budget": 77, "n_cut": 0, "n_captions": 40,
                                "n_cut_by_context": 0},
                  "sentences:9": {"kind": "budget", "unit": "sentences", "budget": 9, "n_cut": 0, "n_captions": 40}}
    rows = budget_rows(conditions)
    assert rows == [["budget:4", "30 of 40", "0", ""],
                    ["budget:77", "0 of 40", "0", "cut no caption: same numbers as clean"],
                    ["sentences:9", "0 of 40", "", "cut no caption: same numbers as clean"]]
    assert uncut_note("budget:77", conditions["budget:77"]).startswith(
        "budget:77 cut no caption (n_cut 0 of 40: every caption is within 77 tokens)")
