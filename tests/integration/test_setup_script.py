"""scripts/setup.sh's choice of torch build and extras, run for real against a stand-in environment: its python
records the pip commands instead of installing (nothing is downloaded), its answers say whether torch is installed,
whether PyTorch's CPU index answers, which versions pip's configuration offers, which install fails and which
test-extra package does not import. Checked: --cpu and the automatic CPU route (new environment, no NVIDIA GPU)
install torch + torchvision from the CPU index before the project; an unreachable index takes a CPU pair that pip's
own configuration offers, or says how to pin one and falls back to the default route; VLBENCH_TORCH pins a pair; an
environment that has torch is never changed; --gpu keeps the default route; a bad option is refused; the main job's
set-up installs the [lang] extra only and --test (scripts/test.sh) the test extra; a failed install or a test-extra
package that does not import stops set-up with a non-zero status naming the extra and the fix."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.data import ROOT

FAKE_PYTHON = r'''#!/usr/bin/env bash
# a stand-in interpreter: logs pip commands, answers set-up's questions
args="$*"
case "$args" in
  *test-extra-check*) if [ -n "$IMPORT_FAIL" ]; then echo "      cannot import $IMPORT_FAIL"; exit 1; fi; exit 0;;
  *"pip index versions torchvision"*) echo "Available versions: $TV_VERSIONS"; exit 0;;
  *"pip index versions torch"*) echo "Available versions: $T_VERSIONS"; exit 0;;
  *"-m pip"*) echo "PIP $args" >> "$LOG"
              if [ -n "$PIP_FAIL" ] && [[ "$args" == *"$PIP_FAIL"* ]]; then echo "ERROR: no matching distribution"; exit 1; fi
              exit 0;;
  *"find_spec('torch')"*) echo "$HAS_TORCH"; exit 0;;
  *urllib*) [ "$INDEX_UP" = 1 ] && exit 0 || exit 1;;
  *"--version"*) echo "Python 3.stand-in"; exit 0;;
  *"print(torch.__version__)"*) echo "2.0.0+cu999"; exit 0;;
  *) echo "torch 2.0.0, transformers 5.0"; exit 0;;
esac
'''


def _setup(tmp_path: Path, *options: str, has_torch: bool = False, index_up: bool = False, **answers: str):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name in ("python", "vlbench"):
        (venv / "bin" / name).write_text(FAKE_PYTHON)
        (venv / "bin" / name).chmod(0o755)
    path = tmp_path / "path"  # the basic tools, and no nvidia-smi
    path.mkdir()
    for tool in ("bash", "env", "cat", "sed", "awk", "grep", "uname", "timeout", "dirname", "id", "python3", "tr", "cut", "paste"):
        if shutil.which(tool):
            (path / tool).symlink_to(shutil.which(tool))
    log = tmp_path / "pip.log"
    log.touch()
    env = dict(os.environ, VLBENCH_VENV=str(venv), PATH=str(path), LOG=str(log), HAS_TORCH="1" if has_torch else "0",
               INDEX_UP="1" if index_up else "0")
    for var in ("T_VERSIONS", "TV_VERSIONS", "PIP_FAIL", "IMPORT_FAIL", "VLBENCH_TORCH"):
        env[var] = answers.get(var.lower(), "")
    run = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh"), *options], env=env, capture_output=True,
                         text=True, timeout=120)
    return run, log.read_text().splitlines()


def _pip(lines):
    return [line.split(" -m pip install ", 1)[-1] for line in lines
            if " install " in line and "--upgrade pip" not in line]


@pytest.mark.skipif(Path("/dev/nvidia0").exists(), reason="this machine has an NVIDIA device node")
def test_a_new_environment_without_a_gpu_gets_the_cpu_build_first(tmp_path):
    run, pip = _setup(tmp_path, index_up=True)
    assert run.returncode == 0, run.stdout + run.stderr
    installs = _pip(pip)
    assert "--index-url https://download.pytorch.org/whl/cpu torch>=2.1 torchvision>=0.16" in installs[0], installs
    assert '-e .[lang]' in installs[1], installs
    assert "no NVIDIA GPU here" in run.stdout


def test_an_unreachable_cpu_index_falls_back_to_the_default_route_with_a_message(tmp_path):
    run, pip = _setup(tmp_path, "--cpu", index_up=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "cannot be reached" in run.stdout and "default route" in run.stdout
    installs = _pip(pip)
    assert not any("download.pytorch.org" in i for i in installs) and any("-e .[lang]" in i for i in installs)


def test_an_environment_that_has_torch_is_left_as_it_is(tmp_path):
    for options in ((), ("--cpu",)):
        run, pip = _setup(tmp_path / "-".join(options or ("auto",)), *options, has_torch=True, index_up=True)
        assert run.returncode == 0, run.stdout + run.stderr
        assert not any("download.pytorch.org" in i for i in _pip(pip)), options
    assert "already installed" in run.stdout and "kept" in run.stdout  # --cpu says why nothing changed


def test_gpu_keeps_the_default_route_and_a_bad_option_is_refused(tmp_path):
    run, pip = _setup(tmp_path / "gpu", "--gpu", index_up=True)
    assert run.returncode == 0 and not any("download.pytorch.org" in i for i in _pip(pip))
    bad, _ = _setup(tmp_path / "bad", "--cpus")
    assert bad.returncode == 2 and "--cpus" in bad.stdout


def test_the_main_setup_installs_what_runs_need_and_test_sh_the_test_extra(tmp_path):
    run, pip = _setup(tmp_path / "main", "--gpu")
    assert run.returncode == 0, run.stdout + run.stderr
    assert [i for i in _pip(pip) if "-e " in i] == ["--progress-bar on -e .[lang]"], _pip(pip)
    run, pip = _setup(tmp_path / "test", "--gpu", "--test")
    assert run.returncode == 0, run.stdout + run.stderr
    assert [i for i in _pip(pip) if "-e " in i] == ["--progress-bar on -e .[test]"], _pip(pip)
    test_sh = (ROOT / "scripts" / "test.sh").read_text()
    assert "bash scripts/setup.sh --test\n" in test_sh


def test_a_failed_extra_install_stops_setup_naming_the_extra_and_the_fix(tmp_path):
    run, _ = _setup(tmp_path, "--gpu", "--test", pip_fail="-e .[test]")
    assert run.returncode == 1, run.stdout
    assert "installing vlbench with the extra 'test' failed" in run.stdout
    assert "fix: " in run.stdout and "pip install -e '.[test]'" in run.stdout
    assert "[3/5]" not in run.stdout  # nothing after the failed step


def test_a_test_extra_package_that_does_not_import_stops_setup(tmp_path):
    run, _ = _setup(tmp_path, "--gpu", "--test", import_fail="mteb (ModuleNotFoundError)")
    assert run.returncode == 1, run.stdout
    assert "cannot import mteb" in run.stdout and "test extra is installed but" in run.stdout
    ok, _ = _setup(tmp_path / "main", "--gpu", import_fail="mteb (ModuleNotFoundError)")
    assert ok.returncode == 0, ok.stdout  # the main job's set-up does not check the test extra


def test_an_unreachable_cpu_index_takes_the_cpu_pair_that_pips_configuration_offers(tmp_path):
    run, pip = _setup(tmp_path, "--cpu", t_versions="2.15.0, 2.14.1, 2.5.1+cpu, 2.5.1, 2.4.0+cpu",
                      tv_versions="0.20.1+cpu, 0.20.1, 0.19.0")
    assert run.returncode == 0, run.stdout + run.stderr
    installs = _pip(pip)
    assert "torch==2.5.1+cpu torchvision==0.20.1+cpu" in installs[0], installs
    assert "-e .[lang]" in installs[1] and "offers a CPU pair" in run.stdout


def test_without_a_cpu_pair_setup_says_what_it_saw_and_how_to_pin_one(tmp_path):
    """As on the machines here: a +cpu torch on local disk but no +cpu torchvision (PyPI's torchvision is built for
    the CUDA torch and does not load beside a +cpu one): the default route, with the pin command."""
    run, pip = _setup(tmp_path, t_versions="2.14.1, 2.13.0+cpu, 2.13.0", tv_versions="0.29.1, 0.28.0")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "CPU builds of torch: 2.13.0+cpu" in run.stdout and "VLBENCH_TORCH=" in run.stdout
    assert "default route" in run.stdout
    assert [i for i in _pip(pip) if "torch" in i] == [], _pip(pip)  # no torch of its own choosing


def test_vlbench_torch_pins_the_pair_before_the_project(tmp_path):
    run, pip = _setup(tmp_path, vlbench_torch="torch==2.13.0+cpu torchvision==0.28.0")
    assert run.returncode == 0, run.stdout + run.stderr
    installs = _pip(pip)
    assert installs[0].endswith("torch==2.13.0+cpu torchvision==0.28.0") and "-e .[lang]" in installs[1], installs
