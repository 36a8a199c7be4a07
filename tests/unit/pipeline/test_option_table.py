"""One table of options (vlbench/util/options.py): every flag of `vlbench run`, every `--config` key, every key a
sweep plan takes, every keyword of `vlbench.run` and of the Evaluator comes from it, and it has no row that none
of them uses; RunConfig's fields have the table's defaults and groups; each row says whether it changes a number."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from vlbench.cli import build_parser
from vlbench.config import config_tokens
from vlbench.pipeline import rerun
from vlbench.pipeline.run_config import RunConfig, group_of
from vlbench.pipeline.run_options import CLI_ONLY, RUN_OPTIONS
from vlbench.sweep import plan as sweep_plan
from vlbench.training.evaluator import Evaluator
from vlbench.util import options
from vlbench.util.options import OPTIONS, applying


def _run_parser():
    return build_parser()._subparsers._group_actions[0].choices["run"]


def _run_flags() -> set[str]:
    return {s for a in _run_parser()._actions for s in a.option_strings if s.startswith("--")} - {"--help"}


def test_every_flag_of_vlbench_run_comes_from_the_table():
    assert _run_flags() == {o.flag for o in applying("cli")}
    assert set(CLI_ONLY) == {o.flag for o in applying("cli") if "api" not in o.where}


def test_every_flags_help_is_the_tables():
    helps = {s: a.help for a in _run_parser()._actions for s in a.option_strings if s.startswith("--")}
    assert {o.flag: helps[o.flag] for o in applying("cli")} == {o.flag: o.help for o in applying("cli")}


def _sample(o):
    return {"flag": True, "int": 3, "float": 0.01, "ints": [1, 2], "names": ["rouge-l"],
            "params": ["typos-keyboard.rate=0.1"]}.get(o.kind, "x")


def test_every_config_key_comes_from_the_table():
    parser = _run_parser()
    for o in applying("config"):  # each of the table's config keys is read, as the flag the table names
        if o.kind == "flag":
            assert config_tokens({o.key: True}, parser, "run.toml") == [o.flag]
        else:
            assert config_tokens({o.key: _sample(o)}, parser, "run.toml")[0] == o.flag
    not_keys = [o for o in OPTIONS if "config" not in o.where]
    for o in not_keys:  # and nothing else is a key (--config itself, the Evaluator's project)
        with pytest.raises(Exception, match="unknown key"):
            config_tokens({o.key: _sample(o)}, parser, "run.toml")


def test_every_plan_key_comes_from_the_table():
    keys = sweep_plan._fields()
    assert set(keys.values()) == {o.field for o in applying("plan")}
    assert set(keys) == {o.key for o in applying("plan")} | {o.field.replace("_", "-") for o in applying("plan")}
    # the keys a plan refuses, each with its reason, are the command's rows that are not plan keys
    assert set(sweep_plan.RESERVED) == {o.key for o in OPTIONS if "plan" not in o.where and o.where & options.COMMAND}


def test_a_plan_reads_each_plan_key_of_the_table_and_refuses_the_others_with_their_reason():
    for o in applying("plan"):
        value = _sample(o) if o.kind != "str" else "x"
        doc = {"options": {o.key: value}, "models": {"a": "clip:/m"}, "datasets": {"d": "custom:/d.jsonl"}}
        assert sweep_plan.parse_plan(doc, "p.toml").options == {o.field: value}, o.key
    for key, why in sweep_plan.RESERVED.items():
        doc = {"options": {key: "x"}, "models": {"a": "clip:/m"}, "datasets": {"d": "custom:/d.jsonl"}}
        with pytest.raises(sweep_plan.PlanError, match="is not an option a plan sets") as err:
            sweep_plan.parse_plan(doc, "p.toml")
        assert why in str(err.value)


def test_every_keyword_of_vlbench_run_is_a_row_with_its_default_and_group():
    fields = {f.name: f for f in dataclasses.fields(RunConfig)}
    assert set(fields) == {o.field for o in applying("api")}
    assert [o.field for o in RUN_OPTIONS] == [o.field for o in applying("api")]
    for o in applying("api"):
        f = fields[o.field]
        default = (f.default if f.default is not dataclasses.MISSING else
                   f.default_factory() if f.default_factory is not dataclasses.MISSING else options.REQUIRED)
        assert default == o.default, o.field
        assert group_of(o.field) == o.group, o.field


def test_every_evaluator_argument_comes_from_the_table():
    params = inspect.signature(Evaluator.__init__).parameters
    named = {n for n, p in params.items() if n != "self" and p.kind != p.VAR_KEYWORD}
    assert named == {"dataset", "out", "report_to", "project"}
    refused = {"model", "resume", "overwrite"}  # the Evaluator refuses them by name (its model comes at each call)
    taken = named | ({o.field for o in applying("api")} - refused)  # **options: any vlbench.run keyword but those
    assert taken == {o.field for o in applying("evaluator")}
    assert refused == {o.field for o in applying("api") if "evaluator" not in o.where}


@pytest.mark.parametrize("name", ["model", "resume", "overwrite"])
def test_the_evaluator_refuses_the_rows_that_do_not_apply_to_it(name):
    from vlbench.errors import OptionError

    with pytest.raises(OptionError) as err:
        Evaluator("custom:none.jsonl", **{name: "clip" if name == "model" else True})
    assert err.value.option == name


def test_the_table_has_no_row_that_nothing_uses():
    for o in OPTIONS:
        assert o.where and o.where <= options.EVERYWHERE, o.field
        assert o.numbers in options.NUMBERS, o.field
        assert o.flag.startswith("--") and o.key == o.flag[2:]
    assert len({o.field for o in OPTIONS}) == len(OPTIONS) and len({o.flag for o in OPTIONS}) == len(OPTIONS)
    # the one row that is no flag, key or vlbench.run keyword is a named argument of the Evaluator
    assert [o.field for o in OPTIONS if o.where == {"evaluator"}] == ["project"]


def test_device_precision_and_accelerator_batch_sizes_change_numbers():
    row = options.by_field()
    assert row["device"].numbers == options.YES and row["precision"].numbers == options.YES
    assert row["batch_size"].numbers == row["text_batch_size"].numbers == options.ACCELERATOR
    assert {"device", "precision", "batch_size", "text_batch_size"}.isdisjoint(rerun.NOT_NUMBERS)
    assert rerun.ON_ACCELERATORS == {"batch_size", "text_batch_size"}
    # what compares as "no number" is exactly the table's no / by-content rows
    assert rerun.NOT_NUMBERS == {o.field for o in OPTIONS if o.numbers in (options.NO, options.CONTENT)}


def test_the_markdown_list_names_every_option_of_a_place():
    text = options.markdown_table("cli")
    assert all(f"`{o.flag}`" in text for o in applying("cli"))
    assert "| `--device` |" in text and "on accelerators" in text
    with pytest.raises(ValueError):
        options.markdown_table("nowhere")
