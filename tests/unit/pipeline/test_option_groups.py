"""Option groups: RunConfig is six frozen groups (model, data, conditions, scoring, validity,
output) that cover every field once, shown as groups in `vlbench run --help`; it is immutable; flat keywords and
flat TOML keys still build it; the choice lists are declared once; and a retrieval-only option given with
`--task` (command line, --config file or Python keyword) is an error naming it, even at its default value."""

from __future__ import annotations

import collections
import dataclasses
import re

import pytest

from support.data import ROOT
from vlbench.cli import main
from vlbench.errors import VlbenchError
from vlbench.pipeline.run_config import GROUPS, RunConfig
from vlbench.pipeline.run_options import RUN_OPTIONS, flag_of, given_fields
from vlbench.tasks.run import SHARED_OPTIONS, TaskConfig, retrieval_only, run_task

OPTION = {o.field: o for o in RUN_OPTIONS}
RETRIEVAL_ONLY = retrieval_only()


def _value(o):
    """A valid value of option ``o`` as TOML would hold it (the first choice: often the default)."""
    return {"flag": True, "int": 3, "float": 0.01, "ints": [5], "names": ["rouge-l"],
            "params": ["typos-keyboard.rate=0.1"]}.get(o.kind, o.choices[0] if o.choices else "x")


def _tokens(o) -> list[str]:
    v = _value(o)
    if v is True:
        return [o.flag]
    return [o.flag, ",".join(map(str, v)) if isinstance(v, list) else str(v)]


def test_the_groups_cover_every_field_exactly_once():
    names = [f.name for _, _, cls in GROUPS for f in dataclasses.fields(cls)]
    assert [n for n, c in collections.Counter(names).items() if c > 1] == []
    assert sorted(names) == sorted(f.name for f in dataclasses.fields(RunConfig))
    assert [g for g, _, _ in GROUPS] == ["model", "data", "conditions", "scoring", "validity", "output"]


def test_each_group_is_a_frozen_view_of_the_flat_fields():
    cfg = RunConfig(model="m", dataset="d", k=(1, 5), validity="off", quiet=True, seed=4, precision="bf16")
    for _, attr, cls in GROUPS:
        group = getattr(cfg, attr)
        assert type(group) is cls and dataclasses.is_dataclass(group)
        for f in dataclasses.fields(cls):
            assert getattr(group, f.name) == getattr(cfg, f.name)
        first = dataclasses.fields(cls)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(group, first, None)
    assert cfg.scoring_opts.k == (1, 5) and cfg.model_opts.precision == "bf16" and cfg.output_opts.quiet
    # the groups put together give the same config
    flat = {f.name: getattr(getattr(cfg, attr), f.name) for _, attr, cls in GROUPS for f in dataclasses.fields(cls)}
    assert RunConfig(**flat) == cfg


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(RunConfig)])
def test_run_config_is_immutable(name):
    cfg = RunConfig(model="m", dataset="d")
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(cfg, name, getattr(cfg, name))
    assert dataclasses.replace(cfg, quiet=True).quiet and not cfg.quiet  # the way to change one: a copy


def test_flat_keywords_and_flat_toml_keys_build_the_same_config(tmp_path):
    from vlbench.cli import build_parser
    from vlbench.config import expand_config
    from vlbench.pipeline.run_options import config_from_args

    toml = tmp_path / "run.toml"
    toml.write_text('model = "m"\ndataset = "d"\nk = [1, 5, 10]\nvalidity = "off"\nbatch_size = 8\n'
                    'perturb-side = "t2i"\nquiet = true\n')
    parser = build_parser()
    cfg = config_from_args(parser.parse_args(expand_config(["run", "--config", str(toml)], parser)))
    assert cfg == RunConfig(model="m", dataset="d", k=(1, 5, 10), validity="off", batch_size=8,
                            perturb_side="t2i", quiet=True)
    assert cfg.scoring_opts.perturb_side == "t2i" and cfg.validity_opts.validity == "off"


def test_help_shows_the_options_in_their_groups(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = capsys.readouterr().out
    heads = [f"{g} options:" for g, _, _ in GROUPS] + ["kind of run:"]
    at = [text.index("\n" + h + "\n") for h in heads]
    assert at == sorted(at)  # in this order
    for o in RUN_OPTIONS:
        group = next(g for g, _, cls in GROUPS if o.field in {f.name for f in dataclasses.fields(cls)})
        i = heads.index(f"{group} options:")
        section = text[at[i]:at[i + 1]]
        assert re.search(rf"^  {re.escape(o.flag)}\b", section, re.M), (o.flag, group)


def test_choice_lists_are_declared_once():
    """A choice tuple (e.g. ("fp32", "fp16", "bf16")) is written in one module and imported by the others."""
    sources = {p: p.read_text() for p in (ROOT / "vlbench").rglob("*.py")}
    for o in RUN_OPTIONS:
        if not o.choices or len(o.choices) < 2:
            continue
        literal = re.compile(r"\(\s*" + r",\s*".join(re.escape(f'"{c}"') for c in o.choices) + r",?\s*\)")
        where = [str(p.relative_to(ROOT)) for p, s in sources.items() if literal.search(s)]
        assert len(where) <= 1, (o.flag, where)  # PROTOCOLS' names come from its dict, not a tuple


def test_given_means_passed_not_different_from_the_default():
    from vlbench.cli import build_parser

    parse = build_parser().parse_args
    assert given_fields(parse(["run", "--model", "m"])) == {"model"}
    assert given_fields(parse(["run", "--model", "m", "--k", "1,5,10", "--quiet", "--param", "a.b=1"])) == \
        {"model", "k", "quiet", "perturb_params"}


def test_retrieval_only_is_every_field_a_choice_task_does_not_take():
    task_fields = {f.name for f in dataclasses.fields(TaskConfig)}
    assert set(RETRIEVAL_ONLY) == {f.name for f in dataclasses.fields(RunConfig)} - task_fields
    assert set(SHARED_OPTIONS) <= task_fields
    for name in ("k", "p", "protocol", "validity", "validity_sample", "validity_precision", "mce_reference",
                 "perturb_side", "gallery", "extra_positives", "relevance", "graded", "shortcuts"):
        assert name in RETRIEVAL_ONLY
    # the conditions a choice task is scored under (docs/tasks.md, tasks under perturbations and corruptions)
    for name in ("perturb", "perturb_params", "perturb_images", "corrupt_at", "corrupt_backend"):
        assert name in SHARED_OPTIONS and name not in RETRIEVAL_ONLY


@pytest.mark.parametrize("name", RETRIEVAL_ONLY)
def test_task_refuses_a_retrieval_option_on_the_command_line(name, tmp_path, capsys):
    o = OPTION[name]
    rc = main(["run", "--task", "order", "--model", "counting", "--dataset", "custom:none.jsonl",
               "--out", str(tmp_path / "o"), *_tokens(o)])
    err = capsys.readouterr().err
    assert rc == 2 and f"{o.flag} applies to retrieval runs, not to --task order" in err, err
    assert f"fix: leave {o.flag} out" in err and not (tmp_path / "o").exists()


@pytest.mark.parametrize("name", RETRIEVAL_ONLY)
def test_task_refuses_a_retrieval_option_in_the_config_file(name, tmp_path, capsys):
    import json

    o = OPTION[name]
    value = _value(o)
    toml = tmp_path / "run.toml"
    toml.write_text(f'task = "order"\nmodel = "counting"\ndataset = "custom:none.jsonl"\n'
                    f'{o.flag[2:]} = {json.dumps(value)}\n')  # the flat key: the long option's name
    rc = main(["run", "--config", str(toml), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and f"{o.flag} applies to retrieval runs, not to --task order" in err, err


def test_task_refuses_the_default_value_given_explicitly(capsys):
    rc = main(["run", "--task", "order", "--model", "counting", "--dataset", "custom:none.jsonl", "--k", "1,5,10"])
    assert rc == 2 and "--k applies to retrieval runs" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["k", "protocol", "validity", "gallery", "mce_reference"])
def test_task_refuses_a_retrieval_keyword_in_python(name):
    value = {"k": (5,), "protocol": "standard", "validity": "off", "gallery": "test", "mce_reference": "runs/x"}[name]
    with pytest.raises(VlbenchError, match=re.escape(f"{flag_of(name)} applies to retrieval runs")):
        TaskConfig(task="order", model="counting", **{name: value})
    with pytest.raises(VlbenchError, match=re.escape(flag_of(name))):
        run_task(task="order", model="counting", dataset="custom:none.jsonl", **{name: value})


def test_images_dir_belongs_to_the_tasks_that_read_images(tmp_path, capsys):
    """Both refusals name every registered task that reads --images-dir (a new set appears in them by itself)."""
    rc = main(["run", "--model", "counting", "--dataset", "custom:none.jsonl", "--images-dir", str(tmp_path)])
    err = capsys.readouterr().err
    from vlbench.tasks.registry import tasks

    reading = [n for n, t in tasks().items() if t.images_dir]
    assert {"sugarcrepe", "sugarcrepe++", "whatsup", "aro", "mmvp"} <= set(reading)
    assert rc == 2 and "--images-dir applies to --task " + ", ".join(reading[:-1]) + " or " + reading[-1] in err
    assert "not to a retrieval run" in err
    rc = main(["run", "--task", "order", "--model", "counting", "--dataset", "custom:none.jsonl",
               "--images-dir", str(tmp_path)])
    err2 = capsys.readouterr().err
    assert rc == 2 and "not to --task order" in err2
    assert err.split(", not to")[0] == err2.split(", not to")[0]


def test_task_config_is_frozen():
    cfg = TaskConfig(task="order", model="m")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seed = 1
    assert dataclasses.replace(cfg, seed=1).seed == 1


def test_protocol_resolution_returns_a_new_config():
    """resolve() used to assign perturb_params on its result; with a frozen RunConfig it builds a copy."""
    from vlbench.pipeline import presets as PS

    cfg = RunConfig(model="m", dataset="d", protocol="hendriksen2024", perturb="shuffle-all-words")
    out = PS.resolve(cfg)
    assert out.perturb_params == {"shuffle-all-words": {"variant": "hendriksen2024"}}
    assert cfg.perturb_params == {} and out.perturb_variant == "hendriksen2024"
