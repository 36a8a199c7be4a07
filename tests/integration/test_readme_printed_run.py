"""The run printed at the top of README.md is what the command prints: the demo inputs built as the README says
(`python scripts/dev/readme_demo.py DIR`), the `$ vlbench run ...` line of the README's first text block run as
written inside DIR, and its stdout compared with the block line by line (numbers and layout). When this fails
after an intended change of the printout or the numbers, update the README's block from the real run."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support.data import ROOT

pytestmark = pytest.mark.slow  # builds two tiny models, then a whole run with two perturbations


def readme_block() -> tuple[list[str], list[str]]:
    """(the command of the README's printed run, as argv; the lines printed under it)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("```text\n$ ") + len("```text\n")
    block = text[start:text.index("\n```", start)].splitlines()
    return shlex.split(block[0][2:]), block[1:]


def test_the_readme_printed_run_is_what_the_command_prints(tmp_path):
    command, printed = readme_block()
    assert command[:2] == ["vlbench", "run"], command
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLBENCH_CACHE_DIR=str(tmp_path / "cache"))
    demo = tmp_path / "demo"
    build = subprocess.run([sys.executable, str(ROOT / "scripts" / "dev" / "readme_demo.py"), str(demo)], env=env,
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    script = Path(sys.executable).parent / "vlbench"  # the console script, as a user types it
    argv = [str(script), *command[1:]] if script.is_file() else [sys.executable, "-m", "vlbench", *command[1:]]
    run = subprocess.run(argv, cwd=demo, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    got = [line.rstrip() for line in run.stdout.rstrip("\n").splitlines()]
    want = [line.rstrip() for line in printed]
    diff = [f"line {i + 1}:\n  README: {w!r}\n  run:    {g!r}" for i, (w, g) in enumerate(zip(want, got)) if w != g]
    assert not diff and len(got) == len(want), (f"{len(want)} README lines, {len(got)} printed\n" + "\n".join(diff))
