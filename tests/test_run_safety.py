"""Issue #12 for `vlbench run`: bad option values stop with exit 2 naming the option before any work; two
runs given the same --out: exactly one finishes, the other is refused; the caller's config is not changed."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, TESTS

MODEL = "counting:dim=16"


@pytest.mark.parametrize("flags, option", [(["--seed", "-1"], "--seed"), (["--num-workers", "-2"], "--num-workers"),
                                           (["--batch-size", "0"], "--batch-size")])
def test_invalid_numbers_exit_2_before_any_work(flags, option, manifest, tmp_path, capsys, counting_plugin):
    from vlbench.cli import main

    out = tmp_path / "run"
    rc = main(["run", "--model", MODEL, "--dataset", f"custom:{manifest}", "--out", str(out), "--quiet", *flags])
    err = capsys.readouterr().err
    assert rc == 2 and option in err and "e.g." in err
    assert not out.exists()


def test_out_or_cache_dir_that_is_a_file_exits_2(manifest, tmp_path, capsys, counting_plugin):
    from vlbench.cli import main

    afile = tmp_path / "afile"
    afile.write_text("x")
    for option in ("--out", "--cache-dir"):
        rc = main(["run", "--model", MODEL, "--dataset", f"custom:{manifest}", option, str(afile / "sub"), "--quiet"])
        err = capsys.readouterr().err
        assert rc == 2 and f"{option} {afile / 'sub'}" in err and "is a file" in err


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write anywhere")
def test_unwritable_out_exits_2(manifest, tmp_path, capsys, counting_plugin):
    from vlbench.cli import main

    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    rc = main(["run", "--model", MODEL, "--dataset", f"custom:{manifest}", "--out", str(ro / "run"), "--quiet"])
    assert rc == 2 and "not writable" in capsys.readouterr().err


def test_run_does_not_change_the_callers_config(manifest, tmp_path, counting_plugin):
    from vlbench.benchmark.runner import RunConfig, run

    cfg = RunConfig(model=MODEL, dataset=f"custom:{manifest}", out=str(tmp_path / "r"), num_workers=0, n_boot=10,
                    no_cache=True, quiet=False)
    before = dataclasses.replace(cfg)
    run(cfg)
    assert cfg == before
    assert not (tmp_path / "r" / ".vlbench-run.lock").exists()


_CHILD = """
import sys
from vlbench import registry
registry.models.register("counting", "vlbench_counting_plugin:load", source="plugin:test")
from vlbench.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_two_processes_same_out_exactly_one_finishes(manifest, tmp_path):
    out = tmp_path / "shared-out"
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{TESTS / 'plugin_pkg'}", OMP_NUM_THREADS="1")
    args = [sys.executable, "-c", _CHILD, "run", "--model", MODEL, "--dataset", f"custom:{manifest}", "--out", str(out),
            "--quiet", "--num-workers", "0", "--no-cache", "--perturb", "shuffle-all-words", "--bootstrap", "20"]
    procs = [subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    done = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert sorted(rc for rc, _ in done) == [0, 2], done
    err = next(e for rc, e in done if rc == 2)
    assert "in use by another vlbench run" in err or "already holds a finished run" in err
    doc = json.loads((out / "results.json").read_text())
    assert doc["model"]["spec"] == MODEL and not (out / ".vlbench-run.lock").exists()
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


def test_lock_of_a_killed_run_is_taken_over_and_a_live_one_is_not(tmp_path):
    from vlbench.benchmark.runner import LOCK_FILE, claim_out, release_out
    from vlbench.errors import VlbenchError

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    out = tmp_path / "o"
    out.mkdir()
    (out / LOCK_FILE).write_text(dead.stdout.strip() + "\n")  # a run that was SIGKILLed left this
    lock = claim_out(out)
    assert lock.read_text().strip() == str(os.getpid())
    with pytest.raises(VlbenchError, match=f"in use by another vlbench run \\(pid {os.getpid()}"):
        claim_out(out)  # live (this process): refused
    release_out(lock)
    assert sorted(p.name for p in out.iterdir()) == []
