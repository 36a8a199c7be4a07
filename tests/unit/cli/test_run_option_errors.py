"""Bad option values and bad folders are clear errors (exit 2) before any work."""

from __future__ import annotations

import errno

import pytest

from vlbench import cli
from vlbench.errors import OptionError
from vlbench.pipeline.run_config import RunConfig, validate


@pytest.fixture
def run_args(counting_plugin, manifest, tmp_path):
    return ["run", "--model", "counting", "--dataset", f"custom:{manifest}", "--quiet", "--num-workers", "0"]


@pytest.mark.parametrize("extra, message", [
    (["--seed", "-1"], "--seed must be a non-negative integer"),
    (["--num-workers", "-1"], "--num-workers must be >= 0"),
    (["--batch-size", "-3"], "--batch-size must be >= 1"),
    (["--batch-size", "0"], "--batch-size must be >= 1"),
    (["--text-batch-size", "-5"], "--text-batch-size must be >= 1"),
    (["--device", "tpu"], "--device 'tpu' is not a device vlbench can use"),
    (["--device", "banana"], "use cpu, cuda, cuda:N (e.g. cuda:0), mps or auto"),
    (["--device", "cuda:x"], "--device 'cuda:x' is not a device"),
])
def test_negative_numbers_are_refused(run_args, tmp_path, capsys, extra, message):
    assert cli.main(run_args + extra + ["--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and "fix:" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()
    # the same check from Python is an OptionError naming the keyword
    field = extra[0][2:].replace("-", "_")
    with pytest.raises(OptionError) as info:
        validate(RunConfig(model="counting", dataset="custom:m.jsonl", out=str(tmp_path / "p"),
                           **{field: extra[1] if field == "device" else int(extra[1])}))
    assert info.value.option == field


@pytest.mark.parametrize("opt", ["--out", "--cache-dir"])
def test_folder_option_that_is_a_file(run_args, tmp_path, capsys, opt):
    f = tmp_path / "afile"
    f.write_text("x")
    args = run_args + [opt, str(f)] + (["--out", str(tmp_path / "o")] if opt != "--out" else [])
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert f"{opt} '{f}' is a file, not a folder" in err
    assert f.read_text() == "x"


def test_folder_option_under_a_file(run_args, tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    assert cli.main(run_args + ["--out", str(f / "sub")]) == 2
    assert "which is a file" in capsys.readouterr().err


@pytest.mark.parametrize("code, text", [(errno.ENOSPC, "the disk is full"), (errno.EROFS, "read-only"),
                                        (errno.EACCES, "permission denied")])
def test_disk_full_while_writing_is_a_clear_error(run_args, tmp_path, capsys, monkeypatch, code, text):
    from vlbench.pipeline import record as runner  # the record step writes the run's files

    def full(*a, **k):
        raise OSError(code, "simulated", str(tmp_path / "o" / "per_query.csv.gz"))

    monkeypatch.setattr(runner, "write_per_query", full)  # the record step writes it (report.py)
    assert cli.main(run_args + ["--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert text in err and "per_query.csv.gz" in err and "resumes" in err


def test_other_os_errors_are_not_disguised(monkeypatch):
    monkeypatch.setattr(cli, "_cmd_ls", lambda args: (_ for _ in ()).throw(OSError(errno.EIO, "io")))
    with pytest.raises(OSError):
        cli.main(["ls"])


@pytest.mark.slow  # a whole run in a subprocess
def test_quiet_run_prints_nothing_not_even_weight_loading_bars(tiny_models, manifest, tmp_path):
    """--quiet silences the libraries' bars too (transformers shows one while loading weights)."""
    import os
    import subprocess
    import sys

    from support.data import ROOT

    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_DISABLE_PROGRESS_BARS",
                                                            "TRANSFORMERS_NO_ADVISORY_WARNINGS")}
    env["VLBENCH_CACHE_DIR"] = str(tmp_path / "cache")
    proc = subprocess.run([sys.executable, "-m", "vlbench", "run", "--model", f"clip:{tiny_models('clip')}",
                           "--dataset", f"custom:{manifest}", "--out", str(tmp_path / "o"), "--quiet",
                           "--num-workers", "0"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert "Loading" not in proc.stderr and "%|" not in proc.stderr, proc.stderr


@pytest.mark.slow  # whole runs to warm the cache
def test_cuda_requested_without_cuda_on_a_warm_cache(tiny_models, manifest, tmp_path, capsys):
    """A warm run loads no model, so the missing device used to surface only when scoring, as a traceback,
    leaving an empty run folder behind."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    model = f"clip:{tiny_models('clip')}"
    common = ["run", "--model", model, "--dataset", f"custom:{manifest}", "--quiet", "--num-workers", "0"]
    assert cli.main(common + ["--out", str(tmp_path / "warm")]) == 0
    assert cli.main(common + ["--out", str(tmp_path / "o"), "--device", "cuda"]) == 2
    assert "--device cuda was asked for but CUDA is not available" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow  # whole runs to warm the cache
def test_unknown_device_is_refused_on_a_warm_cache_too(tiny_models, manifest, tmp_path, capsys):
    """A warm run loads no model: '--device tpu' used to be recorded in results.json with exit 0."""
    model = f"clip:{tiny_models('clip')}"
    common = ["run", "--model", model, "--dataset", f"custom:{manifest}", "--quiet", "--num-workers", "0"]
    assert cli.main(common + ["--out", str(tmp_path / "warm")]) == 0
    assert cli.main(common + ["--out", str(tmp_path / "o"), "--device", "tpu"]) == 2
    assert "--device 'tpu' is not a device" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
