"""The Python API reads as Python: lists wherever the CLI takes comma lists, errors that
name keyword arguments (the CLI the flags), and an explicit resume / overwrite for a re-run into one folder."""

from __future__ import annotations

import json

import pytest

import vlbench
from vlbench import cli
from vlbench.errors import OptionError, VlbenchError
from vlbench.pipeline.run_config import RunConfig, validate


def _run(manifest, out, **kw):
    base = dict(model="counting", dataset=f"custom:{manifest}", out=str(out), quiet=True, num_workers=0,
                validity="off", n_boot=10)
    return vlbench.run(**{**base, **kw})


def test_lists_are_accepted_where_the_cli_takes_comma_lists():
    cfg = RunConfig(model="m", dataset="d", perturb=["char-swap", "missing-char"], perturb_images=("gaussian_noise:1",
                    "motion_blur:2"), shortcuts=["matched", "mismatched"], k=[1, 5], graded=["rouge-l"],
                    perturb_params=["char-swap.rate=0.5"])
    assert cfg.perturb == "char-swap,missing-char"
    assert cfg.perturb_images == "gaussian_noise:1,motion_blur:2"
    assert cfg.shortcuts == "matched,mismatched"
    assert cfg.k == (1, 5) and cfg.graded == ("rouge-l",)
    assert cfg.perturb_params == {"char-swap": {"rate": 0.5}}
    # the comma strings of the command line give the same config
    assert RunConfig(model="m", dataset="d", k="1,5", graded="rouge-l") == RunConfig(model="m", dataset="d",
                                                                                      k=(1, 5), graded=("rouge-l",))


def test_run_with_a_perturbation_list(counting_plugin, manifest, tmp_path):
    res = _run(manifest, tmp_path / "o", perturb=["char-swap", "missing-char"], k=[1, 2])
    assert set(res.record.conditions) == {"clean", "char-swap", "missing-char"}
    assert res.record.settings["k"] == [1, 2]
    same = _run(manifest, tmp_path / "o2", perturb="char-swap,missing-char", k=(1, 2))
    values = lambda r: sorted((v.condition, v.key.direction, v.key.metric, v.key.k, v.value)  # noqa: E731
                              for v in r.record.values)
    assert values(res) == values(same)


@pytest.mark.parametrize("kw, python_text, cli_args, cli_text", [
    ({"batch_size": 0}, ["batch_size must be >= 1, got 0", "e.g. batch_size=64"], ["--batch-size", "0"],
     ["--batch-size must be >= 1, got 0", "e.g. --batch-size 64"]),
    ({"p": 0}, ["p must be >= 1, got 0", "e.g. p=10"], ["--dcg-p", "0"], ["--dcg-p must be >= 1", "e.g. --dcg-p 10"]),
    ({"n_boot": 0}, ["n_boot must be >= 1", "e.g. n_boot=1000"], ["--bootstrap", "0"],
     ["--bootstrap must be >= 1", "e.g. --bootstrap 1000"]),
    ({"k": [0, 5]}, ["k must be positive integers, got [0, 5]", "e.g. k=[1, 5, 10]"], ["--k", "0,5"],
     ["--k must be positive integers", "e.g. --k 1,5,10"]),
    ({"seed": -1}, ["seed must be a non-negative integer", "e.g. seed=0"], ["--seed", "-1"],
     ["--seed must be a non-negative integer", "e.g. --seed 0"]),
    ({"perturb_images": ""}, ["perturb_images is given but names nothing", "perturb_images='gaussian_noise:3"],
     ["--perturb-images", ""], ["--perturb-images is given but names nothing", "e.g. --perturb-images gaussian"]),
    ({"shortcuts": []}, ["shortcuts is given but names nothing", "shortcuts='matched,mismatched'"],
     ["--shortcuts", ""], ["--shortcuts is given but names nothing", "e.g. --shortcuts matched,mismatched"]),
    ({"perturb": []}, ["perturb is given but names nothing"], ["--perturb", ""], ["--perturb is given but names"]),
    # the protocol options' checks (pipeline/protocol_settings.check) speak the same way
    ({"truncate_chars": -1}, ["truncate_chars must be >= 0, got -1", "e.g. truncate_chars=330"],
     ["--truncate-chars", "-1"], ["--truncate-chars must be >= 0", "e.g. --truncate-chars 330"]),
    ({"relevance": "nosuchfamily:x"}, ["relevance 'nosuchfamily:x': no model family 'nosuchfamily'"],
     ["--relevance", "nosuchfamily:x"], ["--relevance 'nosuchfamily:x': no model family", "e.g. --relevance clip:openai"]),
])
def test_errors_name_keywords_in_python_and_flags_in_the_cli(counting_plugin, manifest, tmp_path, capsys, kw,
                                                             python_text, cli_args, cli_text):
    with pytest.raises(OptionError) as info:
        _run(manifest, tmp_path / "o", **kw)
    text = str(info.value)
    assert all(t in text for t in python_text), text
    assert "--" not in text  # no flag spelling from Python
    code = cli.main(["run", "--model", "counting", "--dataset", f"custom:{manifest}", "--quiet", *cli_args,
                     "--out", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert code == 2 and all(t in err for t in cli_text), err
    assert "Traceback" not in err and not (tmp_path / "c" / "results.json").exists()


def test_option_error_renders_both_ways():
    e = OptionError("text_batch_size", "{opt} must be >= 1, got -5", example=256)
    assert str(e) == "text_batch_size must be >= 1, got -5\n  fix: e.g. text_batch_size=256"
    assert e.cli_text() == "--text-batch-size must be >= 1, got -5\n  fix: e.g. --text-batch-size 256"
    assert isinstance(e, VlbenchError)


def test_resume_returns_the_finished_run_and_overwrite_replaces_it(counting_plugin, manifest, tmp_path, capsys):
    out = tmp_path / "nb"
    first = _run(manifest, out, perturb=["char-swap"])
    with pytest.raises(OptionError, match="out '.*' already holds a finished run") as info:
        _run(manifest, out, perturb=["char-swap"])  # never silently
    assert info.value.option == "out"
    assert "resume=True" in str(info.value) and "overwrite=True" in str(info.value)
    again = _run(manifest, out, perturb=["char-swap"], resume=True, quiet=False)
    assert again.record.run_id == first.record.run_id  # read back, nothing recomputed
    assert again.results["results"] == json.loads((out / "results.json").read_text())["results"]
    assert "returned as it is (resume)" in capsys.readouterr().err
    with pytest.raises(OptionError, match=r"perturb \[.char-swap.\], not \[.char-swap., .missing-char.\]") as info:
        _run(manifest, out, perturb=["char-swap", "missing-char"], resume=True)
    assert info.value.option == "resume"
    assert "overwrite" in str(info.value)
    replaced = _run(manifest, out, perturb=["char-swap", "missing-char"], overwrite=True, quiet=False)
    assert replaced.record.run_id != first.record.run_id
    assert set(replaced.record.conditions) == {"clean", "char-swap", "missing-char"}
    assert json.loads((out / "results.json").read_text())["run_id"] == replaced.record.run_id
    line = next(x for x in capsys.readouterr().err.splitlines() if "(overwrite)" in x)
    assert line.startswith(f"{out} held a finished run: replacing it (overwrite); removed table.md, per_query.csv.gz")
    assert line.endswith("results.json")


def test_resume_and_overwrite_are_explicit_and_checked(counting_plugin, manifest, tmp_path, capsys):
    with pytest.raises(OptionError, match="resume and overwrite ask for opposite things") as info:
        validate(RunConfig(model="m", dataset="d", out=str(tmp_path), resume=True, overwrite=True))
    assert info.value.option == "resume"
    with pytest.raises(OptionError, match="overwrite needs the run folder") as info:
        validate(RunConfig(model="m", dataset="d", overwrite=True))
    assert info.value.option == "overwrite"
    out = tmp_path / "o"
    args = ["run", "--model", "counting", "--dataset", f"custom:{manifest}", "--quiet", "--validity", "off",
            "--bootstrap", "5", "--out", str(out)]
    assert cli.main(args) == 0
    capsys.readouterr()
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert f"--out {str(out)!r} already holds a finished run" in err and "--resume" in err and "--overwrite" in err
    assert cli.main(args + ["--resume", "--model-name", "x"]) == 0  # the label is not part of the match
    assert cli.main(args[:2] + ["counting:dim=4"] + args[3:] + ["--resume"]) == 2
    assert "holds a finished run with model 'counting', not 'counting:dim=4'" in capsys.readouterr().err


def test_protocol_choice_errors_name_the_keyword_from_python():
    """argparse refuses a bad --perturb-side on the command line; from Python the check names the keyword."""
    from vlbench.pipeline.run_config import validate

    with pytest.raises(OptionError) as info:
        validate(RunConfig(model="m", dataset="d", perturb_side="left"))
    assert info.value.option == "perturb_side"
    assert str(info.value) == "unknown perturb_side 'left'\n  fix: use one of: both, t2i"
