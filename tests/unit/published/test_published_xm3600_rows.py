"""A multilingual set's published row: Meta CLIP 2's XM3600 image-to-text R@1 (the mean over the release's 36
languages, every caption a query) is compared with a run of the full ``xm3600`` selection only, matched by what the
set's loader recorded (vlbench/published/multilingual.py); another selection is told why no row applies."""

from __future__ import annotations

import pytest
from support.published_runs import edit_run, standin_run

from vlbench.published import check_run

RECALL_KEYS = [(d, k) for d in ("i2t", "t2i") for k in (1, 5, 10)]

METACLIP2 = "metaclip2:facebook/metaclip-2-worldwide-huge-quickgelu"


def _xm3600_run(tmp_path, name, i2t_r1, **source_edits):
    """A stand-in run of the full xm3600 selection (every language, every caption, 3,600 images) whose clean
    values are i2t R@1 = ``i2t_r1``; ``source_edits`` change what the set's loader recorded."""
    from vlbench.datasets.langsets import SETS

    langs = list(SETS["xm3600"].languages)
    recall = {key: 50.0 for key in RECALL_KEYS} | {("i2t", 1): i2t_r1}
    folder = standin_run(tmp_path / name, spec=METACLIP2, dataset="flickr30k", recall=recall,
                         identity={"adapter": "vlbench.hf.metaclip2", "checkpoint": METACLIP2.split(":", 1)[1],
                                   "revision": "d" * 40, "max_text_tokens": 77})
    source = {"caption_file": "data/xm3600/captions.jsonl", "caption_sha256": "e" * 64, "pin": "pinned on first use",
              "captions": "all", "spec": "xm3600?languages=" + ",".join(langs), "languages": langs,
              "language": "mul", "folds_are": "languages", "distinct_images": 3600} | source_edits

    def edit(doc):
        doc["dataset"].update({"name": "xm3600", "n_images": 3600 * 36, "gallery_size": 3600 * 36, "folds": 36,
                               "source": {k: v for k, v in source.items() if v is not None}})

    return edit_run(folder, edit)


def test_a_full_xm3600_run_of_metaclip2_is_checked_against_the_papers_mean(tmp_path):
    report = check_run(_xm3600_run(tmp_path, "xm-ok", 64.3))
    assert [r.row.id for r in report.rows] == ["metaclip2-paper-h14-worldwide-xm3600"] and report.passed
    (metric,) = report.rows[0].metrics
    assert (metric.direction, metric.k, metric.published, metric.measured) == ("i2t", 1, 64.3, 64.3)
    facts = {f.fact: f.status for f in report.rows[0].facts}
    assert facts["split"] == facts["truncation"] == facts["recall"] == "same"
    off = check_run(_xm3600_run(tmp_path, "xm-off", 60.0))
    assert off.status == "off" and off.column() == "off 4.3"


@pytest.mark.parametrize("edits, why", [
    ({"languages": ["de", "fr", "ja"], "spec": "xm3600?languages=de,fr,ja"}, "this run selected 3 (de, fr, ja)"),
    ({"captions": "first"}, "this run took the first caption only"),
    ({"distinct_images": 12, "note": "xm3600: 12 images, not the released 3,600"}, "this run read 12 images"),
])
def test_another_xm3600_selection_is_told_why_no_row_applies(tmp_path, edits, why):
    report = check_run(_xm3600_run(tmp_path, "xm-sub", 64.3, **edits))
    assert report.status == "none" and not report.rows and why in report.reason


def test_a_tiny_xm3600_run_of_the_tiny_metaclip2_runs_and_is_not_compared(tiny_models, tmp_path):
    """The real path: a MetaCLIP 2 run on an XM3600-shaped release of 5 images and 3 languages (multilingual
    captions through its tokenizer) runs, and its check names the selection instead of comparing."""
    from support.language_sets import write_xm3600

    from vlbench.pipeline.runner import run

    write_xm3600(tmp_path / "data")
    res = run(model=f"metaclip2:{tiny_models('metaclip2')}", dataset="xm3600", data_dir=str(tmp_path / "data"),
              out=str(tmp_path / "run"), quiet=True, num_workers=0, n_boot=10)
    report = check_run(res.out_dir)
    assert report.status == "none" and "this run selected 3 (de, fr, ja)" in report.reason
