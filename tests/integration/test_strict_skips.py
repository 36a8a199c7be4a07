"""CI cannot pass by skipping: with VLBENCH_STRICT_SKIPS=1 (scripts/test.sh sets it) the suite prints every skip
with its reason and fails when one is not on tests/support/skips.py's allowlist (a gpu test, real weights). Run as
real pytest sessions in subprocesses with the suite's conftest.py as their plug-in; mteb is hidden from the child
by an import hook (sitecustomize), as if its install had failed, and the real MTEB oracle file is run there."""

from __future__ import annotations

import os
import subprocess
import sys

from support.data import ROOT, TESTS

PROBE = '''
import pytest

@pytest.mark.gpu
def test_on_the_gpu():
    pass

def test_plain():
    pass
'''

PLAIN_SKIP = '''
import pytest

def test_skips_for_no_listed_reason():
    pytest.skip("some data is not here")
'''

HIDE = '''
import importlib.abc
import sys

class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in HIDDEN or name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)", name=name)
        return None

HIDDEN = {"mteb"}
sys.meta_path.insert(0, _Hide())
'''


def _pytest(tmp_path, files: dict[str, str], strict: bool, hide: bool = False):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if k not in ("VLBENCH_REQUIRE_TOOLS", "VLBENCH_STRICT_SKIPS")}
    path = [str(TESTS), str(ROOT)]
    if hide:
        (tmp_path / "hide").mkdir(exist_ok=True)
        (tmp_path / "hide" / "sitecustomize.py").write_text(HIDE)
        path.insert(0, str(tmp_path / "hide"))
    env["PYTHONPATH"] = os.pathsep.join(path)
    if strict:
        env["VLBENCH_STRICT_SKIPS"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q",
                           "-W", "ignore::pytest.PytestUnknownMarkWarning", "--rootdir", str(tmp_path),
                           *[str(tmp_path / n) for n in files]],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


def _mteb_oracle() -> str:
    return (TESTS / "oracle" / "test_mteb_export_oracle.py").read_text()


def test_a_missing_test_extra_package_fails_the_strict_run_instead_of_skipping(tmp_path):
    run = _pytest(tmp_path, {"test_mteb_probe.py": _mteb_oracle()}, strict=True, hide=True)
    out = run.stdout
    assert run.returncode == 1, out[-3000:] + run.stderr[-2000:]
    assert "NOT ALLOWED" in out and "mteb is not installed" in out and "not on the allowlist" in out, out[-3000:]
    assert "failed" not in out.splitlines()[-1] and "skipped" in out.splitlines()[-1]  # red by the skips alone
    print(out[out.index("skipped tests"):])


def test_the_same_missing_package_only_skips_outside_the_strict_run(tmp_path):
    run = _pytest(tmp_path, {"test_mteb_probe.py": _mteb_oracle()}, strict=False, hide=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " skipped" in run.stdout and "NOT ALLOWED" not in run.stdout


def test_an_allowed_skip_is_listed_with_its_entry_and_passes(tmp_path):
    import torch

    run = _pytest(tmp_path, {"test_probe.py": PROBE}, strict=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    if torch.cuda.is_available():
        assert "no test skipped" in run.stdout
    else:
        assert "allowed (gpu): test_probe.py::test_on_the_gpu: no CUDA device here" in run.stdout, run.stdout[-2000:]


def test_a_skip_that_is_not_on_the_allowlist_fails_the_strict_run(tmp_path):
    run = _pytest(tmp_path, {"test_plain_skip.py": PLAIN_SKIP}, strict=True)
    assert run.returncode == 1, run.stdout[-3000:]
    assert "NOT ALLOWED: test_plain_skip.py::test_skips_for_no_listed_reason: some data is not here" in run.stdout


def test_a_run_with_mteb_installed_runs_the_mteb_oracle(tmp_path):
    """The other side: where the test extra is installed (as scripts/test.sh makes it), the oracle runs."""
    from support.tools import has_package, missing_tool

    if not has_package("mteb"):
        missing_tool("mteb", "mteb is not installed (the test extra: pip install -e '.[test]' from the clone)")
    run = _pytest(tmp_path, {"test_mteb_here.py": _mteb_oracle()}, strict=True)
    assert run.returncode == 0 and "no test skipped" in run.stdout, run.stdout[-3000:]
