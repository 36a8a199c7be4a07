"""The published-numbers check: stand-in runs set to open_clip's ViT-B-32/openai Flickr30k row
pass, 3 points off fail and name the protocol facts they differ in; every shipped row has a source; the CLI's exit
codes; a run with no published row gets a clear message."""

from __future__ import annotations

import csv
import json

import pytest
from support.data import ROOT, SHARED_DATA
from support.published_runs import standin_run

from vlbench.cli import main
from vlbench.published import check_run, published_rows
from vlbench.published.table import normalize_spec, not_shipped, papers_document, rows_for

SPEC = "openclip:ViT-B-32/openai"
SHARED_CSV = SHARED_DATA / "published" / "openclip_retrieval_results.csv"


def _row():
    (row,) = [r for r in rows_for(SPEC, "flickr30k") if r.source["kind"] == "measured table"]
    return row


def test_openclip_row_read_as_published():  # 0.5878 in the CSV = 58.78 %
    row = _row()
    assert row.values[("t2i", 1)] == pytest.approx(58.78) and row.values[("i2t", 1)] == pytest.approx(78.90)
    assert row.values[("t2i", 10)] == pytest.approx(90.02) and len(row.values) == 6
    assert "clip:openai/clip-vit-base-patch32" in row.specs  # the same weights through transformers


def test_matching_run_passes(tmp_path):
    run = standin_run(tmp_path / "ok", spec=SPEC, dataset="flickr30k", recall=_row().values)
    report = check_run(run)
    assert report.status == "pass" and report.passed and report.exit_code() == 0 and report.column() == "pass"
    assert all(m.within for m in report.rows[0].metrics)


def test_three_points_off_fails_and_names_differences(tmp_path):
    off = {k: v - 3.0 for k, v in _row().values.items()}
    run = standin_run(tmp_path / "off", spec=SPEC, dataset="flickr30k", recall=off, i2t_recall="fraction",
                      truncate_chars=60, identity={"adapter": "vlbench.hf.clip", "max_text_tokens": 77})
    report = check_run(run)
    assert report.status == "off" and report.exit_code() == 1 and report.column() == "off 3.0"
    facts = {f.fact: f.status for f in report.rows[0].facts}
    assert facts["recall"] == facts["truncation"] == facts["preprocessing"] == facts["precision"] == "differs"
    assert facts["split"] == facts["gallery"] == "same" and facts["image_set"] == "unknown"
    text = report.format()
    assert "OFF" in text and "published: hit; this run: fraction" in text and "cut to 60 characters" in text


def test_tolerance_edge(tmp_path):
    near = {k: v + 0.9 for k, v in _row().values.items()}
    run = standin_run(tmp_path / "near", spec=SPEC, dataset="flickr30k", recall=near)
    assert check_run(run).passed and not check_run(run, tolerance=0.5).passed


def test_dataset_found_by_caption_hash_and_coco_1k_named(tmp_path):
    (row,) = [r for r in rows_for(SPEC, "coco") if r.source["kind"] == "measured table"]
    renamed = standin_run(tmp_path / "renamed", spec=SPEC, dataset="coco", recall=row.values, dataset_name="my-coco")
    assert check_run(renamed).dataset == "coco" and check_run(renamed).passed  # --dataset-name does not hide it
    folds = standin_run(tmp_path / "folds", spec=SPEC, dataset="coco-1k", recall=row.values, folds=5)
    rep = check_run(folds)
    assert rep.dataset == "coco-1k" and {f.fact: f.status for f in rep.rows[0].facts}["split"] == "differs"


def test_no_row_applies(tmp_path, capsys):
    run = standin_run(tmp_path / "other", spec="openclip:ViT-B-32/random", dataset="flickr30k",
                      recall=_row().values)
    report = check_run(run)
    assert report.status == "none" and not report.applies and "no published row" in report.reason
    assert main(["check", str(run)]) == 2
    assert "no published row applies" in capsys.readouterr().out


def test_cli_exit_codes_and_json(tmp_path, capsys):
    ok = standin_run(tmp_path / "ok", spec=SPEC, dataset="flickr30k", recall=_row().values)
    off = standin_run(tmp_path / "off", spec=SPEC, dataset="flickr30k",
                      recall={k: v - 3.0 for k, v in _row().values.items()})
    assert main(["check", str(ok)]) == 0
    assert main(["check", str(off)]) == 1
    capsys.readouterr()
    assert main(["check", str(off), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "off" and doc["rows"][0]["metrics"][0]["published"] == pytest.approx(58.78)
    assert main(["check", str(tmp_path / "missing")]) == 2
    assert "cannot check" in capsys.readouterr().err


def test_every_shipped_row_has_a_source():
    rows = published_rows()
    assert len(rows) > 200  # 121 open_clip models x 2 datasets (a few without numbers) + the papers' rows
    for r in rows:
        src = r.source
        assert src.get("citation") and src.get("table") and src.get("url", "").startswith("https://"), r.id
        assert src["kind"] in ("measured table", "paper", "model card"), r.id
        assert r.values and all(0.0 <= v <= 100.0 for v in r.values.values()), r.id
        assert r.dataset in ("flickr30k", "coco", "xm3600") and r.protocol.get("recall") == "hit", r.id
    for r in papers_document()["rows"]:
        assert r["source"]["confirmed_by"], r["id"]  # every paper number was confirmed by a second public page
    assert {n["family"] for n in not_shipped()} >= {"groupvit", "altclip"}  # said, not invented


def test_shipped_csv_equals_the_source_copy():
    if not SHARED_CSV.exists():
        pytest.skip(f"no copy of open_clip's table at {SHARED_CSV}")
    shipped = ROOT / "vlbench" / "published" / "data" / "openclip_retrieval_results.csv"
    assert shipped.read_bytes() == SHARED_CSV.read_bytes()
    n = sum(1 for _ in csv.DictReader(SHARED_CSV.read_text().splitlines()))
    assert n == 121


def test_spec_normalization():
    assert normalize_spec("clip") == "clip:openai/clip-vit-base-patch32"
    assert normalize_spec("siglip2:google/siglip2-base-patch16-224?lowercase=0") == \
        "siglip2:google/siglip2-base-patch16-224"
    assert [r.id for r in rows_for("siglip2", "coco")] == ["siglip2-paper-b16-224-coco"]


def _custom_data(doc):  # what a custom manifest's run records: no built-in caption file behind it
    doc["dataset"]["source"] = {"manifest": "mine.jsonl", "manifest_sha256": "e" * 64}
    doc["dataset"]["n_images"] = doc["dataset"]["gallery_size"] = 16


def test_a_custom_set_named_flickr30k_has_no_published_numbers(tmp_path, capsys):
    from support.published_runs import edit_run

    run = edit_run(standin_run(tmp_path / "mine", spec=SPEC, dataset="flickr30k", recall=_row().values),
                   _custom_data)
    report = check_run(run)
    assert report.dataset == "flickr30k" and report.status == "none" and not report.rows
    assert ("no published numbers for this data (its captions are not the built-in Flickr30k test split"
            in report.reason)
    assert main(["check", str(run)]) == 2
    out = capsys.readouterr().out
    assert "no published numbers for this data" in out and "[same" not in out


def test_typed_in_values_without_results_hash_do_not_pass(tmp_path, capsys):
    from support.published_runs import edit_run

    def typed_in(doc):  # the published numbers typed in, the hashes removed
        doc.pop("results_hash")
        doc.pop("record_hash")

    run = edit_run(standin_run(tmp_path / "typed", spec=SPEC, dataset="flickr30k", recall=_row().values),
                   typed_in, reseal=False)
    report = check_run(run)
    assert report.status == "unverified" and not report.passed and report.column() == "unverified"
    assert report.exit_code() == 1 and main(["check", str(run)]) == 1
    assert "no results_hash" in capsys.readouterr().out


def test_a_run_without_record_hash_is_checked_with_a_note(tmp_path, capsys):
    from support.published_runs import edit_run

    run = edit_run(standin_run(tmp_path / "old", spec=SPEC, dataset="flickr30k", recall=_row().values),
                   lambda d: d.pop("record_hash"), reseal=False)
    report = check_run(run)
    assert report.status == "pass" and any("no record_hash" in n for n in report.notes)
    assert main(["check", str(run)]) == 0 and "note: the run file has no record_hash" in capsys.readouterr().out
    import dataclasses

    from vlbench.results import RunRecord

    computed = dataclasses.replace(RunRecord.load(run), read_schema=None)  # as `vlbench run` checks its own record
    assert check_run(computed).notes == []


def test_an_edited_dataset_name_or_model_spec_is_refused(tmp_path, capsys):
    from support.published_runs import edit_run

    for name, edit in (("ds", lambda d: d["dataset"].update(name="coco")),
                       ("model", lambda d: d["model"].update(spec="openclip:ViT-L-14/openai"))):
        run = edit_run(standin_run(tmp_path / name, spec=SPEC, dataset="flickr30k", recall=_row().values), edit,
                       reseal=False)
        assert main(["check", str(run)]) == 2
        assert "record_hash does not match the record" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["nan", "inf", "-1", "-inf", "ten"])
def test_tolerance_that_is_not_a_finite_non_negative_number_is_an_option_error(tmp_path, capsys, bad):
    from vlbench.errors import OptionError

    run = standin_run(tmp_path / "ok", spec=SPEC, dataset="flickr30k", recall=_row().values)
    assert main(["check", str(run), f"--tolerance={bad}"]) == 2
    assert "--tolerance must be a finite number" in capsys.readouterr().err
    with pytest.raises(OptionError) as err:
        check_run(run, tolerance=float(bad) if bad != "ten" else bad)
    assert err.value.option == "tolerance"


HF_SPEC = "clip:openai/clip-vit-base-patch32"


def _hf_identity(**extra):
    return {"adapter": "vlbench.hf.clip", "checkpoint": "openai/clip-vit-base-patch32", "max_text_tokens": 77,
            "precision": "fp32", **extra}


def test_local_weights_that_shadow_the_hub_id_do_not_pass_as_the_published_checkpoint(tmp_path):
    """Issue 44: a folder ./openai/clip-vit-base-patch32 in the working directory was loaded for
    clip:openai/clip-vit-base-patch32 and `vlbench check` compared it with the published row of OpenAI's weights.
    The weights are a protocol fact: a local folder (by content hash) differs and does not pass, even when every
    number is within the tolerance; the Hub's repository at a recorded commit is the same and passes."""
    values = _row().values
    local = {"local_path": str(tmp_path / "openai" / "clip-vit-base-patch32"), "content_sha256": "ab" * 32}
    run = standin_run(tmp_path / "local", spec=HF_SPEC, dataset="flickr30k", recall=values,
                      identity=_hf_identity(local=local, revision=None))
    report = check_run(run)
    (rc,) = [r for r in report.rows if r.row.id == _row().id]
    weights = next(f for f in rc.facts if f.fact == "weights")
    assert rc.numbers_within and weights.status == "differs" and not rc.passed
    assert "local folder" in weights.run and "ab" * 8 in weights.run and "not the Hub's" in weights.run
    assert report.status == "off" and report.exit_code() == 1 and report.column() == "other weights"
    assert "NOT THE PUBLISHED WEIGHTS" in report.format()

    hub = standin_run(tmp_path / "hub", spec=HF_SPEC, dataset="flickr30k", recall=values,
                      identity=_hf_identity(local=None, revision="e6a30b603a447e251fdaca1c3056b2a16cdfebeb"))
    report = check_run(hub)
    weights = next(f for f in report.rows[0].facts if f.fact == "weights")
    assert weights.status == "same" and "at commit e6a30b603a44" in weights.run
    assert report.status == "pass" and report.column() == "pass"


def test_weights_words_name_the_source():
    from vlbench.models.identity import shadows_hub_id, weights_source

    assert weights_source({"adapter": "vlbench.openclip", "checkpoint": "ViT-B-32/openai"})[0] == "library"
    assert weights_source({"checkpoint": "x", "random_weights": True})[0] == "random"
    assert weights_source({"adapter": "vlbench.plugin"})[0] == "unknown"
    assert shadows_hub_id("clip:openai/clip-vit-base-patch32", "openai/clip-vit-base-patch32")
    assert not shadows_hub_id("clip:./openai/clip-vit-base-patch32", "./openai/clip-vit-base-patch32")
    assert not shadows_hub_id("clip:/models/clip", "/models/clip")
