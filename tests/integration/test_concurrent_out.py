"""Two `vlbench run` processes with one --out: exactly one succeeds, the other refuses at once
with exit 2, and the finished run is never replaced. Real processes, real file locks."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from support.data import ROOT, write_images


def _setup(tmp_path, plugin_env):
    names = write_images(tmp_path / "d", 8)
    rows = [json.loads(x) for x in (ROOT / "tests" / "fixtures" / "flickr30k_excerpt.jsonl").read_text().splitlines()]
    man = tmp_path / "d" / "m.jsonl"
    man.write_text("\n".join(json.dumps({"image": n, "captions": rows[i % len(rows)]["captions"]})
                             for i, n in enumerate(names)))
    env = dict(plugin_env, VLBENCH_CACHE_DIR=str(tmp_path / "cache"))
    base = [sys.executable, "-m", "vlbench", "run", "--dataset", f"custom:{man}", "--batch-size", "2",
            "--num-workers", "0", "--quiet", "--out", str(tmp_path / "run")]
    return base, env


@pytest.mark.slow
@pytest.mark.parametrize("delay", [1.5, 0.0])
def test_same_out_two_processes(plugin_env, tmp_path, delay):
    base, env = _setup(tmp_path, plugin_env)
    first = subprocess.Popen(base + ["--model", "counting:slow=0.3,dim=16"], env=env, cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    second = subprocess.Popen(base + ["--model", "counting:dim=24"], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    outs = [p.communicate(timeout=300) for p in (first, second)]
    codes = [first.returncode, second.returncode]
    assert sorted(codes) == [0, 2], (codes, outs)
    loser = outs[codes.index(2)][1]
    assert ("another vlbench run" in loser or "already holds a finished run" in loser), loser
    assert "Traceback" not in loser
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    winner_model = ["counting:slow=0.3,dim=16", "counting:dim=24"][codes.index(0)]
    assert doc["model"]["spec"] == winner_model
    if delay:
        assert codes == [0, 2]  # the later one is refused; the first one's results stand
    assert not list((tmp_path / "run").glob("*.tmp")) and not list((tmp_path / "run").glob(".*.tmp"))


def test_lock_is_released_when_a_process_dies(tmp_path):
    """A crashed run (SIGKILL) leaves no claim: the rerun that resumes it can take the folder."""
    code = ("import os, signal, sys; from vlbench.util.io import FolderLock; FolderLock(sys.argv[1]).acquire();"
            "os.kill(os.getpid(), signal.SIGKILL)")
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "o")], cwd=ROOT)
    from vlbench.util.io import FolderLock

    lock = FolderLock(tmp_path / "o").acquire()  # the dead process's claim is gone
    child = subprocess.run([sys.executable, "-c", "import sys; from vlbench.util.io import FolderLock;"
                            "FolderLock(sys.argv[1]).acquire()", str(tmp_path / "o")], cwd=ROOT,
                           capture_output=True, text=True)
    assert child.returncode != 0 and "BlockingIOError: pid " in child.stderr  # ours is live: refused
    lock.release()


def test_results_are_never_replaced(tmp_path):
    from vlbench.util.io import write_json

    write_json(tmp_path / "results.json", {"a": 1}, replace=False)
    with pytest.raises(FileExistsError):
        write_json(tmp_path / "results.json", {"a": 2}, replace=False)
    assert json.loads((tmp_path / "results.json").read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]
