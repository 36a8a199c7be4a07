"""A model in the local Hub cache while the Hub does not answer: the preflight's probe already knows, so the run
switches the Hub client to its local cache at once. Before, every file of the model was asked for again with five
retries and backoff (45 retry lines and four minutes for a tiny model whose run takes seconds)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from support.data import ROOT, write_manifest

COMMIT = "0123456789abcdef0123456789abcdef01234567"

# runs vlbench's command line counting the connections this process attempts to the dead endpoint's port
COUNTING = """
import atexit, os, socket, sys
port, seen = int(sys.argv[1]), []
connect = socket.socket.connect
def counted(self, address):
    if isinstance(address, tuple) and len(address) >= 2 and address[1] == port:
        seen.append(address)
    return connect(self, address)
socket.socket.connect = counted
atexit.register(lambda: open(sys.argv[2], "w").write(str(len(seen))))
from vlbench.cli import main
sys.exit(main(sys.argv[3:]))
"""


def _model_in_hub_cache(hub: Path, repo: str, folder: Path) -> None:
    """A saved model folder laid out as huggingface_hub's cache keeps a downloaded snapshot (blobs + links)."""
    storage = hub / f"models--{repo.replace('/', '--')}"
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            blob = storage / "blobs" / hashlib.sha256(data).hexdigest()
            blob.parent.mkdir(parents=True, exist_ok=True)
            blob.write_bytes(data)
            link = storage / "snapshots" / COMMIT / p.relative_to(folder)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(blob, link.parent))
    (storage / "refs").mkdir(parents=True, exist_ok=True)
    (storage / "refs" / "main").write_text(COMMIT)


def test_cached_hub_model_with_a_silent_hub_makes_no_retries(tiny_models, tmp_path):
    _model_in_hub_cache(tmp_path / "hf-home" / "hub", "testorg/tiny-clip", tiny_models("clip"))
    manifest = write_manifest(tmp_path / "d", 4)
    path = f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf-home"), HF_ENDPOINT="http://127.0.0.1:9",  # nothing listens
               VLBENCH_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=path)
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "VLBENCH_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_CACHE"):
        env.pop(var, None)
    count = tmp_path / "attempts"
    done = subprocess.run([sys.executable, "-c", COUNTING, "9", str(count), "run", "--model", "clip:testorg/tiny-clip",
                           "--dataset", f"custom:{manifest}", "--out", str(tmp_path / "run"), "--num-workers", "0",
                           "--validity", "off"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "the Hub at 127.0.0.1:9 does not answer: using the local cache only" in done.stderr
    assert "Retrying" not in done.stderr and "Could not reach the Hub" not in done.stderr, done.stderr
    assert int(count.read_text()) == 1  # the preflight's probe, and nothing after it (67 attempts before)
    assert (tmp_path / "run" / "results.json").is_file()
