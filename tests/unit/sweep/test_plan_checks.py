"""A plan is checked whole before its first run: an unknown perturbation, image corruption, probe, model family,
dataset or task in any cell, or a bad option value in any run, is a PlanError naming the plan and the entry, and
nothing has run (no study folder written); a grid over the bound is refused at once, --plan-only included."""

from __future__ import annotations

import time

import pytest

from vlbench.sweep import sweep
from vlbench.sweep.checks import MAX_RUNS, count_runs
from vlbench.sweep.plan import PlanError, parse_plan


def _doc(**conditions) -> dict:
    return {"options": {"n-boot": 20, "validity": "off"}, "models": {"a": "clip:/m/a"},
            "datasets": {"d": "custom:/d/one.jsonl"}, "conditions": {"clean": {}, **conditions}}


def _refused(doc: dict, tmp_path, *needles: str) -> None:
    study = tmp_path / "study"
    with pytest.raises(PlanError) as err:
        sweep(parse_plan(doc, "p.toml"), study, plan_only=False)
    for needle in needles:
        assert needle in str(err.value), str(err.value)
    assert not study.exists()  # nothing ran: not even the study folder was made


def test_an_unknown_perturbation_in_a_later_condition_fails_before_the_clean_run(tmp_path):
    _refused(_doc(typos={"perturb": ["char-swap"]}, bad={"perturb": ["no-such-perturbation"]}), tmp_path,
             "plan p.toml: conditions.bad", "no-such-perturbation")


def test_an_unknown_image_corruption_or_probe_fails_before_any_run(tmp_path):
    _refused(_doc(noise={"perturb-images": "no_such_noise:3"}), tmp_path, "conditions.noise", "no_such_noise")
    _refused(_doc(probe={"shortcuts": "matched,no-such-probe"}), tmp_path, "conditions.probe", "no-such-probe")


def test_an_unknown_model_family_dataset_or_task_fails_before_any_run(tmp_path):
    doc = _doc()
    doc["models"] = {"a": "clip:/m/a", "z": "no-such-family:/m/z"}
    _refused(doc, tmp_path, "models.z", "no-such-family")
    doc = _doc()
    doc["datasets"] = {"d": "custom:/d/one.jsonl", "f": "flickr30q"}
    _refused(doc, tmp_path, "datasets.f", "flickr30q", "flickr30k")
    doc = _doc()
    doc["datasets"] = {"d": "custom:/d/one.jsonl", "w": {"task": "winogrand"}}
    _refused(doc, tmp_path, "datasets.w", "winogrand", "winoground")


def test_a_bad_option_value_in_any_run_fails_before_any_run(tmp_path):
    doc = _doc()
    doc["models"] = {"a": "clip:/m/a", "b": {"spec": "clip:/m/b", "batch-size": 0}}
    _refused(doc, tmp_path, "run b--d--clean", "batch_size must be >= 1")
    doc = _doc(wrong={"corrupt-backend": "torch"})  # a value that is bad only in its combination
    _refused(doc, tmp_path, "run a--d--wrong", "applies to image corruptions only")


def test_a_retrieval_option_given_to_a_choice_set_fails_before_any_run(tmp_path):
    doc = _doc()
    doc["datasets"] = {"w": {"task": "winoground"}}  # [options] n-boot is a retrieval option
    _refused(doc, tmp_path, "--bootstrap applies to retrieval runs, not to --task winoground")


def _huge(n: int = 100) -> dict:
    return {"models": {f"m{i}": "clip:/m" for i in range(n)},
            "datasets": {f"d{i}": "custom:/d.jsonl" for i in range(n)}, "conditions": {f"c{i}": {} for i in range(n)}}


def test_plan_only_on_a_million_run_grid_is_refused_at_once_naming_the_bound(tmp_path, capsys):
    plan = parse_plan(_huge(100), "huge.toml")
    t0 = time.monotonic()
    with pytest.raises(PlanError) as err:
        sweep(plan, tmp_path / "study", plan_only=True)
    assert time.monotonic() - t0 < 5
    text = str(err.value)
    assert "1,000,000 runs" in text and f"bound of {MAX_RUNS:,} runs" in text and "split the study" in text
    assert capsys.readouterr().out == ""


def test_the_run_count_is_lazy_and_follows_the_exclusions():
    doc = _huge(30)  # 27,000 runs before exclusions
    doc["exclude"] = [{"model": f"m{i}"} for i in range(10, 30)]  # 9,000 after
    plan = parse_plan(doc, "p.toml")
    assert count_runs(plan) == 9_000
    assert count_runs(plan, limit=100) == 101  # stops counting once over the bound


def test_a_plan_or_suite_holds_a_choice_set_as_a_dataset_entry(tmp_path):
    """task is a plan key: a dataset entry with a task and no spec is a choice set, expanded to a task run's
    keywords (its own id: the task changes numbers), beside the retrieval runs; a suite holds one the same way."""
    from vlbench.sweep.plan import expand
    from vlbench.sweep.suites import Suite

    doc = {"models": {"a": "clip:/m/a"}, "datasets": {"d": "custom:/d/one.jsonl", "w": {"task": "winoground",
                                                                                       "data-dir": "/data"}}}
    for plan in (parse_plan(doc, "p.toml"), Suite("with-sets", "a suite with a choice set", doc).plan()):
        runs = {t.run_id.split("--")[1]: t for t in expand(plan, tmp_path)}
        assert runs["w"].kwargs == {"task": "winoground", "data_dir": "/data", "model": "clip:/m/a", "dataset": None,
                                    "seed": 0, "quiet": True, "model_name": "a", "dataset_name": "w"}
        assert "task" not in runs["d"].kwargs
    with pytest.raises(PlanError, match='or a choice set: w = { task = "winoground" }'):
        parse_plan({**doc, "datasets": {"w": {"data-dir": "/data"}}}, "p.toml")


def test_a_plan_on_a_gpu_gets_other_run_ids_than_on_the_cpu_and_batch_sizes_count_there(tmp_path):
    from vlbench.sweep.plan import expand

    def ids(**options):
        doc = {"options": options, "models": {"a": "clip:/m/a"}, "datasets": {"d": "custom:/d/one.jsonl"}}
        return [t.run_id for t in expand(parse_plan(doc, "p.toml"), tmp_path)]

    assert ids(device="cpu") != ids(device="cuda") != ids()
    assert ids(device="cuda", precision="bf16") != ids(device="cuda")
    assert ids(device="cuda", **{"batch-size": 8}) != ids(device="cuda", **{"batch-size": 64})
    assert ids(device="cpu", **{"batch-size": 8}) == ids(device="cpu", **{"batch-size": 64})  # no number on the CPU
