"""A study's plan: parsing, the grid it expands to (deterministic ids, exclusions, options merged in their order),
and bad plans refused with the plan file, the key and the fix named; suites registered like the other parts."""

from __future__ import annotations

from pathlib import Path

import pytest

from vlbench import registry
from vlbench.cli import main
from vlbench.errors import VlbenchError
from vlbench.sweep.plan import PlanError, expand, parse_plan, read_plan
from vlbench.sweep.suites import LITE_IMAGES, LITE_TEXT, suite


def _doc(**more) -> dict:
    doc = {"options": {"n-boot": 20, "validity": "off"},
           "models": {"a": "clip:/m/a", "b": {"spec": "clip:/m/b", "batch-size": 8}},
           "datasets": {"d1": "custom:/d/one.jsonl", "d2": "custom:/d/two.jsonl"},
           "conditions": {"clean": {}, "typos": {"perturb": ["char-swap"]}}}
    doc.update(more)
    return doc


def test_plan_expands_to_the_product_in_plan_order(tmp_path):
    plan = parse_plan(_doc(seeds=[0, 1]), "p.toml")
    tasks = expand(plan, tmp_path)
    assert len(tasks) == 2 * 2 * 2 * 2
    assert [t.run_id.split("--")[:4] for t in tasks[:3]] == [["a", "d1", "clean", "s0"], ["a", "d1", "clean", "s1"],
                                                            ["a", "d1", "typos", "s0"]]
    first = tasks[0]
    assert Path(first.folder) == tmp_path / "runs" / first.run_id and first.log == first.folder + ".log"
    assert first.kwargs == {"n_boot": 20, "validity": "off", "model": "clip:/m/a", "dataset": "custom:/d/one.jsonl",
                            "seed": 0, "quiet": True, "model_name": "a", "dataset_name": "d1"}
    b_typos = next(t for t in tasks if t.run_id.startswith("b--d2--typos--s1"))
    assert b_typos.kwargs["batch_size"] == 8 and b_typos.kwargs["perturb"] == ["char-swap"]


def test_run_ids_are_deterministic_and_follow_the_options_that_change_numbers(tmp_path):
    ids = [t.run_id for t in expand(parse_plan(_doc(), "p.toml"), tmp_path)]
    assert ids == [t.run_id for t in expand(parse_plan(_doc(), "p.toml"), tmp_path / "elsewhere")]
    assert len(set(ids)) == len(ids)
    faster = _doc()
    faster["options"] = {**faster["options"], "batch-size": 128}  # changes no number: the same runs
    assert [t.run_id for t in expand(parse_plan(faster, "p.toml"), tmp_path)] == ids
    other = _doc()
    other["options"] = {**other["options"], "n-boot": 50}  # changes numbers: every run is another one
    assert not set(t.run_id for t in expand(parse_plan(other, "p.toml"), tmp_path)) & set(ids)


def test_exclusions_remove_exactly_the_matching_runs(tmp_path):
    plan = parse_plan(_doc(exclude=[{"model": "b", "dataset": "d2"}, {"condition": "typos", "dataset": "d1"}]))
    got = {tuple(t.run_id.split("--")[:3]) for t in expand(plan, tmp_path)}
    assert got == {("a", "d1", "clean"), ("a", "d2", "clean"), ("a", "d2", "typos"), ("b", "d1", "clean")}


def test_a_plan_without_conditions_is_the_clean_run_and_needs_reach_each_task(tmp_path):
    doc = _doc(study={"out": "s", "needs": {"gpus": 1, "mem_gb": 16}})
    del doc["conditions"]
    plan = parse_plan(doc)
    tasks = expand(plan, tmp_path, retries=2, needs=plan.needs)
    assert [t.run_id.split("--")[2] for t in tasks] == ["clean"] * 4
    assert tasks[0].needs == {"gpus": 1, "mem_gb": 16} and tasks[0].retries == 2 and plan.out == "s"


@pytest.mark.parametrize("change, key, fix", [
    ({"modles": {}}, "modles", "the keys of a plan are"),
    ({"options": {"batch-sise": 3}}, "options.batch-sise", "batch-size"),
    ({"options": {"out": "x"}}, "options.out", "remove out"),
    ({"options": {"seed": 3}}, "options.seed", "remove seed"),
    ({"models": {}}, "models", "add a [models] table"),
    ({"models": {"a": 3}}, "models.a", 'a = "SPEC"'),
    ({"models": {"a": {"batch-size": 3}}}, "models.a.spec", 'spec = "SPEC"'),
    ({"models": {"a b": "clip"}}, "models.a b", "letters, digits"),
    ({"conditions": {"c": "char-swap"}}, "conditions.c", "perturb"),
    ({"conditions": {"c": {"perturb": {"x": 1}}}}, "conditions.c.perturb", "as on the command line"),
    ({"seeds": [1, 1]}, "seeds", "each seed once"),
    ({"seeds": "0"}, "seeds", "seeds = [0, 1, 2]"),
    ({"exclude": [{"model": "zz"}]}, "exclude[0].model", "the plan's models: a, b"),
    ({"exclude": [{"colour": "a"}]}, "exclude[0].colour", "model, dataset, condition, seed"),
    ({"exclude": [{"model": "a"}, {"model": "b"}]}, "exclude", "exclude fewer"),
    ({"study": {"needs": {"gpu": 1}}}, "study.needs.gpu", "gpus, cpus and mem_gb"),
    ({"conditions": {"clean": {}, "seeds": [0, 1]}}, "conditions.seeds", "above the first [table]"),
])
def test_a_bad_plan_names_the_file_the_key_and_the_fix(change, key, fix):
    with pytest.raises(PlanError) as info:
        parse_plan(_doc(**change), "plans/study.toml")
    assert f"plan plans/study.toml: {key}:" in info.value.message, info.value.message
    assert fix in (info.value.hint or ""), info.value.hint


def test_read_plan_names_an_unreadable_or_broken_file(tmp_path):
    with pytest.raises(PlanError, match="cannot be read"):
        read_plan(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[models\n")
    with pytest.raises(PlanError, match="is not valid TOML"):
        read_plan(bad)


def test_the_command_line_refuses_a_bad_plan_with_exit_2_and_the_key(tmp_path, capsys):
    plan = tmp_path / "plan.toml"
    plan.write_text('[models]\na = "clip"\n[datasets]\nd = "flickr30k"\n[options]\nbatchsize = 3\n')
    assert main(["sweep", str(plan), "--plan-only", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "options.batchsize" in err and str(plan) in err and "Traceback" not in err


def test_the_command_line_needs_a_plan_or_a_suite_not_both(tmp_path, capsys):
    assert main(["sweep", "--out", str(tmp_path)]) == 2
    assert main(["sweep", "p.toml", "--suite", "lite"]) == 2
    assert "plan file or --suite" in capsys.readouterr().err


def test_suites_are_registered_the_lite_one_and_the_studys_chapter_grid(tmp_path):
    assert {"lite", "hendriksen2024"} <= set(registry.suites.names())
    lite = suite("lite").plan()
    assert [(m.name, d.name) for m in lite.models for d in lite.datasets] == [("clip", "flickr30k")]
    (cond,) = lite.conditions
    assert cond.options["perturb"] == list(LITE_TEXT) and cond.options["perturb_images"] == ",".join(LITE_IMAGES)
    assert lite.options["limit"] == 100
    mine = suite("lite").plan(models={"mine": "clip:/w"}, datasets={"x": "custom:/m.jsonl"})
    assert [t.kwargs["model"] for t in expand(mine, tmp_path)] == ["clip:/w"]
    chapter = suite("hendriksen2024").plan()
    tasks = expand(chapter, tmp_path)
    assert len(tasks) == 16 and {t.kwargs["protocol"] for t in tasks} == {"hendriksen2024"}
    assert {t.kwargs["perturb"] for t in tasks} == {"all"}


def test_one_condition_per_family_in_the_lite_suite():
    from vlbench.imageperturb.spec import FAMILIES, family_of

    families = {registry.perturbations.entry(n).meta["family"] for n in LITE_TEXT}
    every = {e.meta["family"] for e in registry.perturbations.entries()}
    assert families == every and len(LITE_TEXT) == len(every)
    assert {family_of(c.split(":")[0]) for c in LITE_IMAGES} == set(FAMILIES) and len(LITE_IMAGES) == len(FAMILIES)


def test_an_unknown_suite_gets_a_did_you_mean():
    with pytest.raises(VlbenchError, match="lite"):
        suite("lit")


def test_vlbench_ls_suites_lists_the_built_in_and_the_studys_suite(capsys):
    assert main(["ls", "suites"]) == 0
    out = capsys.readouterr().out
    assert "  lite " in out and "  hendriksen2024 " in out and "[study:hendriksen2024]" in out


def test_plan_only_lists_what_each_run_still_needs_and_runs_nothing(tmp_path, capsys):
    plan = tmp_path / "plan.toml"
    plan.write_text(f'[models]\nm = "clip:{tmp_path / "no-weights"}"\n'
                    f'[datasets]\nd = "custom:{tmp_path / "no.jsonl"}"\n'
                    '[conditions]\nclean = {}\ntypos = { perturb = ["char-swap"] }\n')
    assert main(["sweep", str(plan), "--plan-only", "--out", str(tmp_path / "study")]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("m--d--")]
    assert len(rows) == 2 and all(" to do " in r for r in rows)
    assert all(f"weights model 'clip:{tmp_path / 'no-weights'}'" in r and "data dataset" in r for r in rows), rows
    assert "2 run(s): 0 finished, 0 partial, 2 to do" in out and "2 run(s) miss something they need" in out
    assert not (tmp_path / "study").exists()


def test_an_executor_whose_engine_is_not_installed_is_a_clear_error(tmp_path, monkeypatch, capsys):
    from vlbench import registry

    entry = registry.executors.entry("ray")
    monkeypatch.setattr(entry, "target", "vlbench_engine_not_installed:RayExecutor")
    monkeypatch.setattr(entry, "_loaded", None)
    plan = tmp_path / "plan.toml"
    plan.write_text('[models]\nm = "clip:/nowhere"\n[datasets]\nd = "custom:/nowhere.jsonl"\n')
    assert main(["sweep", str(plan), "--out", str(tmp_path / "s"), "--executor", "ray"]) == 2
    err = capsys.readouterr().err
    assert "--executor ray is unavailable" in err and "--executor local" in err and "Traceback" not in err


def test_the_plan_in_docs_scale_md_is_a_valid_plan(tmp_path):
    import re

    from vlbench.sweep.plan import tomllib

    text = (Path(__file__).resolve().parents[3] / "docs" / "scale.md").read_text(encoding="utf-8")
    block = re.findall(r"```toml\n(.*?)```", text, flags=re.S)[0]  # the plan; later blocks: executor tables
    plan = parse_plan(tomllib.loads(block), "docs/scale.md")
    tasks = expand(plan, tmp_path)
    # 2 models x 2 datasets x 3 conditions x 2 seeds = 24, minus siglip's budgets (4) and coco's seed 1 (6, of
    # which 1 is already out): 15
    assert len(tasks) == 24 - 4 - 6 + 1
    assert plan.needs == {"gpus": 1, "mem_gb": 32} and plan.out == "studies/robustness"
