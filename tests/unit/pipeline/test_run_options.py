"""One configuration source: the options of `vlbench run`, the keys of `--config run.toml` and the
Python API's RunConfig come from the same field definitions, checked both ways; a run given as a config
file with every key equals the same run given as flags and as RunConfig(...)."""

from __future__ import annotations

import dataclasses

import pytest

from vlbench.cli import build_parser
from vlbench.config import config_tokens
from vlbench.pipeline.run_config import RunConfig
from vlbench.pipeline.run_options import CLI_ONLY, RUN_OPTIONS, config_from_args


def _run_parser():
    return build_parser()._subparsers._group_actions[0].choices["run"]


def _long_options(parser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings if s.startswith("--")} - {"--help"}


def test_every_field_has_one_option_and_every_option_one_field():
    fields = [f.name for f in dataclasses.fields(RunConfig)]
    options = [o.field for o in RUN_OPTIONS]
    assert sorted(options) == sorted(fields)  # both ways, no field twice
    flags = [o.flag for o in RUN_OPTIONS]
    assert len(set(flags)) == len(flags)
    assert _long_options(_run_parser()) == set(flags) | set(CLI_ONLY)


def test_every_option_is_a_config_key():
    parser = _run_parser()
    for o in RUN_OPTIONS:
        key = o.flag[2:]
        value = {"flag": True, "int": 3, "ints": [1, 2], "names": ["rouge-l"], "params": ["typos-keyboard.rate=0.1"]
                 }.get(o.kind, o.choices[-1] if o.choices else "x")
        tokens = config_tokens({key: value}, parser, "run.toml")
        assert tokens and tokens[0] == o.flag, o
        assert config_tokens({key.replace("-", "_"): value}, parser, "run.toml") == tokens


def _sample() -> tuple[list[str], dict, RunConfig]:
    """The same non-default run as flags, as a config document and as RunConfig."""
    flags = ["--model", "counting:dim=8", "--dataset", "custom:m.jsonl", "--perturb", "typos", "--param",
             "typos-keyboard.rate=0.2", "--out", "o", "--dataset-name", "d", "--model-name", "m", "--data-dir", "dd",
             "--gallery", "fg-pool", "--extra-positives", "eccv", "--device", "cpu", "--precision", "bf16",
             "--batch-size", "8", "--text-batch-size", "16", "--num-workers", "0", "--seed", "5", "--k", "1,3",
             "--dcg-p", "4", "--relevance", "clip:rel", "--protocol", "hendriksen2024", "--i2t-recall", "hit",
             "--perturb-side", "both", "--truncate-chars", "100", "--perturb-variant", "standard", "--cache-dir", "c",
             "--no-cache", "--restart",
             "--trust-remote-code", "--revision", "r1", "--bootstrap", "7", "--graded-relevance", "rouge-l",
             "--mia-score", "rank", "--score-block", "64x4096", "--quiet", "--perturb-images", "gaussian_noise:3",
             "--mce-reference", "ref",
             "--probes", "negation",  # meaning-changing probes
             "--corrupt-at", "original", "--shortcuts", "matched", "--digits", "mnist", "--validity", "full",
             "--validity-sample", "50", "--validity-precision", "0.01"]
    flags += ["--resume", "--overwrite"]  # opposite wishes, refused together by validate(): a parse test only
    flags += ["--allow-partial-gallery"]  # (helper H) a smaller --gallery folder, labelled
    flags += ["--distractors", "captions:adv.txt"]  # (helper M) gallery distractors
    flags += ["--token-budget", "16,77", "--sentence-budget", "2"]  # caption-length budgets
    flags += ["--limit", "20"]  # a smoke test
    flags += ["--pixels", "device"]  # the pixel path
    flags += ["--corrupt-backend", "torch"]  # The torch corruptions
    flags += ["--report-to", "tensorboard,mlflow"]  # experiment trackers
    flags += ["--threads", "3"]  # the CPU threads of the model's forward
    flags += ["--token-memory", "2.5"]  # a multi-vector model's memory budget
    flags += ["--rerank", "blip-itm", "--rerank-k", "8"]  # the two-stage protocol
    doc = {"model": "counting:dim=8", "dataset": "custom:m.jsonl", "perturb": "typos",
           "param": {"typos-keyboard.rate": 0.2}, "out": "o", "dataset_name": "d", "model-name": "m", "data-dir": "dd",
           "gallery": "fg-pool", "extra-positives": "eccv", "device": "cpu", "precision": "bf16", "batch-size": 8,
           "text-batch-size": 16, "num-workers": 0, "seed": 5, "k": [1, 3], "dcg-p": 4, "relevance": "clip:rel",
           "protocol": "hendriksen2024", "i2t-recall": "hit", "perturb-side": "both", "truncate-chars": 100,
           "perturb-variant": "standard",
           "probes": "negation",
           "cache-dir": "c", "no-cache": True, "restart": True, "trust-remote-code": True, "revision": "r1",
           "bootstrap": 7, "graded-relevance": ["rouge-l"], "mia-score": "rank", "score-block": "64x4096",
           "quiet": True,
           "perturb-images": "gaussian_noise:3", "mce_reference": "ref", "corrupt-at": "original",
           "shortcuts": "matched", "digits": "mnist", "validity": "full", "validity-sample": 50,
           "validity-precision": 0.01}
    doc.update({"resume": True, "overwrite": True, "allow-partial-gallery": True})
    doc.update({"distractors": "captions:adv.txt", "limit": 20})
    doc.update({"token-budget": [16, 77], "sentence_budget": 2})
    doc.update({"pixels": "device"})
    doc.update({"corrupt-backend": "torch"})
    doc.update({"report-to": ["tensorboard", "mlflow"]})
    doc.update({"threads": 3})
    doc.update({"token-memory": 2.5})
    doc.update({"rerank": "blip-itm", "rerank-k": 8})
    cfg = RunConfig(model="counting:dim=8", dataset="custom:m.jsonl", perturb="typos",
                    perturb_params={"typos-keyboard": {"rate": 0.2}}, out="o", dataset_name="d", model_name="m",
                    data_dir="dd", gallery="fg-pool", extra_positives="eccv", device="cpu", precision="bf16",
                    batch_size=8, text_batch_size=16, num_workers=0, seed=5, k=(1, 3), p=4, relevance="clip:rel",
                    protocol="hendriksen2024", i2t_recall="hit", perturb_side="both", truncate_chars=100,
                    perturb_variant="standard",
                    probes="negation",
                    cache_dir="c", no_cache=True, restart=True, trust_remote_code=True, revision="r1", n_boot=7,
                    graded=("rouge-l",), mia_score="rank", score_block="64x4096", quiet=True,
                    perturb_images="gaussian_noise:3",
                    mce_reference="ref", corrupt_at="original", shortcuts="matched", digits="mnist",
                    validity="full", validity_sample=50, validity_precision=0.01, resume=True, overwrite=True,
                    allow_partial_gallery=True, distractors="captions:adv.txt", token_budget=(16, 77),
                    sentence_budget=(2,), limit=20, corrupt_backend="torch",
                    report_to=("tensorboard", "mlflow"))
    cfg = dataclasses.replace(cfg, pixels="device", threads=3, token_memory=2.5, rerank="blip-itm", rerank_k=8)
    return flags, doc, cfg


def test_flags_config_file_and_python_api_give_one_config():
    parser = build_parser()
    flags, doc, cfg = _sample()
    default = RunConfig(model="a", dataset="b")
    single_choice = {o.field for o in RUN_OPTIONS if o.choices and len(o.choices) == 1}  # relevance: "self" only
    changed = {f.name for f in dataclasses.fields(RunConfig) if getattr(cfg, f.name) != getattr(default, f.name)}
    assert changed == {f.name for f in dataclasses.fields(RunConfig)} - single_choice  # the sample sets every field
    from_flags = config_from_args(parser.parse_args(["run", *flags]))
    tokens = config_tokens(doc, _run_parser(), "run.toml")
    from_file = config_from_args(parser.parse_args(["run", *tokens]))
    assert from_flags == cfg and from_file == cfg


def test_cli_defaults_are_the_field_defaults():
    args = build_parser().parse_args(["run", "--model", "a", "--dataset", "b"])
    assert config_from_args(args) == RunConfig(model="a", dataset="b")


def test_required_fields(capsys):
    """A field without a default is a required option; --dataset alone may be left out on the command line
    (a choice task names its own data), and a retrieval run without it stops with exit status 2."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--dataset", "b"])
    assert "--model" in capsys.readouterr().err
    from vlbench.cli import main

    assert main(["run", "--model", "a"]) == 2
    assert "needs --dataset" in capsys.readouterr().err


LIST_OPTIONS = [o for o in RUN_OPTIONS if o.is_list]


def test_the_comma_list_options_are_the_ones_that_take_lists():
    assert {o.flag for o in LIST_OPTIONS} == {"--perturb", "--probes", "--perturb-images", "--shortcuts",
                                              "--distractors", "--token-budget", "--sentence-budget", "--k",
                                              "--graded-relevance", "--report-to"}


@pytest.mark.parametrize("option", LIST_OPTIONS, ids=lambda o: o.flag)
def test_a_repeated_comma_list_option_is_refused_not_silently_overridden(option):
    from vlbench.errors import OptionError

    args = build_parser().parse_args(["run", "--model", "m", "--dataset", "d", option.flag, "1", option.flag, "2"])
    with pytest.raises(OptionError) as err:
        config_from_args(args)
    assert err.value.option == option.field
    text = err.value.cli_text(option.flag)
    assert "'1', then '2'" in text and f"e.g. {option.flag} 1,2" in text  # both values, and the one list


def test_a_repeated_perturb_exits_2_naming_the_option(capsys):
    from vlbench.cli import main

    assert main(["run", "--model", "m", "--dataset", "d", "--perturb", "typos", "--perturb", "lexical"]) == 2
    err = capsys.readouterr().err
    assert "--perturb was given 2 times" in err and "--perturb typos,lexical" in err


def test_a_config_files_list_is_overridden_by_the_command_line_not_refused(tmp_path):
    from vlbench.config import expand_config

    toml = tmp_path / "run.toml"
    toml.write_text('model = "m"\ndataset = "d"\nperturb = "typos"\nk = [1, 5]\n')
    parser = build_parser()
    argv = expand_config(["run", "--config", str(toml), "--perturb", "lexical"], parser)
    cfg = config_from_args(parser.parse_args(argv))
    assert cfg.perturb == "lexical" and cfg.k == (1, 5)
    twice = expand_config(["run", "--config", str(toml), "--k", "1", "--k", "10"], parser)
    with pytest.raises(Exception, match="given 2 times"):
        config_from_args(parser.parse_args(twice))


def test_run_help_says_why_repeats_are_refused(capsys):
    from vlbench.cli import main

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "Given twice on the command line it is refused, neither merged nor overridden" in out
