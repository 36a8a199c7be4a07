"""scripts/setup.sh's choice of torch build, run for real against a stand-in environment: its python records the
pip commands instead of installing (nothing is downloaded), its answers say whether torch is installed and whether
PyTorch's CPU index answers. Checked: --cpu and the automatic CPU route (new environment, no NVIDIA GPU) install
torch + torchvision from the CPU index before the project; an unreachable index falls back to the default route
with a message; an environment that has torch is never changed; --gpu keeps the default route; a bad option is
refused."""

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
  *"-m pip"*) echo "PIP $args" >> "$LOG"; exit 0;;
  *"find_spec('torch')"*) echo "$HAS_TORCH"; exit 0;;
  *urllib*) [ "$INDEX_UP" = 1 ] && exit 0 || exit 1;;
  *"--version"*) echo "Python 3.stand-in"; exit 0;;
  *"print(torch.__version__)"*) echo "2.0.0+cu999"; exit 0;;
  *) echo "torch 2.0.0, transformers 5.0"; exit 0;;
esac
'''


def _setup(tmp_path: Path, *options: str, has_torch: bool = False, index_up: bool = False):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name in ("python", "vlbench"):
        (venv / "bin" / name).write_text(FAKE_PYTHON)
        (venv / "bin" / name).chmod(0o755)
    path = tmp_path / "path"  # the basic tools, and no nvidia-smi
    path.mkdir()
    for tool in ("bash", "env", "cat", "sed", "awk", "grep", "uname", "timeout", "dirname", "id", "python3"):
        if shutil.which(tool):
            (path / tool).symlink_to(shutil.which(tool))
    log = tmp_path / "pip.log"
    log.touch()
    env = dict(os.environ, VLBENCH_VENV=str(venv), PATH=str(path), LOG=str(log), HAS_TORCH="1" if has_torch else "0",
               INDEX_UP="1" if index_up else "0")
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
    assert '-e .[test]' in installs[1], installs
    assert "no NVIDIA GPU here" in run.stdout


def test_an_unreachable_cpu_index_falls_back_to_the_default_route_with_a_message(tmp_path):
    run, pip = _setup(tmp_path, "--cpu", index_up=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "cannot be reached" in run.stdout and "default route" in run.stdout
    installs = _pip(pip)
    assert not any("download.pytorch.org" in i for i in installs) and any("-e .[test]" in i for i in installs)


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
