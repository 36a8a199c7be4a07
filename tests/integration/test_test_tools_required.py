"""The suite's own rules for external tools and the GPU (support/tools.py, conftest.py's pytest_runtest_setup): a
test whose tool is missing skips with the reason on a developer's machine, and fails where VLBENCH_REQUIRE_TOOLS
names the tool, as scripts/test.sh sets it where it installs the tools, so CI cannot stay green with those tests
skipped. Run as a real pytest session in a subprocess, with the suite's conftest.py loaded as its plug-in."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support.data import ROOT, TESTS

PROBE = '''
import pytest
from support.tools import needs_tool

@needs_tool("frobnicator", False, "no frobnicator on this machine")
def test_needs_a_missing_tool():
    pass

@needs_tool("frobnicator", True, "no frobnicator on this machine")
def test_needs_a_tool_that_is_here():
    pass

@pytest.mark.gpu
def test_on_the_gpu():
    pass
'''


def _pytest(tmp_path, require: str | None):
    (tmp_path / "test_probe.py").write_text(PROBE)
    # neither the tools switch nor the strict-skips switch of the outer run (scripts/test.sh sets both): this
    # inner session is about the tools switch alone (tests/integration/test_strict_skips.py tests the other)
    env = {k: v for k, v in os.environ.items() if k not in ("VLBENCH_REQUIRE_TOOLS", "VLBENCH_STRICT_SKIPS")}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(ROOT)])
    if require is not None:
        env["VLBENCH_REQUIRE_TOOLS"] = require
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-rsfE",
                           "-q", "-W", "ignore::pytest.PytestUnknownMarkWarning", "--rootdir", str(tmp_path),
                           str(tmp_path / "test_probe.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def test_a_missing_tool_skips_with_its_reason_when_not_required(tmp_path):
    run = _pytest(tmp_path, None)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "no frobnicator on this machine" in run.stdout
    skipped = 1 if _cuda() else 2
    assert f"{3 - skipped} passed, {skipped} skipped" in run.stdout, run.stdout[-2000:]
    if not _cuda():
        assert "no CUDA device here" in run.stdout


def test_a_tool_ci_installed_and_then_missing_fails_instead_of_skipping(tmp_path):
    run = _pytest(tmp_path, "chromium, frobnicator,pdflatex")
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-2000:]
    assert "ERROR" in run.stdout and "test_needs_a_missing_tool" in run.stdout  # failed in its set-up
    assert "no frobnicator on this machine" in run.stdout and "VLBENCH_REQUIRE_TOOLS" in run.stdout
    assert "1 passed" in run.stdout and "1 error" in run.stdout, run.stdout[-2000:]  # the tool that is here runs


@pytest.mark.skipif(_cuda(), reason="this machine has a CUDA device: the gpu tests run")
def test_a_gpu_test_fails_without_a_device_when_cuda_is_required(tmp_path):
    run = _pytest(tmp_path, "cuda")
    assert run.returncode == 1
    assert "1 error" in run.stdout and "no CUDA device here" in run.stdout, run.stdout[-2000:]
