"""The published choice-task scores and `vlbench check` on task runs: stand-in task runs set to a shipped entry's
scores pass, 3 points off fail and name the entry's protocol facts; an unknown task or model has none published;
a caption file that is not a version the scores apply to is not compared; every shipped score is a whole number
of its set's items (recomputed here from the item counts, not read from vlbench)."""

from __future__ import annotations

import json
import math

import pytest
from support.published_task_runs import task_run

from vlbench.cli import main
from vlbench.published import check_run, task_entries
from vlbench.published.task_scores import TASK_FACTS, entries_for, task_document

SPEC = "openclip:ViT-B-32/openai"


def _entry(task):
    (entry,) = entries_for(SPEC, task)
    return entry


def _scores(entry, shift=0.0):
    return {c: {m: v + shift for m, v in w["scores"].items()} for c, w in entry.sets.items()}


def _files(entry, pick=0):
    """The item files a run of every set read: the entry's listed sha256 (``pick``-th), or a made-up one."""
    files = {c.split(":")[-1]: (w["sha256"][min(pick, len(w["sha256"]) - 1)] if w["sha256"] else "f" * 64)
             for c, w in entry.sets.items()}
    return files["winoground"] if entry.task == "winoground" else files


def _n(entry):
    return {c: w["n_items"] for c, w in entry.sets.items() if w["n_items"]}


def test_shipped_task_scores_read_as_published():
    sc, wg, ws = _entry("sugarcrepe"), _entry("winoground"), _entry("whatsup")
    assert {c.split(":")[-1]: w["scores"]["accuracy"] for c, w in sc.sets.items()} == {
        "replace_obj": 90.92, "replace_att": 80.08, "replace_rel": 69.20, "swap_obj": 61.38, "swap_att": 63.96,
        "add_obj": 77.21, "add_att": 68.79}
    assert wg.sets["task:winoground"]["scores"] == {"text_score": 30.75, "image_score": 10.50, "accuracy": 8.00}
    assert ws.sets["task:whatsup:controlled_a"]["scores"] == {"accuracy": 30.3, "pair_accuracy": 0.5,
                                                              "set_accuracy": 0.0}
    assert ws.sets["task:whatsup:controlled_b"]["scores"]["accuracy"] == 31.6
    assert [ws.sets[f"task:whatsup:{s}"]["scores"]["accuracy"] for s in
            ("coco_qa_one", "coco_qa_two", "vg_qa_one", "vg_qa_two")] == [43.7, 51.1, 46.5, 47.4]
    # the same weights through transformers and sentence-transformers match too
    assert entries_for("clip:openai/clip-vit-base-patch32", "winoground") == [wg] == entries_for("clip", "winoground")


@pytest.mark.parametrize("task", ["sugarcrepe", "winoground", "whatsup"])
def test_task_run_set_to_a_shipped_entry_passes(tmp_path, task):
    entry = _entry(task)
    run = task_run(tmp_path / task, task=task, spec=SPEC, scores=_scores(entry), files=_files(entry), n_items=_n(entry))
    report = check_run(run)
    assert report.status == "pass" and report.exit_code() == 0 and report.column() == "pass", report.format()
    assert report.dataset == task and all(m.within for m in report.rows[0].metrics)
    assert len(report.rows[0].metrics) == sum(len(w["scores"]) for w in entry.sets.values())


def test_three_points_off_fails_and_names_the_protocol_facts(tmp_path):
    entry = _entry("sugarcrepe")
    run = task_run(tmp_path / "off", task="sugarcrepe", spec="clip:openai/clip-vit-base-patch32",
                   scores=_scores(entry, -3.0), files=_files(entry, pick=1), adapter="vlbench.hf.clip",
                   precision="fp16", n_items={"task:sugarcrepe:swap_obj": 245})
    report = check_run(run)
    assert report.status == "off" and report.exit_code() == 1 and report.column() == "off 3.0"
    facts = {f.fact: f.status for f in report.rows[0].facts}
    assert list(facts) == list(TASK_FACTS)
    assert facts["implementation"] == facts["preprocessing"] == facts["precision"] == "differs"
    assert facts["set_version"] == "differs"  # swap_obj: the pinned 245-item file, not the measured 246-item one
    assert facts["lowercase"] == facts["prompt"] == facts["tie_rule"] == "same"
    text = report.format()
    for said in ("OFF", "DIFFERS", "open_clip create_model_and_transforms('ViT-B-32', pretrained='openai')",
                 "fp32 (main_eval.py runs the fp32 model without autocast); this run: fp16",
                 "resize the shorter side to 224 (bicubic), center crop 224", "swap_obj: 245 items"):
        assert said in text, said


def test_whatsup_off_names_the_tie_rule_and_the_authors_precision(tmp_path):
    entry = _entry("whatsup")
    run = task_run(tmp_path / "ws", task="whatsup", spec=SPEC, scores=_scores(entry, +3.0), files=_files(entry),
                   n_items=_n(entry))
    report = check_run(run)
    facts = {f.fact: f for f in report.rows[0].facts}
    assert report.status == "off" and facts["tie_rule"].status == "differs" and facts["precision"].status == "differs"
    assert facts["set_version"].status == "unknown"  # no checksum of the authors' files is published
    fewer = task_run(tmp_path / "few", task="whatsup", spec=SPEC, scores=_scores(entry, +3.0), files=_files(entry),
                     n_items={"task:whatsup:controlled_a": 12})
    assert {f.fact: f.status for f in check_run(fewer).rows[0].facts}["set_version"] == "differs"  # 12, not 412
    assert "a tie with the first (right) option counts as a hit" in report.format()


def test_tolerance_is_one_point_by_default_and_settable(tmp_path):
    entry = _entry("winoground")
    run = task_run(tmp_path / "near", task="winoground", spec=SPEC, scores=_scores(entry, 0.75), files=_files(entry))
    assert check_run(run).passed and not check_run(run, tolerance=0.5).passed
    far = task_run(tmp_path / "far", task="winoground", spec=SPEC, scores=_scores(entry, 1.25), files=_files(entry))
    assert not check_run(far).passed and check_run(far, tolerance=1.5).passed


def test_only_the_sets_a_run_scored_are_compared(tmp_path):
    entry = _entry("sugarcrepe")
    one = {"task:sugarcrepe:swap_att": _scores(entry)["task:sugarcrepe:swap_att"]}
    report = check_run(task_run(tmp_path / "one", task="sugarcrepe", spec=SPEC, scores=one, files=_files(entry)))
    compared = [m for m in report.rows[0].metrics if m.within is not None]
    assert report.status == "pass" and [m.condition for m in compared] == ["task:sugarcrepe:swap_att"]
    assert "not in this run" in report.format()


def test_a_file_that_is_not_a_version_the_scores_apply_to_is_not_compared(tmp_path, capsys):
    entry = _entry("sugarcrepe")
    files = dict(_files(entry), add_att="0" * 64)
    report = check_run(task_run(tmp_path / "mine", task="sugarcrepe", spec=SPEC, scores=_scores(entry),
                                files=files))
    (row,) = report.rows
    assert report.status == "pass" and [c for c, _ in row.skipped] == ["task:sugarcrepe:add_att"]
    assert not any(m.within is not None for m in row.metrics if m.condition == "task:sugarcrepe:add_att")
    custom = {"task:sugarcrepe:add_att": _scores(entry)["task:sugarcrepe:add_att"]}
    run = task_run(tmp_path / "custom", task="sugarcrepe", spec=SPEC, scores=custom, files={"add_att": "0" * 64})
    report = check_run(run)
    assert report.status == "none" and "not a version these scores apply to" in report.reason
    assert main(["check", str(run)]) == 2 and "no published row applies" in capsys.readouterr().out


@pytest.mark.parametrize(("task", "spec"), [("winoground", "openclip:ViT-L-14/openai"), ("order", SPEC),
                                            ("sugarcrepe++", "clip")])
def test_unknown_task_or_model_says_none_published(tmp_path, capsys, task, spec):
    run = task_run(tmp_path / "x", task=task, spec=spec, scores={f"task:{task}": {"accuracy": 50.0}}, files="e" * 64)
    report = check_run(run)
    assert report.status == "none" and not report.applies and report.column() == ""
    assert f"no published scores for model {spec!r} on task {task!r}" in report.reason
    assert main(["check", str(run)]) == 2
    assert "no published row applies" in capsys.readouterr().out


def test_cli_exit_codes_and_json_on_task_runs(tmp_path, capsys):
    entry = _entry("winoground")
    ok = task_run(tmp_path / "ok", task="winoground", spec=SPEC, scores=_scores(entry), files=_files(entry))
    off = task_run(tmp_path / "off", task="winoground", spec=SPEC, scores=_scores(entry, -3.0), files=_files(entry))
    assert main(["check", str(ok)]) == 0 and main(["check", str(off)]) == 1
    capsys.readouterr()
    assert main(["check", str(off), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "off" and doc["dataset"] == "winoground"
    got = {m["metric"]: (m["published"], m["measured"]) for m in doc["rows"][0]["metrics"]}
    assert got == {"text_score": (30.75, 27.75), "image_score": (10.5, 7.5), "accuracy": (8.0, 5.0)}
    assert {f["fact"] for f in doc["rows"][0]["facts"]} == set(TASK_FACTS)


def test_typed_in_task_scores_without_results_hash_do_not_pass(tmp_path):
    entry = _entry("winoground")
    run = task_run(tmp_path / "typed", task="winoground", spec=SPEC, scores=_scores(entry), files=_files(entry))
    doc = json.loads((run / "results.json").read_text())
    doc.pop("results_hash")
    doc.pop("record_hash")
    (run / "results.json").write_text(json.dumps(doc))
    report = check_run(run)
    assert report.status == "unverified" and report.exit_code() == 1


def _whole(value: float, n: int, decimals: int) -> bool:
    """Whether ``value`` percent is k/n of a whole k, as the source rounds it."""
    return any(round(100.0 * k / n, decimals) == pytest.approx(value, abs=1e-9)
               for k in range(max(0, math.floor(value * n / 100) - 1), math.ceil(value * n / 100) + 2))


def test_every_shipped_score_is_a_whole_number_of_its_sets_items():
    for entry in task_entries():
        decimals = 1 if entry.task == "whatsup" else 2
        for cond, want in entry.sets.items():
            n = want["n_items"]
            if n is None:
                continue
            scores = want["scores"]
            assert _whole(scores["accuracy"], n, decimals), (entry.id, cond)
            for metric, per in (("text_score", n), ("image_score", n), ("i2t_score", n), ("t2i_score", n),
                                ("pair_accuracy", n // 2),
                                ("set_accuracy", n // 4)):
                if metric in scores:
                    assert _whole(scores[metric], per, decimals), (entry.id, cond, metric)
    # the What'sUp Controlled counts: 412 (A) and 408 (B) items fit the published pair accuracies; swapped they do not
    assert not _whole(17.5, 408 // 2, 1) and _whole(17.5, 412 // 2, 1)  # FLAVA's Subset A pairs, the same table


def test_the_sugarcrepe_entry_applies_to_the_files_vlbench_downloads():
    from vlbench.tasks.sets.sugarcrepe import SUGARCREPE_SHA256

    entry = _entry("sugarcrepe")
    for cond, want in entry.sets.items():
        assert SUGARCREPE_SHA256[cond.split(":")[-1]] in want["sha256"], cond
    assert entry.sets["task:sugarcrepe:swap_obj"]["sha256"][0] != SUGARCREPE_SHA256["swap_obj"]  # measured on 246


def test_every_task_entry_has_a_source_and_its_protocol_facts():
    for entry in task_entries():
        src = entry.source
        assert src["citation"] and src["table"] and src["read_in"] and src["url"].startswith("https://"), entry.id
        assert set(entry.protocol) == set(TASK_FACTS), entry.id
        assert entry.specs and entry.sets and all(w["scores"] for w in entry.sets.values()), entry.id
        for w in entry.sets.values():
            assert all(0.0 <= v <= 100.0 for v in w["scores"].values()), entry.id
    said = " ".join(n["what"] for n in task_document()["not_shipped"])
    assert "XM3600" in said and "What'sUp" in said and "Winoground" in said  # not found: said, not invented


def test_the_bivlc_entry_names_the_metrics_a_bivlc_run_records():
    """The paper's I2T / T2I / group row is compared with the run's values of the same names (a renamed metric
    would make the check compare nothing)."""
    from vlbench.tasks.sets.bivlc import SCORING

    entry = _entry("bivlc")
    recorded = set(SCORING.metrics.values())
    assert set(entry.sets["task:bivlc"]["scores"]) == {"i2t_score", "t2i_score", "accuracy"} <= recorded
    assert entry.sets["task:bivlc"]["n_items"] == 2933
