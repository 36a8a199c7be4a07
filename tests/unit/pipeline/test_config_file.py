"""`vlbench run --config run.toml`: the file's keys are the long option names; the run equals the same run
given as flags (identical result records); command-line flags override the file; bad files exit 2."""

from __future__ import annotations

import json

import pytest

MODEL = "counting:dim=16"


def _records(out) -> list:
    return json.loads((out / "results.json").read_text())["results"]


@pytest.mark.slow  # two whole runs
def test_config_file_equals_the_same_flags(manifest, tmp_path, counting_plugin):
    from vlbench.cli import main

    flags = ["--model", MODEL, "--dataset", f"custom:{manifest}", "--perturb", "shuffle-all-words", "--k", "1,2",
             "--bootstrap", "30", "--seed", "3", "--num-workers", "0", "--no-cache", "--quiet"]
    assert main(["run", *flags, "--out", str(tmp_path / "flags")]) == 0
    toml = tmp_path / "run.toml"
    toml.write_text(f'model = "{MODEL}"\ndataset = "custom:{manifest}"\nperturb = "shuffle-all-words"\n'
                    'k = [1, 2]\nbootstrap = 30\nseed = 3\nnum_workers = 0\nno-cache = true\nquiet = true\n')
    assert main(["run", "--config", str(toml), "--out", str(tmp_path / "file")]) == 0
    a, b = _records(tmp_path / "flags"), _records(tmp_path / "file")
    assert a == b and {r["k"] for r in a if r["metric"] == "recall"} == {1, 2}
    assert {r["condition"] for r in a} >= {"clean", "shuffle-all-words"}


def test_flags_override_the_file(manifest, tmp_path, counting_plugin):
    from vlbench.cli import main

    toml = tmp_path / "run.toml"
    toml.write_text(f'model = "{MODEL}"\ndataset = "custom:{manifest}"\nk = "1"\nno-cache = true\nquiet = true\n'
                    'num-workers = 0\nbootstrap = 5\n')
    assert main(["run", "--config", str(toml), "--k", "3", "--out", str(tmp_path / "o")]) == 0
    assert {r["k"] for r in _records(tmp_path / "o") if r["metric"] == "recall"} == {3}


def test_bad_config_files_exit_2_naming_the_key(manifest, tmp_path, capsys):
    from vlbench.cli import main

    cases = {'model = "x"\nbatchsize = 3\n': "unknown key 'batchsize'", 'quiet = "yes"\n': "quiet must be true or false",
             "model = \n": "not valid TOML", 'seed = -1\nmodel = "counting:dim=16"\ndataset = "custom:x"\n': "--seed"}
    for i, (text, why) in enumerate(cases.items()):
        toml = tmp_path / f"c{i}.toml"
        toml.write_text(text)
        rc = main(["run", "--config", str(toml), "--out", str(tmp_path / f"o{i}")])
        err = capsys.readouterr().err
        assert rc == 2 and why in err, (text, err)
    assert main(["run", "--config", str(tmp_path / "missing.toml")]) == 2
    assert "cannot be read" in capsys.readouterr().err


def test_param_and_lists_become_the_same_tokens_as_flags():
    from vlbench.cli import build_parser
    from vlbench.config import config_tokens

    run_parser = build_parser()._subparsers._group_actions[0].choices["run"]
    doc = {"param": {"typos-keyboard.rate": 0.1}, "graded-relevance": ["rouge-l", "minilm"], "restart": False}
    assert config_tokens(doc, run_parser, "x.toml") == ["--param", "typos-keyboard.rate=0.1",
                                                          "--graded-relevance", "rouge-l,minilm"]
