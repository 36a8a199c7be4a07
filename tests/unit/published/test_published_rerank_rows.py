"""Two-stage published rows (a first stage ranks the gallery, a pair scorer re-scores each query's top K): a run is
compared with such a row only when its settings name the same pair scorer (``rerank``, default checkpoint filled
in) and the same K (``rerank_k``) and its model is the row's first stage; a reranked run is never compared with a
single-stage row, nor a one-stage run with a two-stage row. Checked on stand-in results.json files (real ones come
from ``vlbench run --rerank``) and on the shipped rows."""

from __future__ import annotations

import dataclasses

import pytest
from support.published_runs import edit_run, standin_run

from vlbench.published import check_run, published_rows
from vlbench.published import table as T
from vlbench.util.io import sha256_json

BLIP = "blip:Salesforce/blip-itm-base-coco"
#: a synthetic two-stage row (values are not BLIP's: the matching rule is what is tested here)
VALUES = {("i2t", 1): 70.0, ("i2t", 5): 90.0, ("i2t", 10): 95.0, ("t2i", 1): 50.0, ("t2i", 5): 80.0,
          ("t2i", 10): 88.0}


@pytest.fixture
def two_stage_row(monkeypatch):
    row = T.PublishedRow("test-blip-rerank-coco", "BLIP (test row)", (BLIP,), "coco", dict(VALUES),
                         {"kind": "paper", "citation": "a test", "table": "none", "url": "https://example.org"},
                         {"recall": "hit", "gallery": "test images only", "split": "coco 5k test (Karpathy)"},
                         rerank={"model": "blip-itm", "k": 256, "first_stage": "BLIP ITC"})
    monkeypatch.setattr(T, "published_rows", lambda: published_rows() + (row,))
    return row


def _run(tmp_path, name, *, spec=BLIP, rerank=None, rerank_k=None, recall=VALUES):
    folder = standin_run(tmp_path / name, spec=spec, dataset="coco", recall=recall,
                         identity={"adapter": "vlbench.hf.blip", "checkpoint": spec.split(":", 1)[1],
                                   "revision": "c" * 40, "max_text_tokens": 512})

    def edit(doc):
        if rerank is not None:  # where `vlbench run --rerank` records them
            doc["settings"].setdefault("options", {})["rerank"] = rerank
        if rerank_k is not None:
            doc["settings"].setdefault("options", {})["rerank_k"] = rerank_k
        if rerank is not None:  # the final ranking's numbers are in the rerank section, the first stage's 20 lower
            final = [dict(v) for v in doc["results"] if v["condition"] == "clean" and v["metric"] == "recall"]
            for v in doc["results"]:
                if v["condition"] == "clean" and v["metric"] == "recall":
                    v["value"] -= 20.0
            doc["rerank"] = {"pair_scorer": {"spec": rerank}, "k": rerank_k, "results": final}
            doc["results_hash"] = sha256_json(doc["results"])

    return edit_run(folder, edit)


@pytest.mark.parametrize("rerank", ["blip-itm", "blip-itm:Salesforce/blip-itm-base-coco"])
def test_a_run_reranked_by_the_rows_pair_scorer_and_k_is_compared_with_it(two_stage_row, tmp_path, rerank):
    report = check_run(_run(tmp_path, "same", rerank=rerank, rerank_k=256))
    assert [r.row.id for r in report.rows] == [two_stage_row.id]
    assert all(m.within for m in report.rows[0].metrics) and len(report.rows[0].metrics) == 6
    assert "stages: first stage BLIP ITC, reranked by blip-itm over the top 256" in report.format()


def test_three_points_off_a_two_stage_row_is_off(two_stage_row, tmp_path):
    off = {key: value - 3.0 for key, value in VALUES.items()}
    report = check_run(_run(tmp_path, "off", rerank="blip-itm", rerank_k=256, recall=off))
    assert [r.row.id for r in report.rows] == [two_stage_row.id] and report.status == "off"
    assert not report.rows[0].numbers_within and report.column().startswith("off")


@pytest.mark.parametrize("rerank, k, why", [
    ("blip-itm", 128, "reranked by blip-itm:Salesforce/blip-itm-base-coco over the top 128"),  # another K
    ("blip-itm:./my-blip", 256, "reranked by blip-itm:./my-blip over the top 256"),  # another pair scorer
    ("blip2-itm", 256, "reranked by blip2-itm:Salesforce/blip2-itm-vit-g over the top 256"),
    (None, None, "(one stage)"),  # the first stage alone
])
def test_other_stages_are_never_compared_with_a_two_stage_row(two_stage_row, tmp_path, rerank, k, why):
    report = check_run(_run(tmp_path, f"other-{k}", rerank=rerank, rerank_k=k))
    assert report.status == "none" and report.exit_code() == 2 and not report.rows
    assert why in report.reason and "test-blip-rerank-coco: reranked by blip-itm" in report.reason


def test_another_first_stage_reranked_the_same_way_is_not_compared(two_stage_row, tmp_path):
    report = check_run(_run(tmp_path, "clip-first", spec="clip:openai/clip-vit-base-patch32", rerank="blip-itm",
                            rerank_k=256))
    assert report.status == "none" and two_stage_row.id not in report.reason


def test_a_reranked_run_is_not_compared_with_the_models_single_stage_rows(tmp_path):
    """The CLIP paper's COCO row was measured in one stage: a run of the same weights reranked by BLIP ITM is
    another protocol, refused with the reason (the row's stages and the run's)."""
    spec = "clip:openai/clip-vit-large-patch14-336"
    (row,) = [r for r in T.rows_for(spec, "coco") if r.id == "clip-paper-vit-l14-336-coco"]
    report = check_run(_run(tmp_path, "clip-reranked", spec=spec, rerank="blip-itm", rerank_k=16,
                            recall={key: row.values.get(key, 50.0) for key in VALUES}))
    assert report.status == "none" and "clip-paper-vit-l14-336-coco: one stage" in report.reason
    assert "reranked by blip-itm:Salesforce/blip-itm-base-coco over the top 16" in report.reason
    plain = check_run(_run(tmp_path, "clip-plain", spec=spec, recall={key: row.values.get(key, 50.0)
                                                                       for key in VALUES}))
    assert "clip-paper-vit-l14-336-coco" in [r.row.id for r in plain.rows]


def test_the_shipped_blip2_row_states_its_protocol_and_applies_to_no_spec():
    (row,) = [r for r in published_rows() if r.id == "blip2-paper-vitg-coco-itm-rerank"]
    assert row.rerank["k"] == 128 and "Q-Former ITC" in row.rerank["first_stage"]
    assert row.values[("i2t", 1)] == 85.4 and row.values[("t2i", 1)] == 68.3 and len(row.values) == 6
    assert row.specs == () and "364" in row.protocol["preprocessing"] and row.source["confirmed_by"]
    assert row not in T.rows_for("blip2-itm", "coco", "blip2-itm", 128)
    single = [r for r in published_rows() if not r.rerank]
    assert single and all(dataclasses.asdict(r)["rerank"] == {} for r in single)


def test_same_stages_reads_k_as_a_number_and_needs_it():
    row = T.PublishedRow("r", "m", (BLIP,), "coco", {}, {}, rerank={"model": "blip-itm", "k": 256})
    assert T.same_stages(row, "blip-itm", 256) and not T.same_stages(row, "blip-itm", None)
    assert not T.same_stages(row, None, None) and not T.same_stages(row, "blip-itm", 255)
    plain = dataclasses.replace(row, rerank={})
    assert T.same_stages(plain, None, None) and not T.same_stages(plain, "blip-itm", 256)

