"""Every script in scripts/ has an argument parser: ``--help`` prints its usage, exits 0 and creates nothing (run
from an empty temporary folder, with an empty cache and home; scripts/dev/readme_demo.py once took ``--help`` as
its output folder and a 21 MB ``--help/`` was committed). Modules whose name starts with ``_`` are shared helpers
of the scripts, imported and never run: they have no ``__main__`` block."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.data import ROOT

SCRIPTS = ROOT / "scripts"


def _scripts() -> list[Path]:
    return sorted(p for p in SCRIPTS.rglob("*") if p.suffix in (".py", ".sh") and not p.name.startswith("_"))


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _git_status() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=all"],
                          capture_output=True, text=True, timeout=60).stdout


def test_every_script_is_found():
    names = {p.name for p in _scripts()}
    assert {"setup.sh", "test.sh", "readme_demo.py", "same_numbers.py", "corruption_agreement.py"} <= names


def test_helper_modules_are_not_scripts():
    for p in SCRIPTS.rglob("_*.py"):
        assert "__main__" not in p.read_text(), f"{p} starts with '_' (a helper) but can be run as a script"


@pytest.mark.parametrize("script", _scripts(), ids=lambda p: str(p.relative_to(SCRIPTS)))
def test_help_prints_usage_and_creates_nothing(script, tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home), VLBENCH_CACHE_DIR=str(tmp_path / "cache"), HF_HUB_OFFLINE="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    before = _git_status()
    cmd = ["bash", str(script), "--help"] if script.suffix == ".sh" else [sys.executable, str(script), "--help"]
    run = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    text = run.stdout.lower()
    if script.suffix == ".py":
        assert "usage:" in text, run.stdout[-2000:]
    else:
        assert f"bash scripts/{script.name}" in run.stdout, run.stdout[-2000:]
    assert _tree(cwd) == [], f"{script.name} --help created {_tree(cwd)}"
    assert not (tmp_path / "cache").exists(), f"{script.name} --help created a cache"
    assert _git_status() == before, f"{script.name} --help changed the repository"
